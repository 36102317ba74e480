"""The redesign changed no behaviour: a tiny seeded training run, and every subcommand's
flags, match what the code before it produced (main at 3620edc).

``data/pinned_run_3620edc.json`` was recorded by that code: the same command as here, on
the tiny random BERT of conftest.make_tiny_model and the 200-review toy set, in fp32 with
one thread. On the machine that recorded it the redesigned code gives bit-identical
weights (the sha256 in the file; the README's redesign notes). Other CPUs (AVX2,
AVX-512, AMX) sum in other orders, so here weights and metrics are compared within a
tolerance far below what any real change makes: a different seed, shuffle, learning-rate
schedule or RNG order moves the losses and weight norms by percents, not by 1e-3.

``data/cli_flags_3620edc.json``: each subcommand's flags as that code's parsers held them
(``card`` was then ``python -m reviewbert.training.card``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from reviewbert.cli import build_parser

from toyreviews import cli, quiet_env, write_toy_csv

HERE = Path(__file__).parent / "data"
PINNED = json.loads((HERE / "pinned_run_3620edc.json").read_text())
RTOL = 1e-3
# Attention key biases get no gradient in exact arithmetic (a bias added to every key shifts
# each query's scores by one constant, which softmax ignores): trained, they hold rounding
# noise (norm 1e-5 here), which differs between CPU kinds (AMX Xeon 2.9e-5, AVX-512 EPYC
# 1.6e-5). Norms are compared within RTOL or this absolute floor, whichever is larger: the
# floor decides only for the key biases and norms under 0.05 (the smallest other is 0.031).
NOISE = 5e-5
# Flags added to a subcommand since the redesign, on purpose: {command: [flag]}
ADDED: dict[str, list[str]] = {
    "search": ["--preset"],          # issue 28: the seed report's grid
    "evaluate": ["--embedding-layer", "--embedding-pooling", "--save-embeddings"],   # issue 26
    "report": ["--drivers-sample", "--map"],                                          # issue 26
    "faithfulness": ["--lime-samples"],                                               # issue 27
}


@pytest.fixture(scope="module")
def pinned_run(tmp_path_factory, tiny_model_dir):
    out = tmp_path_factory.mktemp("pinned")
    csv = write_toy_csv(out / "toy.csv", n=200)
    proc = cli("train", "--data", csv, "--base-model", tiny_model_dir, "--max-length", 32,
               "--lr-bert", "1e-3", "--lr-classifier", "1e-2", "--epochs", 4, "--batch-size", 8,
               "--seed", 0, "--mixed-precision", "no", "--out", out / "run",
               env=quiet_env(OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out / "run"


def test_the_tiny_seeded_run_trains_as_before_the_redesign(pinned_run):
    rows = [json.loads(line) for line in (pinned_run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["epoch"], r["split"], r["n"], r["step"]) for r in rows] == \
        [(r["epoch"], r["split"], r["n"], r["step"]) for r in PINNED["metrics"]]
    for got, want in zip(rows, PINNED["metrics"]):
        assert got["loss"] == pytest.approx(want["loss"], rel=RTOL), (got["epoch"], got["split"])
        assert got["auc"] == pytest.approx(want["auc"], abs=0.02)
        # one review of 20 may fall on the other side of a tie on another CPU kind
        assert abs(got["accuracy"] - want["accuracy"]) <= 0.051
    steps = [json.loads(line)["loss"] for line in (pinned_run / "steps.jsonl").read_text()
             .splitlines()]
    assert steps == pytest.approx(PINNED["step_losses"], rel=RTOL)
    meta = json.loads((pinned_run / "reviewbert.json").read_text())
    assert meta["best"]["epoch"] == PINNED["best_epoch"]


def test_the_tiny_seeded_run_ends_with_the_same_weights(pinned_run):
    weights = load_file(str(pinned_run / "best" / "model.safetensors"))
    assert sorted(weights) == sorted(PINNED["weights"])
    for name, t in weights.items():
        want = PINNED["weights"][name]
        assert float(t.double().norm()) == pytest.approx(want["l2"], rel=RTOL, abs=NOISE), name
        assert float(t.double().abs().mean()) == pytest.approx(want["mean_abs"], rel=RTOL,
                                                               abs=NOISE), name
    digest = hashlib.sha256((pinned_run / "best" / "model.safetensors").read_bytes()).hexdigest()
    print(f"best/model.safetensors sha256 {digest} (recorded: "
          f"{PINNED['sha256']['best/model.safetensors']}; equal on the recording machine)")


def _flags(p: argparse.ArgumentParser) -> list[list[str]]:
    return sorted(sorted(a.option_strings) if a.option_strings else [a.dest]
                  for a in p._actions if not isinstance(a, argparse._SubParsersAction))


def test_every_subcommand_keeps_its_flags():
    recorded = json.loads((HERE / "cli_flags_3620edc.json").read_text())
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command, flags in recorded.items():
        assert command in sub.choices, command
        now = _flags(sub.choices[command])
        extra = [f for f in now if f not in flags]
        assert [f for f in flags if f not in now] == [], f"{command} lost flags"
        assert sorted(f[0] for f in extra) == sorted(ADDED.get(command, [])), \
            f"{command} has new flags {extra}: add them to ADDED on purpose"
