"""Knowledge distillation (issue 12): the loss by hand, the teachers' split check, and a
student trained on the tiny random BERT from a teacher on the same split."""
from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from test_class_balance import imbalanced, tiny_cfg  # noqa: F401 (fixture)
from test_train import one_thread  # noqa: F401 (autouse: one torch thread per test)

from reviewbert.config import TrainConfig, add_arguments, config_errors
from reviewbert.data import data_config
from reviewbert.errors import ConfigError
from reviewbert.model.batch_predict import predict_texts
from reviewbert.model.checkpoint import load_checkpoint
from reviewbert.model.labels import FIVE
from reviewbert.training import distill, train
from reviewbert.training.losses import DistillLoss, ordinal_targets
from reviewbert.training.runs import read_status


def quiet(*a, **k):
    pass


# ------------------------------------------------------------------ the loss
def test_distill_loss_by_hand():
    teacher = [[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.2, 0.5, 0.3]]
    labels = [1, 2, 0]
    logits = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 0.0]])
    idx = torch.tensor([0, 2])   # the batch is reviews 0 and 2 of the training split

    def by_hand(alpha, weight=None):
        rows = []
        for lg, i in zip(logits.tolist(), idx.tolist()):
            z = math.log(sum(math.exp(v) for v in lg))
            logp = [v - z for v in lg]
            q = [alpha * t + (1 - alpha) * (k == labels[i]) for k, t in enumerate(teacher[i])]
            rows.append(-sum(qk * lp for qk, lp in zip(q, logp)))
        w = [1.0, 1.0] if weight is None else [weight[labels[i]] for i in idx.tolist()]
        return sum(wi * r for wi, r in zip(w, rows)) / sum(w)

    for alpha in (0.0, 0.5, 1.0):
        got = DistillLoss(teacher, labels, alpha, 3)(logits, idx).item()
        assert got == pytest.approx(by_hand(alpha), rel=1e-6)
    weight = [2.0, 1.0, 0.5]
    got = DistillLoss(teacher, labels, 0.5, 3, weight=torch.tensor(weight))(logits, idx).item()
    assert got == pytest.approx(by_hand(0.5, weight), rel=1e-6)
    # alpha 0 is plain cross-entropy on the labels of the indexed reviews
    plain = torch.nn.functional.cross_entropy(logits, torch.tensor([labels[0], labels[2]]))
    assert DistillLoss(teacher, labels, 0.0, 3)(logits, idx).item() == pytest.approx(plain.item())


def test_distill_loss_with_ordinal_labels_and_bad_shapes():
    teacher = np.full((2, 5), 0.2)
    loss = DistillLoss(teacher, [4, 0], 0.25, 5, sigma=0.75)
    logits = torch.randn(2, 5, generator=torch.Generator().manual_seed(0))
    q = 0.25 * torch.full((2, 5), 0.2) + 0.75 * ordinal_targets(torch.tensor([4, 0]), 5, 0.75)
    want = -(q * torch.log_softmax(logits, -1)).sum(-1).mean()
    assert loss(logits, torch.tensor([0, 1])).item() == pytest.approx(want.item(), rel=1e-6)
    with pytest.raises(ValueError, match="do not match"):
        DistillLoss(np.zeros((3, 5)), [0, 1], 0.5, 5)
    with pytest.raises(ValueError, match="alpha"):
        DistillLoss(teacher, [0, 1], 1.5, 5)


# --------------------------------------------------------- the split check
def test_split_mismatch_names_what_differs(imbalanced):
    base = data_config(imbalanced, FIVE, seed=3, class_balance="resample")
    assert distill.split_mismatch(base, base) is None
    # validation and test are the same reviews for every class balance
    assert distill.split_mismatch(data_config(imbalanced, FIVE, seed=3), base) is None
    assert "seed" in distill.split_mismatch(data_config(imbalanced, FIVE, seed=4), base)
    assert "fractions" in distill.split_mismatch(
        data_config(imbalanced, FIVE, seed=3, fractions=(0.6, 0.2, 0.2)), base)
    assert "other files" in distill.split_mismatch(data_config(imbalanced[:1], FIVE, seed=3),
                                                   base)
    changed = json.loads(json.dumps(base))
    changed["files"][0]["sha256"] = "0" * 64  # same name, other contents
    assert "other files" in distill.split_mismatch(changed, base)
    assert "records no training data" in distill.split_mismatch(None, base)


def test_teachers_flag_form_values_and_config_errors(tmp_path):
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--teachers", "runs/a", "--teachers", "runs/b", "--distill-weight", "0.8"])
    assert args.teachers == ["runs/a", "runs/b"] and args.distill_weight == 0.8
    assert TrainConfig().teachers == [] and TrainConfig().distill_weight == 0.5
    assert "distill_weight" in str(TrainConfig.validate_field("distill_weight", 1.2))
    assert TrainConfig.validate_field("teachers", ["  "]) is not None
    data = tmp_path / "r.csv"
    data.write_text("review,rating\ngood,5\n")
    errors = config_errors({"data": [str(data)], "teachers": [str(tmp_path / "missing")]})
    assert "teacher" in errors["teachers"] and "missing" in errors["teachers"]
    assert config_errors({"data": [str(data)], "teachers": [str(tmp_path)]}) == {}


