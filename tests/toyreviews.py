"""A separable toy review set for training tests (used by test_train, test_resume,
test_cli, test_distributed): each text carries one word that gives its stars away."""
from __future__ import annotations

import csv
import os
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CUE = {1: "terrible", 2: "bad", 3: "okay", 4: "good", 5: "excellent"}
FILLER = ("phone battery screen case charger price delivery camera sound box seller "
          "cable button speaker color weight size app update signal").split()


def toy_rows(n: int, seed: int = 0) -> list[tuple[str, int]]:
    """n unique reviews, stars cycling 1..5, the cue word at a random position."""
    rng = random.Random(seed)
    rows, seen = [], set()
    while len(rows) < n:
        stars = len(rows) % 5 + 1
        words = [rng.choice(FILLER) for _ in range(rng.randint(3, 16))]
        for _ in range(2):  # twice: a clear signal, so a tiny random BERT learns it reliably
            words.insert(rng.randrange(len(words) + 1), CUE[stars])
        text = " ".join(words)
        if text not in seen:
            seen.add(text)
            rows.append((text, stars))
    return rows


def write_toy_csv(path: Path, n: int = 500, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["review", "rating"])
        w.writerows(toy_rows(n, seed))
    return path


def quiet_env(**extra) -> dict:
    """One thread per run: the test machine's cores are shared, and tiny models gain nothing."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", **extra}


def cli(*args, timeout=300, env=None, **kw) -> subprocess.CompletedProcess:
    """Run ``python -m reviewbert ARGS`` from the repository root."""
    return subprocess.run([sys.executable, "-m", "reviewbert", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env=env or quiet_env(), **kw)
