#!/usr/bin/env bash
# The GPU benchmark: at most 8 minutes on one H200, one JSON under benchmarks/results/ (see gpu.py).
#   benchmarks/gpu.sh [--minutes 8] [--rows 32] [--out FILE] ...   (--device cpu --smoke: a quick CPU check)
set -euo pipefail
cd "$(dirname "$0")/.."
# a GPU machine brings its own CUDA build of torch; elsewhere the project's .venv (a CPU build) is made
python=python3
if ! "$python" -c "import torch, safetensors, tqdm, tokenizers, numpy" 2>/dev/null; then
  source scripts/setup.sh
  python=python
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
"$python" -c "import torch; print('gpu.sh: torch', torch.__version__, '| cuda:', torch.cuda.is_available() and torch.cuda.get_device_name(0))"
exec "$python" benchmarks/gpu.py "$@"
