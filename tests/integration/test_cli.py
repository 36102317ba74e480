"""``python -m reviewbert``: clean errors, evaluate/predict output, and the real model end to end."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from reviewbert.cli import main

from toyreviews import ROOT, cli, quiet_env, write_toy_csv


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory, tiny_model_dir):
    """A tiny model trained for one epoch through the CLI, and its data file."""
    d = tmp_path_factory.mktemp("cli")
    toy = write_toy_csv(d / "toy.csv", n=250)
    run = d / "run"
    res = cli("train", "--data", toy, "--base-model", tiny_model_dir, "--max-length", "32",
              "--epochs", "1", "--out", run)
    assert res.returncode == 0, res.stderr[-3000:]
    return run, toy, res


def test_train_prints_data_report_first_then_summary(toy_run):
    _, _, res = toy_run
    out = res.stdout
    assert out.index("Balanced splits") < out.index("device:") < out.index("best epoch 1")
    assert "epoch 1/1" in res.stderr  # the tqdm bar


def test_evaluate_json_rebuilds_the_test_split(toy_run, capsys):
    run, toy, _ = toy_run
    assert main(["evaluate", "--checkpoint", str(run), "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    res = json.loads(out[-1])
    meta = json.loads((run / "reviewbert.json").read_text())
    assert res["n"] == meta["split_sizes"]["test"] == 50  # 50 per class * 0.2
    assert res["labels"] == ["1 star", "2 stars", "3 stars", "4 stars", "5 stars"]
    assert res["checkpoint"].endswith("best")
    assert sum(map(sum, res["confusion_matrix"])) == res["n"]
    # each class has 10 test reviews: the rows of the confusion matrix say so
    assert [sum(r) for r in res["confusion_matrix"]] == [10] * 5
    # same numbers as recorded for the best epoch during training
    assert res["metrics"]["accuracy"] == pytest.approx(meta["best"]["test"]["accuracy"])
    assert res["metrics"]["loss"] == pytest.approx(meta["best"]["test"]["loss"], rel=1e-4)
    # --data naming the training file gives the same split; --split all takes every row
    assert main(["evaluate", "--checkpoint", str(run), "--data", str(toy), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["n"] == 50
    assert main(["evaluate", "--checkpoint", str(run / "last"), "--data", str(toy),
                 "--split", "all", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["n"] == 250


def test_evaluate_test_split_refuses_other_files(toy_run, tmp_path, capsys):
    run, _, _ = toy_run
    other = write_toy_csv(tmp_path / "other.csv", n=50, seed=7)
    assert main(["evaluate", "--checkpoint", str(run), "--data", str(other)]) == 2
    assert "--split all" in one_error_line(capsys)
    # the same name with other contents: refused too (sha256 from the read itself)
    same_name = write_toy_csv(tmp_path / "elsewhere" / toy_run[1].name, n=50, seed=7)
    assert main(["evaluate", "--checkpoint", str(run), "--data", str(same_name)]) == 2
    assert "sha256" in one_error_line(capsys)


def test_evaluate_saves_predictions_csv_and_parquet(toy_run, tmp_path, capsys, monkeypatch):
    import pandas as pd
    run, toy, _ = toy_run
    csv, pq = tmp_path / "p.csv", tmp_path / "p.parquet"
    assert main(["evaluate", "--checkpoint", str(run), "--save-predictions", str(csv),
                 "--json"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    df = pd.read_csv(csv)
    assert len(df) == res["n"] == 50 and res["predictions"] == str(csv)
    probs = df[[f"prob {n}" for n in res["labels"]]].to_numpy()
    assert np.allclose(probs.sum(1), 1, atol=1e-4)
    assert (df["predicted_label"] == [res["labels"][i] for i in probs.argmax(1)]).all()
    assert df["correct"].mean() == pytest.approx(res["metrics"]["accuracy"])
    assert (df["n_tokens"] > 0).all() and set(df["stars"]) == {1, 2, 3, 4, 5}
    # the second run reads the prediction cache and writes the same rows as Parquet
    assert main(["evaluate", "--checkpoint", str(run), "--save-predictions", str(pq),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cached"] is True
    pd.testing.assert_frame_equal(pd.read_parquet(pq), df, check_dtype=False, atol=1e-6)
    # a set too big to hold is streamed in chunks to the file: same predictions
    from reviewbert.analysis import sources
    monkeypatch.setattr(sources, "CACHE_MAX_REVIEWS", 10)
    big = tmp_path / "all.parquet"
    assert main(["evaluate", "--checkpoint", str(run), "--data", str(toy), "--split", "all",
                 "--save-predictions", str(big), "--json"]) == 0
    streamed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert streamed["cache"] is None and streamed["n"] == 250
    all_rows = pd.read_parquet(big)
    assert len(all_rows) == 250
    same = all_rows.merge(df, on="text", suffixes=("", "_test"))
    assert len(same) == 50
    assert np.allclose(same["prob 1 star"], same["prob 1 star_test"], atol=1e-3)


def test_evaluate_under_accelerate_launch_splits_the_work(toy_run, tmp_path):
    """Two CPU processes, each scoring its share; one file, rows in data order."""
    import subprocess
    import sys
    from pathlib import Path

    import pandas as pd
    run, toy, _ = toy_run
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    common = ["evaluate", "--checkpoint", str(run), "--data", str(toy), "--split", "all",
              "--no-cache", "--json"]
    res = cli(*common, "--save-predictions", one)
    assert res.returncode == 0, res.stderr[-3000:]
    launcher = Path(sys.executable).with_name("accelerate")
    # --multi_gpu is Accelerate's torchrun launcher; with no GPU the processes use gloo on
    # the CPU (--cpu alone would start one process)
    p = subprocess.run([str(launcher), "launch", "--multi_gpu", "--num_processes", "2",
                        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend",
                        "no", "-m", "reviewbert", *common, "--save-predictions", str(two)],
                       cwd=ROOT, env=quiet_env(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    assert len(out) == 1 and out[0]["processes"] == 2       # printed by the main process only
    single = json.loads(res.stdout.strip().splitlines()[-1])
    assert out[0]["n"] == single["n"] == 250
    assert out[0]["metrics"]["loss"] == pytest.approx(single["metrics"]["loss"], rel=1e-5)
    a, b = pd.read_csv(one), pd.read_csv(two)
    assert len(b) == 250 and (a["text"] == b["text"]).all()      # every review once, in order
    cols = [c for c in a.columns if c.startswith("prob ")]
    # the same batches as one process (up to bf16 rounding where a batch's padding differs)
    np.testing.assert_allclose(a[cols].to_numpy(), b[cols].to_numpy(), atol=1e-4)


def test_predict_json(toy_run, capsys):
    run, _, _ = toy_run
    assert main(["predict", "--checkpoint", str(run), "this phone is excellent", "--json"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    probs = res["probabilities"]
    assert list(probs) == ["1 star", "2 stars", "3 stars", "4 stars", "5 stars"]
    assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-4)
    assert res["label"] == max(probs, key=probs.get) and 1 <= res["expected_stars"] <= 5


def test_errors_are_one_line_and_exit_2(toy_run, tmp_path, capsys):
    run, toy, _ = toy_run
    assert main(["predict", "--checkpoint", str(tmp_path / "nope"), "text"]) == 2
    assert "not found" in one_error_line(capsys)
    assert main(["predict", "--checkpoint", str(run), "   "]) == 2
    assert "empty" in one_error_line(capsys)
    broken = tmp_path / "broken"
    shutil.copytree(run / "best", broken)
    (broken / "model.safetensors").unlink()
    assert main(["evaluate", "--checkpoint", str(broken), "--split", "all",
                 "--data", str(toy)]) == 2
    assert "safetensors" in one_error_line(capsys)
    assert main(["evaluate", "--checkpoint", str(run), "--split", "all",
                 "--data", str(tmp_path / "missing.csv")]) == 2
    one_error_line(capsys)
    bad = tmp_path / "bad.csv"
    bad.write_text("colour,size\nred,3\n")
    assert main(["train", "--data", str(bad), "--out", str(tmp_path / "r")]) == 2
    one_error_line(capsys)
    assert main(["train", "--out", str(tmp_path / "r2")]) == 2
    assert "--data" in one_error_line(capsys)
    assert main(["train", "--out", str(tmp_path / "r3"), "--data", str(toy),
                 "--fractions", "0.5", "0.5", "0.5"]) == 2
    one_error_line(capsys)
    assert main(["train", "--out", str(tmp_path / "nothing"), "--resume"]) == 2
    one_error_line(capsys)
    # and from a real process: no traceback, just the line
    res = cli("predict", "--checkpoint", tmp_path / "nope", "text")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith("error: ")


@pytest.mark.e2e
def test_real_model_on_real_reviews_end_to_end(tmp_path, data_dir):
    """The embedded MiniLM fine-tuned for one epoch on 400 real reviews, all via the CLI."""
    data = data_dir / "unlocked_mobile_10k.csv"
    run = tmp_path / "real"
    res = cli("train", "--data", data, "--max-per-class", "80", "--max-length", "96",
              "--epochs", "1", "--out", run, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Balanced splits" in res.stdout

    res = cli("evaluate", "--checkpoint", run, "--data", data, "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    ev = json.loads(res.stdout.strip().splitlines()[-1])
    assert ev["n"] == 80 == sum(map(sum, ev["confusion_matrix"]))  # 16 per class
    m = ev["metrics"]
    assert 0 <= m["accuracy"] <= m["relaxed_accuracy"] <= 1
    assert m["accuracy"] > 0.2  # better than chance after one epoch (usually ~0.4)
    assert 0.5 < m["auc"] <= 1 and 0 < m["loss"] < 3

    res = cli("predict", "--checkpoint", run, "Terrible phone, broke after two days.",
              "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    p = json.loads(res.stdout.strip().splitlines()[-1])
    assert math.isclose(sum(p["probabilities"].values()), 1.0, abs_tol=1e-4)

    # a plain Hugging Face pipeline reads best/ with no ReviewBERT code
    from transformers import pipeline
    clf = pipeline("text-classification", model=str(run / "best"), device="cpu")
    out = clf(["Great phone, love it!", "Awful. Returned it."])
    names = {"1 star", "2 stars", "3 stars", "4 stars", "5 stars"}
    assert all(o["label"] in names and 0 < o["score"] <= 1 for o in out)
    assert len(clf("fine", top_k=None)) == 5
