"""Ingest benchmark: stream 1,000,000 reviews into balanced splits.

    .venv/bin/python bench/ingest.py [--records 1000000] [--regenerate]

The input is generated once into ``bench/out/`` (gitignored) from the real
files in ../shared/data ($REVIEWBERT_DATA_DIR): record ``i`` takes the real
review ``i mod N`` (text and stars, read with ``iter_reviews``) and appends
`` (#i)`` to its text, so texts are distinct; every 20th record instead copies
record ``i - 10`` exactly, so ~5% are duplicates for the dedup to drop. Records
are McAuley-style JSON lines (reviewerID, asin, reviewText, overall, summary,
unixReviewTime, ...), about as long as the real ones.

The ingest (``build_splits``, 5 labels, default options, min_tokens=0) runs in
a fresh subprocess that does nothing else, so its peak RSS (``ru_maxrss``) is
the ingest's own, not the generator's. Progress goes to stderr; the last stdout
line is one JSON object with the numbers and the targets.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_RECORDS_PER_S = 50_000
TARGET_PEAK_RSS_MB = 1024


def log(msg: str) -> None:
    print(f"[ingest] {msg}", file=sys.stderr, flush=True)


def real_reviews() -> list[tuple[str, int]]:
    from reviewbert.data import DataError, default_data_dir, iter_reviews
    data_dir = default_data_dir()
    reviews: list[tuple[str, int]] = []
    for p in sorted(data_dir.iterdir()):
        if p.suffix.lower() not in (".json", ".jsonl", ".csv", ".tsv", ".gz"):
            continue
        try:
            reviews.extend(iter_reviews(p))
        except DataError as e:
            log(f"skipping {p.name}: {e}")
    if not reviews:
        raise SystemExit(f"no real reviews found in {data_dir} (set REVIEWBERT_DATA_DIR)")
    return reviews


def generate(path: Path, records: int) -> None:
    import orjson
    base = real_reviews()
    n = len(base)
    log(f"generating {records:,} records from {n:,} real reviews -> {path}")
    tmp = path.with_suffix(".tmp")
    t0 = time.time()
    with open(tmp, "wb", buffering=1 << 20) as f:
        for i in range(records):
            v = i - 10 if i % 20 == 19 else i       # every 20th: exact copy of i-10
            text, stars = base[v % n]
            f.write(orjson.dumps({
                "reviewerID": f"A{v * 7919 % 10**12:012d}",
                "asin": f"B{(v // 37) % 10**9:09d}",
                "reviewerName": "Amazon Customer",
                "helpful": [v % 3, v % 5],
                "reviewText": f"{text} (#{v})",
                "overall": float(stars),
                "summary": " ".join(text.split()[:5]),
                "unixReviewTime": 1_300_000_000 + v * 17,
                "reviewTime": "05 21, 2014",
            }) + b"\n")
            if (i + 1) % 200_000 == 0:
                log(f"  generated {i + 1:,}")
    os.replace(tmp, path)
    log(f"generated in {time.time() - t0:.1f}s, {path.stat().st_size / 2**20:.0f} MiB")


def ingest_only(path: Path) -> None:
    """Child process: build the splits and print its own numbers as JSON."""
    from reviewbert.data import build_splits
    from reviewbert.model.labels import FIVE

    def progress(stage: str, name: str, rows: int) -> None:
        if stage == "read" and rows % 200_000 == 0:
            log(f"  pass 1: {rows:,} rows")
        elif stage == "collect":
            log(f"  pass 2: kept {rows:,} texts")

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    splits = build_splits([path], FIVE, progress=progress)
    seconds = time.perf_counter() - t0
    rep = splits.report
    print(json.dumps({
        "records": rep.rows_read,
        "seconds": round(seconds, 2),
        "records_per_s": round(rep.rows_read / seconds),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_before_ingest_mb": round(rss_before, 1),
        "unique_texts": rep.unique_texts,
        "duplicates_dropped": rep.duplicates_dropped,
        "conflicts_dropped": rep.conflicts_dropped,
        "per_class": rep.per_class,
        "split_sizes": {n: len(splits[n]) for n in ("train", "validation", "test")},
    }))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--ingest-only", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ingest_only:
        ingest_only(args.ingest_only)
        return
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"reviews_{args.records}.jsonl"
    if args.regenerate or not path.exists():
        generate(path, args.records)
    else:
        log(f"using cached {path}")
    log("ingesting in a fresh subprocess")
    proc = subprocess.run([sys.executable, __file__, "--ingest-only", str(path)],
                          stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"ingest subprocess failed with exit code {proc.returncode}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result.update({
        "file": str(path.relative_to(ROOT)),
        "file_mb": round(path.stat().st_size / 2**20, 1),
        "target_records_per_s": TARGET_RECORDS_PER_S,
        "target_peak_rss_mb": TARGET_PEAK_RSS_MB,
        "meets_speed": result["records_per_s"] >= TARGET_RECORDS_PER_S,
        "meets_memory": result["peak_rss_mb"] <= TARGET_PEAK_RSS_MB,
    })
    print(json.dumps(result))


if __name__ == "__main__":
    main()
