"""Compression bombs: small .gz files that expand to gigabytes are refused early,
in bounded memory and time, through the readers, the CLI and an upload.

Deflate expands at most ~1030x, so "1 MB -> 1 GiB" is the most one MB can do;
the 5 GiB bomb is 5 MB of 80 gzip members (``gzip`` reads every member of a
file, so a bomb may have many). The guard (reviewbert.data.read._Gunzip) counts
the compressed bytes behind every decompressed one and stops past 100x.

Memory and time are measured in a fresh subprocess (tests/peak_rss.py): a read of
any of these to the end would take minutes, and the 28M-row bomb's pass-1 table
alone would take ~0.4 GB.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reviewbert.data import DataError, build_splits, iter_reviews
from reviewbert.data import files as D
from reviewbert.model.labels import FIVE

ROOT = Path(__file__).resolve().parents[2]
RECORD = b'{"reviewText": "great phone, works well", "overall": 5}\n'
BLOCK = 64 << 20


def _bomb(path: Path, head: bytes, filler: bytes, members: int) -> Path:
    """``head`` + ``members`` x 64 MiB of ``filler``, as ``members`` gzip members."""
    block = filler * (BLOCK // len(filler))
    member = gzip.compress(block, compresslevel=9, mtime=0)
    path.write_bytes(gzip.compress(head, mtime=0) + member * members)
    return path


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bombs")
    return {
        # ~1 MB -> 1 GiB: one good record, then blank lines (each one a reader loop turn)
        "blank-lines": _bomb(d / "lines.json.gz", RECORD, b"\n", 16),
        # ~3 MB -> 1 GiB of valid, identical records: every row usable until dedup
        "records": _bomb(d / "records.json.gz", b"", RECORD, 16),
        # ~5 MB -> 5 GiB: a CSV whose one text field never ends (no newline at all)
        "one-line": _bomb(d / "oneline.csv.gz", b"Reviews,Rating\n", b"x", 80),
    }


def _peak(tmp_path: Path, *argv: str, timeout: float = 120):
    """(peak RSS stats, CompletedProcess) of ``argv`` run under tests/peak_rss.py."""
    stats = tmp_path / f"peak-{len(list(tmp_path.glob('peak-*')))}.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "peak_rss.py"), str(stats), *argv],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    return json.loads(stats.read_text()), proc


def test_sizes_are_what_the_docstring_says(bombs):
    sizes = {k: p.stat().st_size for k, p in bombs.items()}
    assert sizes["blank-lines"] < 1.2e6 and sizes["one-line"] < 6e6, sizes


@pytest.mark.parametrize("kind", ["blank-lines", "records", "one-line"])
def test_readers_refuse_a_bomb(bombs, kind):
    path = bombs[kind]
    with pytest.raises(DataError, match=rf"{path.name}: refused as a compression bomb"):
        list(iter_reviews(path))
    with pytest.raises(DataError, match="compression bomb"):
        build_splits([path], FIVE)


def test_small_repetitive_gzip_files_are_not_bombs(tmp_path):
    """Below the 8 MiB floor any ratio is fine: test fixtures and tiny files compress 100x+."""
    p = tmp_path / "same.json.gz"
    p.write_bytes(gzip.compress(RECORD * 100_000, mtime=0))  # 5.7 MB at ~300x
    assert len(list(iter_reviews(p))) == 100_000


def test_bombs_stay_small_in_memory_and_time(bombs, tmp_path):
    script = tmp_path / "read_bombs.py"
    script.write_text(
        "import sys, time\n"
        "from reviewbert.data import DataError, build_splits\n"
        "from reviewbert.model.labels import FIVE\n"
        "for p in sys.argv[1:]:\n"
        "    t = time.time()\n"
        "    try:\n"
        "        build_splits([p], FIVE)\n"
        "    except DataError as e:\n"
        "        assert 'compression bomb' in str(e), e\n"
        "    else:\n"
        "        raise SystemExit(p + ' was read')\n"
        "    print(p, round(time.time() - t, 2))\n")
    stats, proc = _peak(tmp_path, str(script), *map(str, bombs.values()))
    assert proc.returncode == 0, proc.stderr
    assert stats["peak_mb"] < 150, stats        # reading any of them whole: gigabytes
    assert stats["seconds"] < 60, stats         # ... and minutes


def test_cli_train_refuses_a_bomb_in_one_line(bombs, tmp_path):
    """`train --data bomb.json.gz`: exit 2, one line, no traceback, memory as for a tiny
    bad file (the same command on a 1 KB file with no rating column is the baseline)."""
    bad = tmp_path / "norating.csv"
    bad.write_text("Reviews,Colour\ngood,red\n")
    base, _ = _peak(tmp_path, "-m", "reviewbert", "train", "--data", str(bad),
                    "--out", str(tmp_path / "run0"))
    stats, proc = _peak(tmp_path, "-m", "reviewbert", "train", "--data", str(bombs["records"]),
                        "--out", str(tmp_path / "run1"))
    assert proc.returncode == 2 and stats["code"] == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("error: ") and "compression bomb" in lines[-1], proc.stderr
    assert "Traceback" not in proc.stderr
    assert stats["peak_mb"] < base["peak_mb"] + 60, (stats, base)
    assert stats["seconds"] < 60, stats
    status = json.loads((tmp_path / "run1" / "status.json").read_text())
    assert status["state"] == "failed" and "compression bomb" in status["message"]


def test_upload_of_a_bomb_is_refused_and_leaves_nothing(bombs, tmp_path):
    """save_upload (both upload widgets call it) reads a preview: the bomb must stop it
    early; the data report of the training page (build_splits) stops too."""
    uploads = tmp_path / "uploads"
    script = tmp_path / "upload_bombs.py"
    script.write_text(
        "import sys\n"
        "from pathlib import Path\n"
        "from reviewbert.data import files as D\n"
        "from reviewbert.data import DataError\n"
        "from reviewbert.config import TrainConfig\n"
        "uploads = Path(sys.argv[1])\n"
        "for p in map(Path, sys.argv[2:]):\n"
        "    try:\n"
        "        D.save_upload(p.name, p.read_bytes(), uploads)\n"
        "    except D.UploadError as e:\n"
        "        assert 'compression bomb' in str(e) and p.name in str(e), e\n"
        "    else:\n"
        "        raise SystemExit(p.name + ' was kept')\n"
        "    try:\n"
        "        D.training_report([p], TrainConfig(data=[str(p)]))\n"
        "    except DataError as e:\n"
        "        assert 'compression bomb' in str(e), e\n"
        "    else:\n"
        "        raise SystemExit(p.name + ' was read for the report')\n")
    stats, proc = _peak(tmp_path, str(script), str(uploads), *map(str, bombs.values()))
    assert proc.returncode == 0, proc.stderr
    assert not uploads.exists() or not any(uploads.iterdir())
    assert stats["peak_mb"] < 600, stats  # (imports torch for the tokenizer-free report)
    assert stats["seconds"] < 60, stats


def test_upload_size_limit_holds_before_any_reading(tmp_path):
    with pytest.raises(D.UploadError, match="limit"):
        D.save_upload("big.json.gz", b"\x1f\x8b" + b"\0" * 2048, tmp_path, max_bytes=1024)
    assert not any(tmp_path.iterdir())
