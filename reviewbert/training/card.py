"""Model cards: a checkpoint's README.md, written from measured results only.

Every figure in the card comes from a JSON result produced by a command
(``python -m reviewbert evaluate --json``, ``bench/tfidf_baseline.py``,
``bench/generalisation.py``). The card embeds those figures in a machine-readable
comment, so a test can re-run the evaluation and check the card still tells the truth:

    python -m reviewbert card --checkpoint checkpoints/demo \
        --evaluation eval.json --baseline tfidf.json [--generalisation gen.json]
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from reviewbert.fsio import atomic_write_text
from reviewbert.model.checkpoint import checkpoint_info

CARD_TAG = "reviewbert-card"
# The seed report's Table 1 (test split, its own bert-base-uncased run on Cell Phones).
SEED_TABLE1 = {
    5: {"accuracy": 0.517, "relaxed_accuracy": 0.828, "auc": 0.786},
    3: {"accuracy": 0.698, "relaxed_accuracy": None, "auc": 0.84},
}
METRIC_ROWS = (("accuracy", "% correct"), ("relaxed_accuracy", "relaxed % correct (±1 star)"),
               ("auc", "macro AUC-ROC (one-vs-rest)"), ("loss", "cross-entropy"))


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def _num(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def fmt(key: str, value) -> str:
    """How the card prints one metric (tests compare a fresh evaluation through this)."""
    return _pct(value) if key.endswith("accuracy") else _num(value)


def read_card_metrics(card_path: str | Path) -> dict:
    """The machine-readable results embedded in a card by :func:`write_card`."""
    text = Path(card_path).read_text(encoding="utf-8")
    m = re.search(r"<!-- " + CARD_TAG + r"\n(.*?)\n-->", text, flags=re.S)
    if not m:
        raise ValueError(f"{card_path} has no {CARD_TAG} block")
    return json.loads(m.group(1))


def _confusion_md(cm: list[list[int]], names: list[str]) -> str:
    head = "| true \\ predicted | " + " | ".join(names) + " |"
    sep = "|---" * (len(names) + 1) + "|"
    rows = [f"| **{n}** | " + " | ".join(str(v) for v in row) + " |" for n, row in zip(names, cm)]
    return "\n".join([head, sep, *rows])


def _three_label_md(three: dict) -> list[str]:
    """The 5-label model read as 3 labels, beside the seed report's 3-label model."""
    seed = SEED_TABLE1[3]
    return [
        "### The 3-label view of this 5-label model",
        "",
        "Its probabilities merged into {1, 2}, {3} and {4, 5} stars (`metrics.three_label_view`), "
        "on the same test split. The seed report trained a separate 3-label bert-base on its own "
        "split; here no second checkpoint is trained.",
        "",
        "| metric | merged 5-label model | seed report, 3 labels (bert-base, its own split) |",
        "|---|---|---|",
        f"| % correct (3 classes) | **{_pct(three.get('accuracy'))}** | {_pct(seed['accuracy'])} |",
        f"| macro AUC-ROC (3 classes) | **{_num(three.get('auc'))}** | {_num(seed['auc'])} |",
        "",
        "The merged test split is not balanced over 3 classes (the neutral class holds one star "
        "of five), so its % correct weighs the negative and positive classes twice as much as a "
        "balanced 3-label split would.",
        "",
    ]


def chosen_row(rows: dict) -> str | None:
    """The ablation row a recipe should take: best validation accuracy, then validation
    AUC, among the rows that recorded validation figures (None if none did)."""
    scored = {k: r["validation"] for k, r in rows.items() if r.get("validation")}
    if not scored:
        return None
    return max(scored, key=lambda k: (scored[k]["accuracy"], scored[k]["auc"]))


