#!/usr/bin/env bash
# Here, before a GPU session: what `bash scripts/gpu-check.sh` needs on a lent GPU machine,
# which has PyTorch (CUDA) but no network. Writes two ignored folders to carry there:
#   .whl/       wheels of the libraries whose versions ReviewBERT pins (Python 3.12, x86-64)
#   .gpu-data/  one real review file from ../shared/data (the reviews the check trains on)
# Then: run `bash scripts/gpu-check.sh` on the machine with carry [".whl", ".gpu-data"].
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
grep -qx '/.gpu-data/' .git/info/exclude 2>/dev/null || echo '/.gpu-data/' >> .git/info/exclude
PY=${PY:-.venv/bin/python}
pins=$($PY -m pip list --format=freeze 2>/dev/null \
  | grep -iE '^(transformers|tokenizers|huggingface[-_]hub|safetensors|accelerate)==' || true)
[ -n "$pins" ] || { echo "run make setup first (no pinned versions found in $PY)" >&2; exit 2; }
rm -rf .whl && mkdir -p .whl
# shellcheck disable=SC2086
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl $pins
DATA=${REVIEWBERT_DATA_DIR:-../shared/data}
mkdir -p .gpu-data
cp "$DATA/unlocked_mobile_10k.csv" .gpu-data/ 2>/dev/null \
  || echo "note: no $DATA/unlocked_mobile_10k.csv; the check will use the built-in reviews" >&2
du -sh .whl .gpu-data
