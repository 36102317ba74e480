"""Reviews to try: the test split of a checkpoint's own data, or a built-in set.

The built-in set (``assets/examples.jsonl``) was written for this project: phone
and accessory reviews, six per star rating, from two words to ~250 tokens. It is
used when the checkpoint's data files are not on this machine.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from reviewbert.data import splits_from_meta

EXAMPLES_FILE = Path(__file__).resolve().parents[1] / "assets" / "examples.jsonl"
BUILTIN_SOURCE = "built-in examples"


@dataclass(frozen=True)
class Review:
    text: str
    stars: int          # the true rating, 1..5
    source: str         # where it came from, shown in the UI


def builtin_examples(path: Path = EXAMPLES_FILE) -> list[Review]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            out.append(Review(d["text"], int(d["stars"]), BUILTIN_SOURCE))
    return out


def test_split_examples(meta: dict, tokenizer=None, data_dir=None) -> list[Review]:
    """The test split the checkpoint was evaluated on, rebuilt from its reviewbert.json.

    Raises ``reviewbert.data.DataError`` (a ValueError) when the files are missing.
    """
    splits = splits_from_meta(meta, data_dir=data_dir, tokenizer=tokenizer)
    return [Review(e.text, int(e.stars), f"test split ({e.source})") for e in splits.test]


def filter_stars(reviews: list[Review], stars: int | None) -> list[Review]:
    return [r for r in reviews if stars is None or r.stars == stars]


def sample(reviews: list[Review], rng: random.Random, stars: int | None = None,
           misclassified: Callable[[Review], bool] | None = None,
           max_tries: int = 25) -> tuple[Review | None, str]:
    """One review with the wanted true rating; with ``misclassified``, keep drawing
    (at most ``max_tries`` predictions) until one is predicted wrong.

    Returns (review or None, a note for the user, "" when nothing to say).
    """
    pool = filter_stars(reviews, stars)
    if not pool:
        return None, f"no review with {stars} star(s) in this set"
    if misclassified is None:
        return rng.choice(pool), ""
    order = rng.sample(pool, k=min(max_tries, len(pool)))
    for r in order:
        if misclassified(r):
            return r, ""
    return order[-1], (f"no misclassified review found in {len(order)} tries; "
                       "showing the last one drawn (the model got it right)")