def _ablation_md(ablation: dict) -> list[str]:
    """bench/ablation.py's rows: how training uses the classes x the max length."""
    rows = ablation.get("rows") or {}
    if not rows:
        return []
    out = [
        "## Ablation: which reviews to train on, how much of each to read",
        "",
        "`python bench/ablation.py`: this card's settings with the class balance, the max "
        "length, the epochs and the ordinal soft-label σ varied, one seed each. Validation "
        "and test are the same balanced reviews in every row; each row's figures are its best "
        "epoch by validation accuracy, on the test split. `undersample`: every epoch over the "
        "same balanced 7,375 reviews; `resample`: each epoch a fresh balanced draw from all "
        "the training reviews; `weighted`: all of them every epoch, with a class-weighted "
        "loss. σ 0 is plain cross-entropy.",
        "",
        "| class balance | max length | train reviews | epochs (best) | σ | % correct "
        "| relaxed % correct | AUC-ROC | minutes (wall) | CPU minutes | measured on |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows.values():
        t = r["test"]
        cpu = r.get("cpu_minutes")
        best = "?" if r.get("best_epoch") is None else r["best_epoch"]
        where = ", ".join(x for x in (r.get("measured"), r.get("machine"),
                                      "bf16 autocast" if r.get("precision") == "bf16" else "fp32")
                          if x)
        out.append(f"| {r['class_balance']} | {r['max_length']} | {r['train_reviews']:,} | "
                   f"{r['epochs']} ({best}) | {r.get('ordinal_sigma') or 0:g} | "
                   f"{_pct(t['accuracy'])} | "
                   f"{_pct(t['relaxed_accuracy'])} | {_num(t['auc'])} | {r['minutes']}"
                   f"{' (shared)' if r.get('shared_machine') else ''} | "
                   f"{'–' if cpu is None else cpu} | {where} |")
    notes = sorted({r["note"] for r in rows.values() if r.get("note")})
    best = chosen_row(rows)
    if best:
        r, v = rows[best], rows[best]["validation"]
        out += ["", f"Chosen on the validation split, never the test split: the row with the "
                f"best validation % correct (then AUC) among those that recorded it is "
                f"`{best}` ({_pct(v['accuracy'])}, AUC {_num(v['auc'])} on validation)."]
    out += [
        "",
        "Minutes are wall-clock on a 2-core CPU, evaluation of the splits after each epoch "
        "included; rows measured on different machines or precisions compare in accuracy, "
        "not in minutes. A row that shared the machine with other work has inflated wall "
        "minutes, marked (shared); CPU minutes (both cores together, where recorded) divided "
        "by 2 estimate its time alone.",
        *[f"\n{n[0].upper()}{n[1:]}." for n in notes],
        "",
    ]
    return out


_CLASS_USE = {
    "resample": "each epoch draws a fresh balanced sample of {n:,} reviews per class from "
                "all of them",
    "weighted": "all of them every epoch, the loss weighted by n_total / (n_classes x n_class)",
}


def _distillation_md(meta: dict) -> list[str]:
    """How a distilled checkpoint was taught, with its teachers' own figures."""
    d = meta.get("distillation")
    if not d or not d.get("teachers"):
        return []
    w, teachers = float(d["weight"]), d["teachers"]
    lines = [
        "## Distillation",
        "",
        f"Trained on a target that mixes each training review's own label (weight {1 - w:g}) "
        f"with the mean probabilities that {len(teachers)} teacher runs give it (weight {w:g}): "
        "knowledge distillation (Hinton, Vinyals & Dean, 2015; `--teachers` of "
        "`python -m reviewbert train`, `reviewbert/training/distill.py`). The teachers were trained "
        "on the same split, checked against their `reviewbert.json`, so none of them saw a "
        "validation or test review. This checkpoint has the size of one teacher. The "
        "teachers train with this card's settings and their own seeds; the last row is this "
        "model, for comparison on the same splits (best epoch, by validation accuracy).",
        "",
        "| teacher | seed | max length | validation % correct | validation AUC | "
        "test % correct | test relaxed | test AUC |",
        "|---|---|---|---|---|---|---|---|",
    ]
    hp, best = meta.get("hyperparameters") or {}, meta.get("best") or {}
    rows = [*teachers, {"name": "this model", "seed": hp.get("seed", "?"),
                        "max_length": hp.get("max_length", "?"),
                        "validation": best.get("validation"), "test": best.get("test")}]
    for t in rows:
        v, te = t.get("validation") or {}, t.get("test") or {}
        name = t.get("name", "?")
        name = f"**{name}**" if t is rows[-1] else f"`{name}`"
        lines.append(f"| {name} | {t.get('seed', '?')} | {t.get('max_length', '?')} | "
                     f"{_pct(v.get('accuracy'))} | {_num(v.get('auc'))} | {_pct(te.get('accuracy'))} | "
                     f"{_pct(te.get('relaxed_accuracy'))} | {_num(te.get('auc'))} |")
    return lines + [""]


def _splits_md(meta: dict, sizes: dict, k: int, split_seed) -> list[str]:
    """The split table: validation and test balanced; train balanced too (undersample) or
    all the training reviews, used as meta["class_balance"] records."""
    use = meta.get("class_balance") or {"mode": "undersample"}
    counts = use.get("train_counts") or {}
    if use.get("mode") not in _CLASS_USE or not counts:
        return [f"then balanced in every split (split seed {split_seed}):", "",
                "| split | reviews | per class |", "|---|---|---|",
                *[f"| {s} | {n:,} | {n // k:,} |" for s, n in sizes.items()], ""]
    per_epoch = min((use.get("per_epoch") or counts).values())
    how = _CLASS_USE[use["mode"]].format(n=per_epoch)
    return [f"then split (split seed {split_seed}). Validation and test are balanced; "
            f"training keeps every other review, and uses them with `class_balance = "
            f"{use['mode']}`: {how}.", "",
            "| split | reviews | per class |", "|---|---|---|",
            f"| train | {sizes.get('train', sum(counts.values())):,} | "
            + ", ".join(f"{name}: {n:,}" for name, n in counts.items()) + " |",
            *[f"| {s} | {n:,} | {n // k:,} |" for s, n in sizes.items() if s != "train"], ""]


def training_time(status: dict | list[dict], machine: str, precision: str) -> dict:
    """How long training took, from the runs' status.json (train_seconds: wall clock of
    the training itself, evaluation after each epoch included; train_cpu_seconds),
    summed over several runs (a distilled model's teachers and the model itself)."""
    statuses = [status] if isinstance(status, dict) else list(status)
    cpus = [s.get("train_cpu_seconds") for s in statuses]
    out = {"minutes": round(sum(float(s["train_seconds"]) for s in statuses) / 60, 1),
           "cpu_minutes": None if None in cpus else round(sum(map(float, cpus)) / 60, 1),
           "machine": machine, "precision": precision}
    if len(statuses) > 1:
        out["runs"] = len(statuses)
    return out


def _reproduce_md(command: str, training: dict | None) -> str:
    if not training:
        return f"Reproduce with `{command}`."
    bf16 = training.get("precision") == "bf16"
    cpu = training.get("cpu_minutes")
    runs = training.get("runs", 1)
    return (f"Reproduce with `{command}`. Training took **{training['minutes']:.0f} minutes** "
            + (f"in all ({runs} runs: {runs - 1} teacher(s), then this model) " if runs > 1
               else "")
            + f"on a {training['machine']}{' with bf16 autocast' if bf16 else ' in fp32'}"
            + (f" ({cpu:.0f} CPU-minutes)" if cpu is not None else "")
            + (". On a CPU without bf16 units it trains in fp32, slower per step "
               "(`bench/train_precision.py` times both on one machine)." if bf16 else ".")
            + (" The held-out-file run below trains once more"
               + (", its teachers too." if runs > 1 else ".")))


def render_card(ckpt: str | Path, evaluation: dict, baseline: dict | None = None,
                generalisation: dict | None = None, command: str = "make demo-checkpoint",
                ablation: dict | None = None, training: dict | None = None) -> str:
    info = checkpoint_info(ckpt)
    meta, hp = info.meta, info.meta.get("hyperparameters", {})
    lines = [*_intro_md(info, meta, hp), *_data_and_settings_md(meta, hp, info.scheme.num_labels),
             _reproduce_md(command, training), "",
             *_results_md(info, evaluation, baseline)]
    lines += _distillation_md(meta)
    if evaluation.get("three_label"):
        lines += _three_label_md(evaluation["three_label"])
    if ablation:
        lines += _ablation_md(ablation)
    if generalisation:
        lines += _generalisation_md(generalisation)
    payload = {"evaluation": evaluation, "baseline": baseline, "generalisation": generalisation}
    if ablation:
        payload["ablation"] = ablation
    if training:
        payload["training"] = training
    lines += ["<!-- " + CARD_TAG, json.dumps(payload, indent=1, default=str), "-->", ""]
    return "\n".join(lines)


def _intro_md(info, meta: dict, hp: dict) -> list[str]:
    """The front matter, what the model is, and how to load it."""
    size_mb = sum(p.stat().st_size for p in Path(info.path).iterdir() if p.is_file()) / 2**20
    return [
        "---",
        "language: en",
        "license: apache-2.0",
        "library_name: transformers",
        "pipeline_tag: text-classification",
        "tags: [reviewbert, bert, amazon-reviews, star-rating]",
        "---",
        f"# ReviewBERT demo checkpoint ({info.scheme.num_labels} labels)",
        "",
        f"A `BertForSequenceClassification` (one linear layer on the pooled [CLS]) fine-tuned from "
        f"the embedded base model `{hp.get('base_model', '?')}` (all-MiniLM-L6-v2: 6 layers, "
        f"12 heads, hidden 384) to predict the star rating of a phone or accessory review. "
        f"Standard Hugging Face format with its tokenizer; weights stored as "
        f"{(meta.get('export') or {}).get('dtype', 'float32')} safetensors "
        f"({size_mb:.1f} MB on disk), upcast to fp32 on load on CPU.",
        "",
        "```python",
        "from transformers import pipeline",
        f'clf = pipeline("text-classification", model="checkpoints/{Path(info.path).name}")',
        'clf("Battery died after two days and support never answered.")',
        "```",
        "",
    ]


def _data_and_settings_md(meta: dict, hp: dict, k: int) -> list[str]:
    """The files and splits it was trained on, and its hyperparameters."""
    files = [f["name"] for f in (meta.get("data") or {}).get("files", [])]
    splits = _splits_md(meta, meta.get("split_sizes", {}), k, hp.get("split_seed", "?"))
    return [
        "## Data",
        f"All of `../shared/data`: {', '.join(f'`{f}`' for f in files)}. "
        "Exact duplicate texts removed, texts seen with different ratings removed, review titles "
        f"prepended to their text where the file has one "
        f"({'on' if hp.get('prepend_title') else 'off'}), "
        + splits[0],
        *splits[1:],
        "## Settings",
        "",
        "| hyperparameter | value |",
        "|---|---|",
        *[f"| `{key}` | {hp[key]} |" for key in (
            "labels", "max_length", "class_balance", "epochs", "batch_size", "lr_bert",
            "lr_classifier", "layer_lr_decay", "weight_decay", "lr_decay", "lr_step_epochs",
            "warmup_ratio", "max_grad_norm", "ordinal_sigma", "distill_weight",
            "mixed_precision",
            "prepend_title", "min_tokens", "seed")
            if key in hp and (key != "distill_weight" or hp.get("teachers"))],
        f"| best epoch (by validation accuracy) | {(meta.get('best') or {}).get('epoch', '?')} |",
        "",
    ]


def _results_md(info, evaluation: dict, baseline: dict | None) -> list[str]:
    """The test split's metrics beside the TF-IDF baseline and the seed report, and the
    confusion matrix."""
    k, name = info.scheme.num_labels, Path(info.path).name
    test, base, seed = evaluation["metrics"], baseline["test"] if baseline else None, \
        SEED_TABLE1.get(k, {})
    lines = [
        f"## Results on its balanced test split ({evaluation.get('n', 0):,} reviews)",
        "",
        "Measured with `python -m reviewbert evaluate --checkpoint checkpoints/"
        f"{name} --data <the five files> --split test --precision fp32 --json`.",
        "",
        "| metric | this checkpoint | TF-IDF + logistic regression (same split) "
        "| seed report, Table 1 (bert-base, its own split) |",
        "|---|---|---|---|",
    ]
    for key, label in METRIC_ROWS:
        if key == "relaxed_accuracy" and k != 5:
            continue
        lines.append(f"| {label} | **{fmt(key, test.get(key))}** | "
                     f"{fmt(key, base.get(key)) if base else '–'} | "
                     f"{fmt(key, seed.get(key)) if key != 'loss' else 'not comparable'} |")
    weighted = any("class_weight" in c for c in (baseline or {}).get(
        "validation_accuracy_by_C", {}))
    return lines + [
        "",
        "The TF-IDF baseline (1–2-grams, logistic regression with C"
        + (", and sklearn's class weights (`balanced`, or none) since the training split is "
           "imbalanced," if weighted else "")
        + " chosen on the validation split, then refitted on train+validation"
        + (f"; chosen: C = {baseline['C']:g}, class weights "
           f"{baseline.get('class_weight') or 'none'}" if baseline and "C" in baseline else "")
        + ") is `bench/tfidf_baseline.py --checkpoint "
        f"checkpoints/{name}`, trained on the same reviews. The seed report's "
        "figures come from a different model and split, so they are a yardstick, not a "
        "controlled comparison; its cross-entropy "
        "was reported on another scale.",
        "",
        "### Confusion matrix (test split; rows true, columns predicted)",
        "",
        _confusion_md(evaluation["confusion_matrix"], list(info.scheme.names)),
        "",
    ]


def _generalisation_md(g: dict) -> list[str]:
    return [
        "## Does it generalise to a file it never saw?",
        "",
        g.get("protocol", ""),
        "",
        "| evaluated on | reviews | % correct | relaxed % correct | macro AUC-ROC |",
        "|---|---|---|---|---|",
        *[f"| {r['label']} | {r['n']:,} | {_pct(r['accuracy'])} | "
          f"{_pct(r.get('relaxed_accuracy'))} | {_num(r.get('auc'))} |"
          for r in g.get("rows", [])],
        "",
        g.get("conclusion", ""),
        "",
    ]


def write_card(ckpt, evaluation, baseline=None, generalisation=None, **kw) -> Path:
    out = Path(checkpoint_info(ckpt).path) / "README.md"
    atomic_write_text(out, render_card(ckpt, evaluation, baseline, generalisation, **kw))
    return out
