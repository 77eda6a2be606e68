#!/usr/bin/env bash
# The GPU benchmark: at most 8 minutes on one H200, one JSON under benchmarks/results/ (see gpu.py).
#   benchmarks/gpu.sh [--minutes 8] [--rows 32] [--out FILE] ...   (--device cpu --smoke: a quick CPU check)
# On a fresh GPU machine with only this repository: a preinstalled (CUDA) torch is used as it is and
# the project is installed beside it; without one, the project's .venv (a CPU build) is made. Before
# anything runs, it checks for CUDA, a C compiler (Triton compiles its kernels with one) and a torch
# recent enough, and stops with one sentence when one is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
python=python3
if "$python" -c "import torch" 2>/dev/null; then
  if ! "$python" -c "import rltok, huggingface_hub, safetensors, tokenizers, tqdm" 2>/dev/null; then
    # pip keeps the installed torch when it satisfies the project's bound
    "$python" -m pip install --quiet --disable-pip-version-check -e . >&2
  fi
else
  source scripts/setup.sh
  python=python
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
cpu=0
for arg in "$@"; do [ "$arg" = cpu ] && cpu=1; done
"$python" - "$cpu" <<'PY'
import shutil, sys
import torch
cpu = sys.argv[1] == "1"
need = (2, 6)  # FlexAttention, torch.compile of it, and FSDP2's fully_shard
version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
problem = None
if version < need:
    problem = f"torch {torch.__version__} is older than {need[0]}.{need[1]}; install a newer CUDA build of torch"
elif not cpu and not torch.cuda.is_available():
    problem = (f"no CUDA device is visible to torch {torch.__version__} (a CPU build, or no driver); "
               "run on a GPU machine with a CUDA build of torch, or pass --device cpu --smoke")
elif not cpu and not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
    problem = "no C compiler (cc, gcc or clang) on PATH, which Triton needs; install one (apt-get install gcc)"
if problem:
    print(f"gpu.sh: {problem}", file=sys.stderr)
    sys.exit(2)
print("gpu.sh: torch", torch.__version__, "| cuda:", torch.cuda.is_available() and torch.cuda.get_device_name(0))
PY
exec "$python" benchmarks/gpu.py "$@"
