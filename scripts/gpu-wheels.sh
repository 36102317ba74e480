#!/usr/bin/env bash
# Here, before a GPU session: what `bash scripts/gpu-check.sh` needs on a lent GPU machine,
# which has PyTorch (CUDA) but no network. Writes two ignored folders to carry there:
#   .whl/       the wheels of transformers (ReviewBERT pins 5.23; the image has 5.17) and regex
#               (transformers checks its version on import), Python 3.12, x86-64. The image's
#               huggingface_hub 1.33, tokenizers 0.23.2, safetensors 0.8.0 and accelerate 1.15.0
#               meet transformers 5.23's own pins, and the tree that travels is limited to
#               64 MiB (the demo checkpoint alone is 45 MB), so nothing more is carried.
#   .gpu-data/  the first 4,000 reviews of one real review file from ../shared/data (the
#               check trains on 4,096)
# Then: run `bash scripts/gpu-check.sh` on the machine with carry [".whl", ".gpu-data"].
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
grep -qx '/.gpu-data/' .git/info/exclude 2>/dev/null || echo '/.gpu-data/' >> .git/info/exclude
PY=${PY:-.venv/bin/python}
pins=$($PY -m pip list --format=freeze 2>/dev/null \
  | grep -iE '^(transformers|regex)==' || true)
[ -n "$pins" ] || { echo "run make setup first (no pinned versions found in $PY)" >&2; exit 2; }
rm -rf .whl && mkdir -p .whl
# shellcheck disable=SC2086
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl $pins
DATA=${REVIEWBERT_DATA_DIR:-../shared/data}
mkdir -p .gpu-data
rm -f .gpu-data/*
if [ -f "$DATA/unlocked_mobile_10k.csv" ]; then
  $PY - "$DATA/unlocked_mobile_10k.csv" .gpu-data/unlocked_mobile_4k.csv <<'PYEOF'
import csv, sys
csv.field_size_limit(2**31 - 1)
with open(sys.argv[1], newline="", encoding="utf-8") as f, \
        open(sys.argv[2], "w", newline="", encoding="utf-8") as g:
    w = csv.writer(g, quoting=csv.QUOTE_NONNUMERIC)
    for i, row in enumerate(csv.reader(f)):
        if i > 4000:
            break
        w.writerow(row if i == 0 else [row[0], int(row[1]), *row[2:]])
PYEOF
else
  echo "note: no $DATA/unlocked_mobile_10k.csv; the check will use the built-in reviews" >&2
fi
du -sh .whl .gpu-data
echo "travels: $(( ( $( (git ls-files; git ls-files --others --exclude-standard) | xargs -d '\n' du -cb 2>/dev/null | tail -1 | cut -f1) + $(du -cb .whl .gpu-data | tail -1 | cut -f1) ) / 1024 )) KiB of 65536"
