#!/usr/bin/env bash
# The lent GPU machines' environment, simulated on a CPU (docs/scaling.md): torch 2.11 (the version
# they hold) with the packages they have, rltok not installed, no package index (PIP_NO_INDEX=1).
# Runs the FlexAttention-path tests there (an API difference between torch 2.11 and 2.13 fails
# here, not on the device) and benchmarks/gpu.sh end to end. CI runs it after scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
env=.venv-device
want="torch==2.11.0 numpy tqdm safetensors tokenizers huggingface_hub matplotlib pytest hypothesis"
if [ ! -f "$env/.installed" ] || [ "$(cat "$env/.installed")" != "$want" ]; then
  echo "setting up $env (torch 2.11.0 and the GPU machines' packages; about 3 GB) ..." >&2
  python3 -m venv "$env"
  # shellcheck disable=SC2086  # the list is meant to split
  "$env/bin/pip" install --quiet --disable-pip-version-check $want
  echo "$want" > "$env/.installed"
fi
export PATH="$PWD/$env/bin:$PATH" PYTHONPATH="$PWD" PIP_NO_INDEX=1
python -m pytest -q -p no:cacheprovider -m "not on_demand" tests/test_fast_path.py tests/test_cuda_path.py \
  tests/test_gpu_benchmark.py "$@"
