"""``reviewbert export``: a compact copy of a checkpoint to ship (e.g. the demo)."""
from __future__ import annotations

import argparse
from pathlib import Path

from reviewbert.cli import flags


def add_parser(sub):
    x = sub.add_parser("export", help="compact copy of a checkpoint to ship (e.g. the demo)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    flags.checkpoint(x)
    x.add_argument("--out", required=True, metavar="DIR", help="destination folder")
    x.add_argument("--dtype", choices=("float16", "bfloat16", "float32"), default="float16",
                   help="weight dtype on disk (upcast to fp32 when loaded on CPU)")
    return x


def run(args) -> int:
    from reviewbert.model.checkpoint import export_checkpoint
    dest = export_checkpoint(args.checkpoint, args.out, dtype=args.dtype)
    size = sum(f.stat().st_size for f in Path(dest).iterdir() if f.is_file())
    print(f"exported {args.checkpoint} -> {dest} ({args.dtype}, {size / 1e6:.1f} MB)")
    return 0
