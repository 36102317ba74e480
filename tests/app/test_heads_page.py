"""The Heads page, driven with Streamlit's AppTest (no browser), on a tiny fixture checkpoint
whose test split is a small toy file (40 reviews), and on a pruned copy of it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from browser_support import write_meta
from toyreviews import write_toy_csv

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PAGE = "pages/heads.py"


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory, tiny_model_dir):
    """A 5-label tiny checkpoint whose reviewbert.json names a toy file (a 40-review test
    split) and its own folder as the base model, and a copy with three heads removed."""
    from reviewbert.model import pruning
    from reviewbert.model.checkpoint import load_checkpoint, save_checkpoint_atomic
    root = tmp_path_factory.mktemp("heads-ckpts")
    toy = write_toy_csv(root.parent / "toy.csv", n=250)
    a = root / "a"
    shutil.copytree(tiny_model_dir, a)
    write_meta(a, 5, data_file=toy, max_length=48, max_per_class=40, base_model=str(tiny_model_dir))
    model, tok, info = load_checkpoint(a, torch.device("cpu"))
    save_checkpoint_atomic(pruning.pruned_copy(model, {0: [1], 1: [0, 3]}), tok, root / "p",
                           meta=info.meta)
    return root


def open_page(monkeypatch, root, checkpoint: str = "a") -> AppTest:
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    at.selectbox(key="checkpoint").set_value(str(root / checkpoint)).run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    return at


def texts(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for kind in (at.info, at.warning, at.error, at.success) for e in kind]
    return "\n".join(str(p) for p in parts)


def tab(at, name: str) -> AppTest:
    at.session_state["heads_tab"] = name
    at.run()
    assert not at.exception, at.exception
    return at


def test_analyse_once_then_every_section(monkeypatch, ckpt_root):
    at = open_page(monkeypatch, ckpt_root)
    assert "have not been analysed on these **40 reviews**" in texts(at)
    cache = ckpt_root / "a" / ".analysis" / "heads"
    assert not cache.exists()
    at.button(key="heads_analyse").click().run()
    assert not at.exception, at.exception
    (result,) = cache.glob("*/result.json")                    # saved beside the checkpoint
    saved = json.loads(result.read_text())
    assert saved["n"] == 40 and len(saved["importance"]) == 2
    assert "40 reviews · test split of toy.csv" in texts(at)
    assert [t.label for t in at.tabs] == ["Importance", "Pruning", "Roles", "Fine-tuning",
                                          "Query–key map"]
    assert "Spearman" in texts(at)
    assert len(at.dataframe[0].value) == 8                       # the top heads

    tab(at, "Pruning")
    assert "of the heads" in texts(at) and "heads prune --checkpoint" in at.code[0].value

    tab(at, "Roles")
    at.selectbox(key="heads_colour").set_value("entropy").run()
    assert not at.exception, at.exception

    tab(at, "Fine-tuning")
    # the base model is the checkpoint's own weights: nothing changed anywhere
    assert "Fine-tuning changed" in texts(at) and "0.000 bits" in texts(at)

    # one head on one review, chosen as a heatmap click would choose it
    at.session_state["heads_layer"] = 1
    at.session_state["heads_head"] = 2
    at.run()
    assert "Layer 2, head 3:" in texts(at)

    # a second visit reads the cache (no button)
    again = open_page(monkeypatch, ckpt_root)
    assert "read from the cache" in texts(again)
    assert not [b for b in again.button if b.key == "heads_analyse"]


def test_sample_size_and_a_data_file(monkeypatch, ckpt_root, tmp_path):
    data = tmp_path / "data"
    write_toy_csv(data / "other.csv", n=60)
    monkeypatch.setenv("REVIEWBERT_DATA_DIR", str(data))
    at = open_page(monkeypatch, ckpt_root)
    at.number_input(key="heads_n").set_value(12).run()
    assert "these **12 reviews**" in texts(at)
    at.radio(key="heads_source").set_value("data file").run()
    assert not at.exception, at.exception
    assert "every review of other.csv" in texts(at)


def test_a_pruned_checkpoint(monkeypatch, ckpt_root):
    at = open_page(monkeypatch, ckpt_root, "p")
    at.number_input(key="heads_n").set_value(10).run()
    at.button(key="heads_analyse").click().run()
    assert not at.exception, at.exception
    at.session_state["heads_layer"] = 1
    at.session_state["heads_head"] = 0
    at.run()
    assert "was removed from this checkpoint" in texts(at)
    tab(at, "Roles")
    assert not at.exception, at.exception


def figure_titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def test_the_query_key_map_follows_the_selected_head(monkeypatch, ckpt_root):
    at = open_page(monkeypatch, ckpt_root)
    if [b for b in at.button if b.key == "heads_analyse"]:
        at.button(key="heads_analyse").click().run()
    tab(at, "Query–key map")
    assert "tokens of 40 reviews" in texts(at) and "one pass for every head" in texts(at)
    (meta,) = (ckpt_root / "a" / ".analysis" / "qkmap").glob("*/meta.json")   # cached beside it
    assert json.loads(meta.read_text())["alive"] == [[0, 1, 2, 3]] * 2
    assert any(t.startswith("Layer 1, head 1:") for t in figure_titles(at))
    assert any(t.startswith("Every head") for t in figure_titles(at))
    # a click on the matrix sets the page's layer and head, as these do
    at.session_state["heads_layer"] = 1
    at.session_state["heads_head"] = 2
    at.run()
    assert any(t.startswith("Layer 2, head 3:") for t in figure_titles(at))
    assert "Layer 2, head 3:" in texts(at)                      # the head below agrees
    at.radio(key="heads_qk_colour").set_value("kind").run()
    assert not at.exception, at.exception
    again = tab(open_page(monkeypatch, ckpt_root), "Query–key map")
    assert "read from the cache beside the checkpoint" in texts(again)


def test_the_query_key_map_is_offered_before_the_heads_are_analysed(monkeypatch, ckpt_root):
    for kind in ("heads", "qkmap"):          # whatever the module's earlier tests cached
        shutil.rmtree(ckpt_root / "a" / ".analysis" / kind, ignore_errors=True)
    at = open_page(monkeypatch, ckpt_root)
    assert [b for b in at.button if b.key == "heads_analyse"], "the analysis was cached already"
    assert "tokens of 40 reviews" not in texts(at)                      # nothing read yet
    at.toggle(key="heads_qk_early").set_value(True).run()
    assert not at.exception, at.exception
    assert "tokens of 40 reviews" in texts(at)
    assert any(t.startswith("Layer 1, head 1:") for t in figure_titles(at))
    assert not (ckpt_root / "a" / ".analysis" / "heads").exists()     # the analysis did not run


def test_the_query_key_map_of_a_pruned_checkpoint(monkeypatch, ckpt_root):
    at = open_page(monkeypatch, ckpt_root, "p")
    at.number_input(key="heads_n").set_value(10).run()
    if [b for b in at.button if b.key == "heads_analyse"]:
        at.button(key="heads_analyse").click().run()
    at.session_state["heads_layer"] = 0
    at.session_state["heads_head"] = 1
    tab(at, "Query–key map")
    assert "it has no query or key vectors" in texts(at)
    assert not any(t.startswith("Layer 1, head 2:") for t in figure_titles(at))
    at.session_state["heads_head"] = 2
    at.run()
    assert any(t.startswith("Layer 1, head 3:") for t in figure_titles(at))