# ------------------------------------------------------------------ training
@pytest.fixture(scope="module")
def teacher(tmp_path_factory, tiny_model_dir, imbalanced):
    run = tmp_path_factory.mktemp("teacher") / "run"
    train(tiny_cfg(tiny_model_dir, imbalanced, epochs=1, class_balance="undersample"), run,
          log=quiet)
    return run


def test_teacher_probabilities_are_the_teachers_predictions(teacher, imbalanced):
    info = distill.check_teachers([str(teacher)], data_config(imbalanced, FIVE, seed=42), 5)[0]
    texts = ["great phone, the battery lasts", "broke after a week", "ok i guess"] * 3
    seen = []
    got = distill.teacher_probs([info, info], texts, torch.device("cpu"), show_progress=False,
                                on_progress=seen.append)
    assert sum(seen) == 2 * len(texts)   # every review, once per teacher
    model, tok, _ = load_checkpoint(teacher, device=torch.device("cpu"))
    want = predict_texts(model, tok, texts, max_length=32)
    assert got.shape == (9, 5) and np.allclose(got.sum(1), 1, atol=1e-5)
    np.testing.assert_allclose(got, want, atol=0.02)  # bf16 where the CPU has the units


def test_alpha_zero_student_is_the_plain_run(tmp_path, teacher, tiny_model_dir, imbalanced):
    """Scoring the teachers moves no RNG, and the index batches find the right labels:
    with alpha 0 the student trains exactly as a run without teachers."""
    kw = dict(epochs=2, class_balance="resample")
    train(tiny_cfg(tiny_model_dir, imbalanced, **kw), tmp_path / "plain", log=quiet)
    meta = train(tiny_cfg(tiny_model_dir, imbalanced, teachers=[str(teacher)], distill_weight=0.0,
                          **kw), tmp_path / "student", log=quiet)
    a = load_file(str(tmp_path / "student" / "last" / "model.safetensors"))
    b = load_file(str(tmp_path / "plain" / "last" / "model.safetensors"))
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=k)
    told = meta["distillation"]["teachers"][0]
    assert told["path"] == str(teacher / "best") and told["validation"]["n"] == 20


def test_student_trained_on_the_teacher_alone_differs_and_records_it(tmp_path, teacher,
                                                                     tiny_model_dir, imbalanced):
    kw = dict(epochs=1, class_balance="resample")
    train(tiny_cfg(tiny_model_dir, imbalanced, **kw), tmp_path / "plain", log=quiet)
    train(tiny_cfg(tiny_model_dir, imbalanced, teachers=[str(teacher)], distill_weight=1.0, **kw),
          tmp_path / "student", log=quiet)
    assert read_status(tmp_path / "student")["state"] == "finished"
    saved = json.loads((tmp_path / "student" / "reviewbert.json").read_text())
    assert saved["distillation"]["weight"] == 1.0
    assert saved["hyperparameters"]["teachers"] == [str(teacher)]
    a = load_file(str(tmp_path / "student" / "last" / "model.safetensors"))
    b = load_file(str(tmp_path / "plain" / "last" / "model.safetensors"))
    assert not torch.allclose(a["classifier.weight"], b["classifier.weight"])


def test_a_teacher_from_another_split_or_label_scheme_is_refused(tmp_path, teacher,
                                                                  tiny_model_dir, imbalanced):
    with pytest.raises(ConfigError, match="same split") as e:
        train(tiny_cfg(tiny_model_dir, imbalanced, split_seed=9, teachers=[str(teacher)]),
              tmp_path / "other-split", log=quiet)
    assert "seed" in str(e.value) and "teachers" in e.value.errors
    with pytest.raises(ConfigError, match="predicts 5 labels, this run 3"):
        train(tiny_cfg(tiny_model_dir, imbalanced, labels=3, teachers=[str(teacher)]),
              tmp_path / "three", log=quiet)
    with pytest.raises(ConfigError, match="teacher"):
        train(tiny_cfg(tiny_model_dir, imbalanced, teachers=[str(tmp_path)]),
              tmp_path / "not-a-checkpoint", log=quiet)


