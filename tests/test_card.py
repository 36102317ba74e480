"""reviewbert.card: the model card's 3-label view and ablation table, from measured JSON."""
from __future__ import annotations

import json
import shutil

from reviewbert import card

EVALUATION = {
    "n": 2105, "metrics": {"accuracy": 0.5562, "relaxed_accuracy": 0.9254, "auc": 0.8611,
                           "loss": 1.0087},
    "confusion_matrix": [[300, 100, 21, 0, 0], [120, 220, 80, 1, 0], [30, 90, 230, 70, 1],
                         [0, 5, 60, 250, 106], [0, 1, 10, 190, 220]],
    "three_label": {"accuracy": 0.7783, "auc": 0.8921, "loss": 0.55, "n": 2105},
}
ABLATION = {"baseline": "undersample:128", "rows": {
    "undersample:128": {"class_balance": "undersample", "max_length": 128, "epochs": 3,
                        "best_epoch": 3, "train_reviews": 7375, "minutes": 24.0,
                        "cpu_minutes": 46.5, "precision": "bf16", "measured": "2026-11-24",
                        "machine": "2-core AMD EPYC (avx512_bf16)",
                        "test": {"accuracy": 0.536, "relaxed_accuracy": 0.929, "auc": 0.854}},
    "resample:256": {"class_balance": "resample", "max_length": 256, "epochs": 3,
                     "best_epoch": None, "train_reviews": 7375, "minutes": 56.7, "cpu_minutes": None,
                     "precision": "no", "note": "its run folder was not kept", "shared_machine": True,
                     "test": {"accuracy": 0.5563, "relaxed_accuracy": 0.9254, "auc": 0.8611}},
}}


def _card(tmp_path, tiny_model_dir, evaluation=EVALUATION, **kw):
    ckpt = tmp_path / "demo"
    shutil.copytree(tiny_model_dir, ckpt)
    out = card.write_card(ckpt, evaluation, **kw)
    return out.read_text(encoding="utf-8"), out


def test_three_label_view_beside_the_seed_reports_three_label_model(tmp_path, tiny_model_dir):
    text, _ = _card(tmp_path, tiny_model_dir)
    section = text.split("### The 3-label view of this 5-label model", 1)[1]
    assert "| % correct (3 classes) | **77.8 %** | 69.8 % |" in section
    assert "| macro AUC-ROC (3 classes) | **0.892** | 0.840 |" in section


def test_ablation_table_has_one_row_per_run_with_its_measured_figures(tmp_path, tiny_model_dir):
    text, out = _card(tmp_path, tiny_model_dir, ablation=ABLATION)
    table = text.split("## Ablation", 1)[1].split("\n\n")[2].splitlines()
    assert len(table) == 2 + 2                                      # header, rule, two rows
    assert table[2] == ("| undersample | 128 | 7,375 | 3 (3) | 53.6 % | 92.9 % | 0.854 | 24.0 | 46.5 "
                        "| 2026-11-24, 2-core AMD EPYC (avx512_bf16), bf16 autocast |")
    assert table[3] == "| resample | 256 | 7,375 | 3 (?) | 55.6 % | 92.5 % | 0.861 | 56.7 (shared) | – | fp32 |"
    assert "\nIts run folder was not kept.\n" in text           # a row's note is printed once
    # and the numbers travel in the card's machine-readable block, as the others do
    assert card.read_card_metrics(out)["ablation"] == json.loads(json.dumps(ABLATION))


def test_without_ablation_or_three_label_the_card_has_neither_section(tmp_path, tiny_model_dir):
    evaluation = {k: v for k, v in EVALUATION.items() if k != "three_label"}
    text, _ = _card(tmp_path, tiny_model_dir, evaluation)
    assert "## Ablation" not in text and "3-label view" not in text
