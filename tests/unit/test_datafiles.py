"""The training page's data area: safe uploads, previews, the data report; the picker's catalog."""
from __future__ import annotations

import gzip
import json
import shutil

import pytest

from reviewbert.config import TrainConfig
from reviewbert.data import files as D
from reviewbert.model.checkpoint import list_checkpoints
from reviewbert.training import catalog

from toyreviews import write_toy_csv

CSV = b"Rating,Reviews\n5,Great phone and a great battery\n1,Broke after a day\n3,It is fine\n"


@pytest.mark.parametrize("name", ["../../x.csv", "/etc/passwd.csv", "a/../../b.csv",
                                  "..\\..\\win.csv", "nul\x00byte.csv", ".hidden.csv"])
def test_upload_names_never_leave_the_uploads_folder(tmp_path, name):
    up = tmp_path / "uploads"
    path = D.save_upload(name, CSV, up)
    assert path.parent == up and path.exists()
    assert not path.name.startswith(".") and "\x00" not in path.name
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [path.name]


@pytest.mark.parametrize("name,content,why", [
    ("reviews.csv", b"", "empty"),
    ("reviews.csv", b"   \n ", "empty"),
    ("reviews.exe", CSV, "not a review file"),
    ("junk.csv", bytes(range(256)) * 40, "binary file"),
    ("cols.csv", b"id,colour\n1,red\n2,blue\n", "cannot tell which column"),
    ("big.csv", b"x" * 2048, "limit"),
])
def test_bad_uploads_get_a_clear_message_and_leave_nothing(tmp_path, name, content, why):
    with pytest.raises(D.UploadError, match=why):
        D.save_upload(name, content, tmp_path, max_bytes=1024 if name == "big.csv" else D.MAX_UPLOAD_BYTES)
    assert not any(tmp_path.iterdir())


def test_same_name_other_content_keeps_the_first_upload(tmp_path):
    a = D.save_upload("r.csv", CSV, tmp_path)
    again = D.save_upload("r.csv", CSV, tmp_path)
    other = D.save_upload("r.csv", CSV + b"4,Nice case\n", tmp_path)
    assert a == again and other != a and a.read_bytes() == CSV
    assert other.name.startswith("r-") and other.name.endswith(".csv")


def test_gzipped_json_lines_upload_and_preview(tmp_path):
    rows = [{"reviewText": f"text {i}", "overall": 1 + i % 5, "summary": f"title {i}"} for i in range(8)]
    blob = gzip.compress("\n".join(json.dumps(r) for r in rows).encode())
    path = D.save_upload("phones.json.gz", blob, tmp_path)
    p = D.preview(path, n=3)
    assert p.columns == {"text": "reviewText", "rating": "overall", "title": "summary"}
    assert p.rows == [{"stars": 1, "text": "text 0"}, {"stars": 2, "text": "text 1"},
                      {"stars": 3, "text": "text 2"}]


def test_data_report_is_the_one_training_prints(tmp_path):
    toy = write_toy_csv(tmp_path / "toy.csv", n=200)
    rep = D.training_report([toy], TrainConfig(data=[str(toy)], max_per_class=20))
    counts = rep.to_dict()["split_counts"]
    assert set(counts) == {"train", "validation", "test"}
    assert all(len(set(c.values())) == 1 for c in counts.values())     # balanced in every split
    assert sum(sum(c.values()) for c in counts.values()) == 5 * 20
    three = D.training_report([toy], TrainConfig(data=[str(toy)], labels=3, max_per_class=20))
    assert len(three.to_dict()["split_counts"]["train"]) == 3


def test_list_data_files_takes_review_files_only(tmp_path):
    (tmp_path / "a.csv").write_bytes(CSV)
    (tmp_path / "b.json.gz").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / ".hidden.csv").write_bytes(CSV)
    assert [p.name for p in D.list_data_files(tmp_path)] == ["a.csv", "b.json.gz"]


def test_catalog_offers_best_per_run_and_trials_on_request(tmp_path, tiny_model_dir):
    from browser_support import write_meta
    for rel in ("runA/best", "runA/last", "search1/trial-0000/best", "search1/trial-0001/best",
                "demo"):
        shutil.copytree(tiny_model_dir, tmp_path / rel)
    for run in ("runA", "search1/trial-0000", "search1/trial-0001"):
        write_meta(tmp_path / run, 5)
    (tmp_path / "search1" / "search.json").write_text("{}")
    write_meta(tmp_path / "demo", 5)
    infos = list_checkpoints(tmp_path)
    plain = [e.label for e in catalog.entries(infos)]
    assert sorted(plain) == ["demo (5 labels)", "runA/best (5 labels)"]
    with_trials = catalog.entries(infos, show_trials=True)
    assert len(with_trials) == 4 and catalog.count_trials(infos) == 2
    assert {e.group for e in with_trials} == {"run", "checkpoint", "search search1"}
    assert not any(e.path.endswith("last") for e in with_trials)
