#!/usr/bin/env bash
# The GPU benchmark for a borrowed GPU machine (docs/scaling.md): ends by itself within its budget
# (8.75 minutes by default, so 9 in all), every number in one JSON under $OUT when OUT is set (see gpu.py).
#   bash benchmarks/gpu.sh [--minutes 9] [--rows 32] [--out FILE] ...   (--device cpu --smoke: the CPU check)
# Nothing is installed where a torch is already installed: the repository is put on PYTHONPATH, and
# a missing package is named in one sentence. Only a machine with no torch at all, but with a GPU or
# asked for --device cpu, gets the project's .venv (scripts/setup.sh, which needs the network).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "gpu.sh: $*" >&2; }
cpu=0 smoke=0 minutes="" previous=""
for arg in "$@"; do
  [ "$previous" = --device ] && [ "$arg" = cpu ] && cpu=1
  [ "$previous" = --minutes ] && minutes="$arg"
  case "$arg" in --device=cpu) cpu=1 ;; --smoke) smoke=1 ;; --minutes=*) minutes="${arg#--minutes=}" ;; esac
  previous="$arg"
done
[ -n "$minutes" ] || minutes=$([ "$smoke" = 1 ] && echo 2 || echo 8.75)  # gpu.py's defaults
python=python3
if ! "$python" -c "import torch" >/dev/null 2>&1; then
  if [ "$cpu" = 0 ] && ! command -v nvidia-smi >/dev/null && ! ls /dev/nvidia* >/dev/null 2>&1; then
    say "no torch and no NVIDIA GPU on this machine; run it on a GPU machine, or pass --device cpu --smoke to check it on this CPU"
    exit 2
  fi
  source scripts/setup.sh
  python=python
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
"$python" - "$cpu" <<'PY'
import importlib, shutil, sys

cpu = sys.argv[1] == "1"
for name in ("torch", "numpy", "tqdm", "safetensors", "tokenizers", "huggingface_hub"):
    try:
        importlib.import_module(name)
    except Exception as e:
        print(f"gpu.sh: {sys.executable} cannot import {name} ({type(e).__name__}: {e}); "
              f"install it there (pip install {name.replace('_', '-')}), or carry its wheel", file=sys.stderr)
        sys.exit(2)
import torch

FLOOR, TESTED = (2, 7), ("2.11", "2.13")  # recompile_limit's name; the versions CI tests
version = torch.__version__.split("+")[0]
problem = None
if tuple(int(p) for p in version.split(".")[:2]) < FLOOR:
    problem = f"torch {torch.__version__} is older than {FLOOR[0]}.{FLOOR[1]}; install a newer CUDA build of torch"
elif not cpu and not torch.cuda.is_available():
    problem = (f"no CUDA device is visible to torch {torch.__version__} (a CPU build, or no driver); "
               "run on a GPU machine with a CUDA build of torch, or pass --device cpu --smoke")
elif not cpu and not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
    problem = "no C compiler (cc, gcc or clang) on PATH, which Triton needs; install one (apt-get install gcc)"
if problem:
    print(f"gpu.sh: {problem}", file=sys.stderr)
    sys.exit(2)
try:
    import triton
    triton = triton.__version__
except ImportError:
    triton = None
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
print(f"gpu.sh: python {sys.version.split()[0]}, torch {torch.__version__}, triton {triton}, GPU {gpu}")
if not version.startswith(TESTED):
    print(f"gpu.sh: notice: CI tests torch {' and '.join(TESTED)}, not {version}", file=sys.stderr)
PY
# the hard limit: gpu.py keeps to its budget; this ends it 15 s after, whatever happens
limit=$("$python" -c "import sys; print(int(60 * float(sys.argv[1]) + 15))" "$minutes")
exec timeout --kill-after=10 "$limit" "$python" benchmarks/gpu.py "$@"
