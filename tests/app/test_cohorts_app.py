"""The Cohorts page, driven with Streamlit's AppTest (no browser), on a tiny fixture
checkpoint whose test split is a toy file: every tab draws, and each action (a cohort
tagged, saved as a slice; a review triaged; the corrected file written) reaches the store,
the slices file or the uploads folder."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from browser_support import write_meta
from conftest import make_tiny_model
from toyreviews import write_toy_csv

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PAGE = "pages/cohorts.py"


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory, tiny_model_dir):
    """Two 5-label checkpoints whose reviewbert.json names a toy file (120 reviews a class,
    so a test split of 120 reviews)."""
    root = tmp_path_factory.mktemp("coh-ckpts")
    toy = write_toy_csv(root.parent / "toy.csv", n=700)
    a = root / "a"
    shutil.copytree(tiny_model_dir, a)
    write_meta(a, 5, data_file=toy, max_length=48, max_per_class=120)
    write_meta(make_tiny_model(root / "b", seed=3), 5, data_file=toy, max_length=48,
               max_per_class=120)
    return root


@pytest.fixture()
def home(tmp_path, monkeypatch, ckpt_root):
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(ckpt_root))
    monkeypatch.setenv("REVIEWBERT_DB", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.setenv("REVIEWBERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("REVIEWBERT_UPLOADS_DIR", str(tmp_path / "uploads"))
    return tmp_path


def ok(at) -> AppTest:
    assert not at.exception, at.exception
    return at


def open_page(root) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    ok(at.run())
    ok(at.selectbox(key="checkpoint").set_value(str(root / "a")).run())
    at.switch_page(PAGE)
    ok(at.run())
    if [b for b in at.button if b.key == "err_evaluate"]:
        ok(at.button(key="err_evaluate").click().run())
    return at


def tab(at, name: str) -> AppTest:
    at.session_state["coh_tab"] = name
    return ok(at.run())


def texts(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for kind in (at.info, at.warning, at.error, at.success) for e in kind]
    return "\n".join(str(p) for p in parts)


def store():
    from reviewbert.store import db
    db.close_all()
    return db.open_store()


def test_every_tab_draws_and_the_cohort_is_tagged_and_saved(home, ckpt_root):
    at = open_page(ckpt_root)
    assert [t.label for t in at.tabs] == ["Cohorts", "Heat map", "Hygiene", "Triage",
                                          "Fix and compare"]
    assert "of 120 reviews" in texts(at)
    assert at.selectbox(key="coh_open").options, "no cohort to open"
    # only significant slices are offered, unless every candidate is asked for
    offered = [o for o in at.selectbox(key="coh_open").options if o.startswith("slice")]
    ok(at.toggle(key="coh_all_slices").set_value(True).run())
    every = [o for o in at.selectbox(key="coh_open").options if o.startswith("slice")]
    assert set(offered) < set(every), (offered, every)
    ok(at.toggle(key="coh_all_slices").set_value(False).run())
    # the whole split (the tree's root) tagged at once, by a named author
    ok(at.text_input(key="coh_author").input("Ada").run())
    at.selectbox(key="coh_open").set_value(at.selectbox(key="coh_open").options[0])
    ok(at.selectbox(key="coh_tag").set_value("sarcasm").run())
    ok(at.button(key="coh_tag_all").click().run())
    records = store().tag_records()
    assert len(records) == len({r.review_key for r in records}) > 0
    assert {(r.tag, r.author) for r in records} == {("sarcasm", "Ada")}
    assert "Tagged" in texts(at)
    # the whole split is no slice; a cohort with conditions is saved beside the predictions
    ok(at.text_input(key="coh_slice_name").input("whole split").run())
    ok(at.button(key="coh_save_slice").click().run())
    assert "Not saved: this slice has no condition" in texts(at)
    cohort = [o for o in at.selectbox(key="coh_open").options if not o.endswith("every review")]
    assert cohort, "the tree did not split the toy test set"
    ok(at.selectbox(key="coh_open").set_value(cohort[0]).run())
    ok(at.text_input(key="coh_slice_name").input("first cohort").run())
    ok(at.button(key="coh_save_slice").click().run())
    found = list((ckpt_root / "a" / ".analysis").glob("*/slices.json"))
    assert found, texts(at)
    saved = json.loads(found[0].read_text())
    query = cohort[0].split(" · ")[-1]
    assert saved["slices"]["first cohort"]["where"] == query
    tab(at, "Heat map")
    assert at.selectbox(key="coh_heat_x").value != at.selectbox(key="coh_heat_y").value
    assert "Exact duplicate pairs" in [m.label for m in tab(at, "Hygiene").metric]


def test_the_queue_saves_a_relabel_a_note_and_a_mark_then_moves_on(home, ckpt_root):
    at = tab(open_page(ckpt_root), "Triage")
    ok(at.toggle(key="coh_queue_wrong").set_value(False).run())
    first = at.text[0].value
    ok(at.text_input(key="coh_author").input("Bo").run())
    note = [t for t in at.text_area if t.label == "Note"][0]
    note.input("the stars say 5, the words say 1")
    slider = [s for s in at.select_slider if s.label == "Its true rating"][0]
    true = slider.value
    slider.set_value(1 if true != 1 else 2)
    [m for m in at.multiselect if m.label == "Tags"][0].set_value(["sarcasm", "Battery  Life"])
    ok(at.button[[b.label for b in at.button].index("Save and next")].click().run())
    s = store()
    (key,) = s.reviewed()
    assert s.note(key) == "the stars say 5, the words say 1"
    # a tag typed in the form is stored as a cohort's tag is
    assert sorted(s.tags([key])[key]) == ["battery-life", "sarcasm"]
    relabel = s.relabels()[key]
    assert (relabel.previous, relabel.author) == (true, "Bo") and relabel.stars != true
    assert at.text[0].value != first                   # the next review came up


def test_the_corrected_file_is_written_where_the_train_page_lists_it(home, ckpt_root):
    from reviewbert.cohorts.keys import review_key
    from reviewbert.data import files as datafiles
    from reviewbert.data import iter_reviews
    at = tab(open_page(ckpt_root), "Fix and compare")
    ok(at.button(key="coh_fix_write").click().run())
    path = home / "uploads" / "corrected.jsonl"
    assert path.is_file(), texts(at)
    assert path in datafiles.list_data_files()
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert 0 < len(rows) <= 120 and {"text", "rating"} <= set(rows[0])
    assert len({review_key(r["text"]) for r in rows}) == len(rows)     # duplicates dropped
    assert iter_reviews is not None
    labels = [b.label for b in at.get("download_button")]
    assert {"Download them as CSV", "Download them as JSONL"} <= set(labels)
    # the retrained checkpoint (b here) compared on the cohorts, after its evaluation
    ok(at.button(key="coh_compare_button").click().run())
    table = at.dataframe[-1].value
    assert list(table["cohort"])[0] == "every review" and table["n"].iloc[0] == 120


def test_a_saved_cohort_is_a_slice_on_error_analysis_compare_and_slices(home, ckpt_root):
    """The cohort saved by the first test (or saved here when run alone), picked on Error
    analysis: the Slices tab reads it on the properties, and Compare restricts both
    checkpoints to its reviews."""
    import pandas as pd

    from reviewbert.analysis import slices
    from reviewbert.cohorts import conditions
    from reviewbert.viz.markdown import md_escape
    at = open_page(ckpt_root)
    folder = next((ckpt_root / "a" / ".analysis").glob("*/predictions.parquet")).parent
    table = pd.read_parquet(folder / "properties.parquet")
    query = f"n_words > {int(table['n_words'].median())}"
    slices.save_slice(folder, "long enough", slices.SliceSpec(where=query))
    n = int(conditions.mask_of(conditions.parse_query(query), table).sum())
    assert 0 < n < 120
    at.switch_page("pages/error_analysis.py")
    ok(at.run())
    at.session_state["err_tab"] = "Slices"
    ok(at.run())
    ok(at.selectbox(key="slc_saved").set_value("long enough").run())
    assert f"{md_escape(query)}**: {n:,} of 120 reviews" in texts(at)
    at.session_state["err_tab"] = "Compare"
    ok(at.run())
    if [b for b in at.button if b.key == "err_compare_button"]:
        ok(at.button(key="err_compare_button").click().run())
    ok(at.selectbox(key="cmp_slice").set_value("long enough").run())
    assert at.dataframe[0].value.iloc[0, 1] == str(n)          # the reviews row: the cohort's


def test_the_lexicon_is_edited_on_the_page_and_a_broken_one_is_refused(home, ckpt_root):
    from reviewbert.cohorts import lexicon
    at = open_page(ckpt_root)
    user = home / "cache" / "lexicon.yaml"
    area = at.text_area(key="coh_lexicon")
    assert area.value == lexicon.shipped_text()
    ok(area.input("aspects: [not, a, mapping]").run())
    ok(at.button(key="coh_lexicon_save").click().run())
    warned = [w.value for w in at.warning if "Not saved" in w.value]
    assert len(warned) == 1 and "\n" not in warned[0] and not user.exists()
    edited = lexicon.shipped_text().replace("aspects:\n", "aspects:\n  case: [case, cover]\n", 1)
    ok(at.text_area(key="coh_lexicon").input(edited).run())
    ok(at.button(key="coh_lexicon_save").click().run())
    assert user.read_text(encoding="utf-8") == edited
    assert "aspect_case" in at.session_state["coh_table"][1].columns   # recomputed with it
