# Sourced by the other scripts: makes .venv (torch 2.13.0 CPU build first, then rltok, its test
# tools, the lm-eval adapter's, the hub streaming and the trackers' extras) unless it is already up to date with
# pyproject.toml, and puts it on PATH.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
stamp=".venv/.rltok-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setting up .venv (torch 2.13.0, rltok) ..." >&2
  python3 -m venv .venv
  # torch first and pinned: an unpinned torch resolves to a multi-GB CUDA build
  .venv/bin/pip install --quiet --disable-pip-version-check torch==2.13.0
  .venv/bin/pip install --quiet --disable-pip-version-check -e ".[test,eval,hf,track]"
  echo "$want" > "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
