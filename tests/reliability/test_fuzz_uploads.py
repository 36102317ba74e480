"""Uploads under generated names and sizes (Hypothesis): path traversal, absolute
paths, NUL bytes, separators of both kinds, dots, unicode, very long names.

save_upload (reviewbert.data.files; both upload widgets, the training page's and
the error page's, call it) either refuses with an UploadError or writes exactly
one plain, visible review file directly inside its uploads folder, with the
content given, and never anything anywhere else.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import event
from hypothesis import strategies as st

from reviewbert.data import files as D

from fuzzing import time_limit, twins

CSV = b"Rating,Reviews\n5,Great phone and a great battery\n1,Broke after a day\n"

PIECES = st.sampled_from(["..", ".", "/", "\\", "\x00", "~", "", " ", "reviews", "etc", "passwd",
                          "C:", "%2e%2e", "\u202e", "\u2024", "．．", "\n", "-", "_", "*", "?",
                          ".csv", ".json.gz", ".tsv", ".exe", ".csv.exe", "a" * 200])
NAMES = st.one_of(
    st.lists(PIECES, max_size=8).map("".join),
    st.lists(PIECES, max_size=5).map("/".join).map(lambda s: "/" + s + ".csv"),
    st.text(max_size=300),
    st.tuples(st.text(max_size=60), st.sampled_from(D.EXTENSIONS)).map("".join),
)


def _names_never_leave_the_uploads_folder(name):
    with tempfile.TemporaryDirectory(prefix="rb-up-") as root:
        root = Path(root)
        folder = root / "uploads"
        try:
            with time_limit(10, "save_upload"):
                path = D.save_upload(name, CSV, folder)
        except D.UploadError as e:
            event("refused")
            assert str(e).strip()
            assert not folder.exists() or not any(folder.iterdir())  # nothing left behind
            return
        event("kept")
        assert path.parent == folder and path.parent.resolve() == folder.resolve()
        assert path.is_file() and not path.is_symlink() and path.read_bytes() == CSV
        assert not path.name.startswith(".") and D.is_review_file(path.name)
        assert all(c.isascii() and (c.isalnum() or c in "._-") for c in path.name)
        assert len(path.name) <= 120
        assert D.list_data_files(folder) == [path]  # the picker sees it
        assert sorted(root.rglob("*")) == [folder, path]


def _size_limit_holds(extra):
    with tempfile.TemporaryDirectory(prefix="rb-up-") as root:
        folder, limit = Path(root), 256
        content = (CSV * 4)[: limit + extra]
        try:
            path = D.save_upload("r.csv", content, folder, max_bytes=limit)
        except D.UploadError as e:
            assert extra > 0 and "limit" in str(e)
            assert not any(folder.iterdir())
            return
        assert extra <= 0 and path.read_bytes() == content


test_names_never_leave_the_uploads_folder, test_names_never_leave_the_uploads_folder_fuzz = twins(
    _names_never_leave_the_uploads_folder, name=NAMES)
test_size_limit_holds, test_size_limit_holds_fuzz = twins(
    _size_limit_holds, extra=st.integers(-40, 40))
