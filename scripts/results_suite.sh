#!/usr/bin/env bash
# The runs behind docs/RESULTS.md (about 3 hours on 2 CPU cores before the paper suite gained rl-prior-only
# and three seeds of each fixed segmentation, an estimated 4 now; resumable: rerun to continue):
# the paper suite (with its downstream scores) and the RL ablations on the English corpus, rl-group, rl and hnet
# on the code corpus.
# Usage: scripts/results_suite.sh [OUT_BASE]; then python scripts/results_report.py OUT_BASE
source "$(dirname "$0")/setup.sh"
base="${1:-runs/results}"
rltok data prepare english
rltok data prepare code
rltok data prepare bigbench
rltok compare --suite paper --data english --budget-bytes 1572864 --max-test-bytes 262144 \
  --downstream agreement,hyperbaton,social_iqa,winowhy,winogrande --downstream-limit 300 --out "$base/english-paper"
rltok compare --suite ablations --seeds 3 --data english --budget-bytes 524288 --max-test-bytes 262144 --downstream none --out "$base/english-ablations"
rltok compare --suite paper --methods rl-group,rl,hnet --seeds 3 --data code --budget-bytes 524288 --max-test-bytes 262144 --downstream none --out "$base/code"