def test_the_held_out_file_run_says_its_teachers_never_saw_the_file(tmp_path, tiny_model_dir,
                                                                    imbalanced):
    """bench/generalisation.py on a distilled run trained without one file."""
    import sys

    from browser_support import ROOT
    sys.path.insert(0, str(ROOT / "bench"))
    import generalisation

    kept, held = imbalanced
    cfg = dict(epochs=1, class_balance="resample")
    train(tiny_cfg(tiny_model_dir, [kept], **cfg), tmp_path / "t", log=quiet)
    train(tiny_cfg(tiny_model_dir, [kept], teachers=[str(tmp_path / "t")], **cfg),
          tmp_path / "s", log=quiet)
    out = generalisation.run(str(tmp_path / "s"), held)
    assert "distilled, as the demo is, from 1 teacher runs trained on the same 1 files" \
        in out["protocol"]
    assert out["rows"][1]["n"] > 0 and out["heldout"] == "b.jsonl.gz"
    with pytest.raises(SystemExit, match="not held out"):
        generalisation.run(str(tmp_path / "s"), kept)


def test_the_teacher_phase_writes_a_status_with_an_eta_for_the_page(tmp_path, monkeypatch):
    from reviewbert.training import status as T
    clock = [1000.0]
    monkeypatch.setattr(T.time, "time", lambda: clock[0])
    status = T.PhaseStatus(tmp_path / "run", 400, "distillation: 2 teacher(s) scoring")
    first = read_status(tmp_path / "run")
    assert first["state"] == "running" and first["eta_seconds"] is None
    assert first["message"] == "distillation: 2 teacher(s) scoring: 0 of 400 (0 %)"
    clock[0] += 10.0
    status(100)                                   # 100 in 10 s: 300 left, 30 s
    now = read_status(tmp_path / "run")
    assert now["eta_seconds"] == 30.0 and now["message"].endswith("100 of 400 (25 %)")
    clock[0] += 1.0
    status(100)                                   # within 2 s of the last write: not written
    assert read_status(tmp_path / "run")["message"].endswith("100 of 400 (25 %)")


def test_a_stopped_distilled_run_resumes_exactly(tmp_path, teacher, tiny_model_dir, imbalanced):
    """--resume scores the teachers again (same split, same probabilities) and goes on
    from the saved step: the same weights as a run that never stopped."""
    from test_class_balance import StopAt
    cfg = tiny_cfg(tiny_model_dir, imbalanced, epochs=2, class_balance="resample",
                   teachers=[str(teacher)], distill_weight=0.8)
    train(cfg, tmp_path / "unbroken", log=quiet)
    run = tmp_path / "resumed"
    train(cfg, run, hooks=[StopAt(20)], log=quiet)     # 18 steps per epoch: in epoch 2
    assert read_status(run)["state"] == "stopped"
    meta = train(cfg, run, resume=True, log=quiet)
    assert read_status(run)["state"] == "finished" and meta["distillation"]["weight"] == 0.8
    a = load_file(str(run / "last" / "model.safetensors"))
    b = load_file(str(tmp_path / "unbroken" / "last" / "model.safetensors"))
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=k)


def test_resuming_without_its_teacher_says_so_and_keeps_the_saved_state(tmp_path, teacher,
                                                                        tiny_model_dir, imbalanced):
    import shutil

    from test_class_balance import StopAt
    mine = tmp_path / "teacher"
    shutil.copytree(teacher, mine)
    cfg = tiny_cfg(tiny_model_dir, imbalanced, epochs=2, class_balance="resample",
                   teachers=[str(mine)])
    run = tmp_path / "run"
    train(cfg, run, hooks=[StopAt(5)], log=quiet)
    saved = (run / "last" / "model.safetensors").read_bytes()
    shutil.rmtree(mine)
    with pytest.raises(ConfigError, match=f"teacher {mine}"):
        train(cfg, run, resume=True, log=quiet)
    # still a stopped run that --resume continues once the teacher is back; nothing lost
    st = read_status(run)
    assert st["state"] == "stopped" and st["message"].startswith("resume failed: ConfigError")
    assert str(mine) in st["message"]
    assert (run / "last" / "model.safetensors").read_bytes() == saved
    shutil.copytree(teacher, mine)
    train(cfg, run, resume=True, log=quiet)
    assert read_status(run)["state"] == "finished"


def test_candidate_teachers_are_finished_runs_on_the_same_files(tmp_path, teacher, imbalanced):
    import shutil
    root = tmp_path / "ckpts"
    shutil.copytree(teacher, root / "done")
    shutil.copytree(teacher, root / "running")
    status = json.loads((root / "running" / "status.json").read_text())
    (root / "running" / "status.json").write_text(json.dumps({**status, "state": "running"}))
    assert distill.candidate_teachers(root, imbalanced) == [str(root / "done")]
    assert distill.candidate_teachers(root, imbalanced, labels=5) == [str(root / "done")]
    assert distill.candidate_teachers(root, imbalanced, labels=3) == []
    assert distill.candidate_teachers(root, imbalanced[:1]) == []      # other files
    assert distill.candidate_teachers(root, []) == []
    assert distill.candidate_teachers(tmp_path / "nowhere", imbalanced) == []
