#!/usr/bin/env bash
# On a lent GPU machine (no network): the whole GPU check, one command.
# Its python3 holds PyTorch with CUDA; the wheels from `bash scripts/gpu-wheels.sh` (.whl)
# put ReviewBERT's pinned transformers and friends in front of the machine's own.
set -euo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/reviewbert-site .whl/*.whl
  export PYTHONPATH=/tmp/reviewbert-site${PYTHONPATH:+:$PYTHONPATH}
fi
[ -d .gpu-data ] && export REVIEWBERT_DATA_DIR="$PWD/.gpu-data"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
exec python3 bench/gpu_check.py --out "${OUT:-artifacts/gpu_check}" "$@"
