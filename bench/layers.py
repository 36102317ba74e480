"""When does BERT decide? The four measurements of issue 50 in one run, each against its own
baseline measured in the same run, with one JSON line at the end.

- probes (``bench/layers_probes.py``): every layer's probe on the demo, reading the vectors
  included (target <= 60 s), and reading them in one pass against one pass per layer
  (target >= 5x);
- patching (``bench/layers_patching.py``): a 60-word pair's layer x word grid (target
  <= 10 s), batched, against one hooked pass per patch (never slower);
- data map (``bench/layers_datamap.py``): recording it during training, paired runs with
  and without (target <= 2 % more time);
- query-key map (``bench/layers_qkmap.py``): 300 test reviews of one head drawn (target
  <= 5 s), against reading the heads one pass at a time.

Run it alone (two torch processes slow each other badly): ``OMP_NUM_THREADS=2
.venv/bin/python bench/layers.py [--only probes,patching] [--quick]``. ``--quick`` proves
every part runs (small sizes); its figures are not the benchmark's and ``met`` is false.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from reviewbert.model.device import cpu_description  # noqa: E402

DEMO = ROOT / "checkpoints" / "demo"
PARTS = ("probes", "patching", "datamap", "qkmap")
QUICK = {"probes": dict(checkpoint=DEMO, read_n=32, quick=True), "patching": dict(checkpoint=DEMO, words=8),
         "datamap": dict(pairs=1, per_class=20, epochs=1),
         "qkmap": dict(checkpoint=DEMO, quick=True)}
FULL = {"probes": dict(checkpoint=DEMO), "patching": dict(checkpoint=DEMO), "datamap": {},
        "qkmap": dict(checkpoint=DEMO)}


def run_part(name: str, quick: bool) -> dict:
    module = importlib.import_module(f"layers_{name}")
    got = module.measure(**(QUICK if quick else FULL)[name])
    print(f"[layers] {name}: " + json.dumps({k: v for k, v in got.items() if k != "detail"}),
          file=sys.stderr, flush=True)
    return got


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(PARTS), help="comma-separated parts to run")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    import transformers
    transformers.logging.set_verbosity_error()
    parts = [p for p in args.only.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"unknown parts: {', '.join(unknown)} (choose from {', '.join(PARTS)})")
    results = {name: run_part(name, args.quick) for name in parts}
    checks = {f"{name}.{k}": bool(v) for name, got in results.items()
              for k, v in got["checks"].items()}
    targets = {f"{name}.{k}": v for name, got in results.items() for k, v in got["targets"].items()}
    print(json.dumps({"bench": "layers", "cpu": cpu_description(), "quick": args.quick,
                      "parts": results, "targets": targets, "checks": checks,
                      "met": (not args.quick) and all(checks.values())}, default=str))


if __name__ == "__main__":
    main()
