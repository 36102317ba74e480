"""reviewbert.training.card: the model card's 3-label view and ablation table, from measured JSON."""
from __future__ import annotations

import json
import shutil

from reviewbert.cli.card import read_result
from reviewbert.training import card

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
    "resample:256:4:0.75": {"class_balance": "resample", "max_length": 256, "epochs": 4,
                     "ordinal_sigma": 0.75, "best_epoch": 4, "train_reviews": 7375, "minutes": 56.7,
                     "cpu_minutes": None,
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
    assert table[2] == ("| undersample | 128 | 7,375 | 3 (3) | 0 | 53.6 % | 92.9 % | 0.854 | 24.0 | 46.5 "
                        "| 2026-11-24, 2-core AMD EPYC (avx512_bf16), bf16 autocast |")
    assert table[3] == ("| resample | 256 | 7,375 | 4 (4) | 0.75 | 55.6 % | 92.5 % | 0.861 "
                        "| 56.7 (shared) | – | fp32 |")
    assert "\nIts run folder was not kept.\n" in text           # a row's note is printed once
    # and the numbers travel in the card's machine-readable block, as the others do
    assert card.read_card_metrics(out)["ablation"] == json.loads(json.dumps(ABLATION))


def test_without_ablation_or_three_label_the_card_has_neither_section(tmp_path, tiny_model_dir):
    evaluation = {k: v for k, v in EVALUATION.items() if k != "three_label"}
    text, _ = _card(tmp_path, tiny_model_dir, evaluation)
    assert "## Ablation" not in text and "3-label view" not in text


def test_the_card_says_how_long_training_took_where_and_in_what_precision(tmp_path, tiny_model_dir):
    training = card.training_time({"train_seconds": 1383.0, "train_cpu_seconds": 2570.0},
                                  "2-core AMD EPYC (avx512_bf16)", "bf16")
    assert training == {"minutes": 23.1, "cpu_minutes": 42.8,
                        "machine": "2-core AMD EPYC (avx512_bf16)", "precision": "bf16"}
    text, out = _card(tmp_path, tiny_model_dir, training=training)
    assert ("Training took **23 minutes** on a 2-core AMD EPYC (avx512_bf16) with bf16 "
            "autocast (43 CPU-minutes). On a CPU without bf16 units") in text
    assert card.read_card_metrics(out)["training"] == training
    fp32, _ = _card(tmp_path / "b", tiny_model_dir,
                    training={**training, "precision": "no", "cpu_minutes": None})
    assert "2-core AMD EPYC (avx512_bf16) in fp32. The held-out" in fp32


def test_the_split_table_says_how_training_used_the_classes():
    sizes = {"train": 30775, "validation": 1055, "test": 2105}
    meta = {"class_balance": {"mode": "resample", "train_counts": {
        "1 star": 5185, "2 stars": 1475, "3 stars": 2393, "4 stars": 5592, "5 stars": 16130},
        "per_epoch": {n: 1475 for n in ("1 star", "2 stars", "3 stars", "4 stars", "5 stars")}}}
    lines = card._splits_md(meta, sizes, 5, 42)
    assert "fresh balanced sample of 1,475 reviews per class" in lines[0]
    assert ("| train | 30,775 | 1 star: 5,185, 2 stars: 1,475, 3 stars: 2,393, "
            "4 stars: 5,592, 5 stars: 16,130 |") in lines
    assert "| test | 2,105 | 421 |" in lines
    # undersample (or a checkpoint from before the option): balanced everywhere
    plain = card._splits_md({}, {**sizes, "train": 7375}, 5, 42)
    assert "| train | 7,375 | 1,475 |" in plain


def test_the_card_names_the_baselines_chosen_settings(tmp_path, tiny_model_dir):
    baseline = {"C": 2.0, "class_weight": "balanced",
                "validation_accuracy_by_C": {"2.0": 0.47, "2.0, class_weight=balanced": 0.5},
                "test": {"accuracy": 0.517, "relaxed_accuracy": 0.869, "auc": 0.817, "loss": 1.29}}
    text, _ = _card(tmp_path, tiny_model_dir, baseline=baseline)
    assert "class weights (`balanced`, or none) since the training split is imbalanced" in text
    assert "chosen: C = 2, class weights balanced)" in text
    assert "| % correct | **55.6 %** | 51.7 % |" in text
    plain, _ = _card(tmp_path / "b", tiny_model_dir, baseline={
        **baseline, "class_weight": None, "validation_accuracy_by_C": {"2.0": 0.47}})
    assert "class weights (" not in plain and "chosen: C = 2, class weights none)" in plain


def test_the_cli_reads_an_indented_json_file_and_a_commands_last_line(tmp_path):
    indented = tmp_path / "ablation.json"
    indented.write_text(json.dumps(ABLATION, indent=1))      # as bench/ablation.py writes it
    assert read_result(str(indented)) == ABLATION
    output = tmp_path / "evaluation.json"
    output.write_text("progress...\nwarning: x\n" + json.dumps(EVALUATION) + "\n")
    assert read_result(str(output)) == json.loads(json.dumps(EVALUATION))


def test_the_recipe_is_chosen_on_validation_not_on_test():
    v = lambda acc, auc: {"accuracy": acc, "auc": auc, "relaxed_accuracy": 0.9}  # noqa: E731
    rows = {"a": {"validation": v(0.578, 0.854), "test": v(0.60, 0.90)},   # best on test
            "b": {"validation": v(0.578, 0.862), "test": v(0.56, 0.86)},   # ties, better AUC
            "c": {"validation": v(0.570, 0.880), "test": v(0.58, 0.88)},
            "d": {"test": v(0.70, 0.95)}}                                  # no validation kept
    assert card.chosen_row(rows) == "b"
    assert card.chosen_row({"d": rows["d"]}) is None


def test_a_distilled_checkpoint_names_its_teachers_and_counts_their_minutes(tmp_path,
                                                                          tiny_model_dir):
    from reviewbert.model.checkpoint import META_FILE, read_meta
    teacher = {"name": "t1/best", "path": "checkpoints/runs/t1/best", "seed": 43, "max_length": 256,
               "validation": {"accuracy": 0.571, "auc": 0.8611},
               "test": {"accuracy": 0.556, "relaxed_accuracy": 0.93, "auc": 0.8601}}
    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_model_dir, ckpt)
    meta = read_meta(ckpt)
    meta["distillation"] = {"teachers": [teacher], "weight": 0.8}
    meta["best"] = {"epoch": 4, "validation": {"accuracy": 0.585, "auc": 0.8662},
                    "test": {"accuracy": 0.5562, "relaxed_accuracy": 0.9254, "auc": 0.8611}}
    meta["hyperparameters"] = {**meta.get("hyperparameters", {}), "teachers": [teacher["path"]],
                               "distill_weight": 0.8, "seed": 42, "max_length": 256}
    (ckpt / META_FILE).write_text(json.dumps(meta))
    training = card.training_time([{"train_seconds": 600.0, "train_cpu_seconds": 1100.0},
                                   {"train_seconds": 660.0, "train_cpu_seconds": 1180.0}],
                                  "2-core Xeon", "bf16")
    assert training["minutes"] == 21.0 and training["cpu_minutes"] == 38.0 and training["runs"] == 2
    text = card.render_card(ckpt, EVALUATION, training=training)
    assert "label (weight 0.2) with the mean probabilities that 1 teacher runs give it (weight 0.8)" \
        in text
    assert "| `t1/best` | 43 | 256 | 57.1 % | 0.861 | 55.6 % | 93.0 % | 0.860 |" in text
    assert "| **this model** | 42 | 256 | 58.5 % | 0.866 | 55.6 % | 92.5 % | 0.861 |" in text
    assert "| `distill_weight` | 0.8 |" in text
    assert "**21 minutes** in all (2 runs: 1 teacher(s), then this model) on a 2-core Xeon" in text
    assert "trains once more, its teachers too." in text
    plain = card.render_card(tiny_model_dir, EVALUATION)
    assert "## Distillation" not in plain and "distill_weight" not in plain
