#!/usr/bin/env bash
# The main job: train the tiny preset with RL boundaries on the embedded Shakespeare corpus (about
# 10 minutes on 2 CPU cores), then report held-out bits per byte, boundary rate, word alignment
# and a segmented passage of test text. Usage: scripts/demo.sh [RUN_DIR] [extra `rltok train` flags]
source "$(dirname "$0")/setup.sh"
out="${1:-runs/demo-$(date +%Y%m%d-%H%M%S)}"
shift || true
rltok train --preset tiny --out "$out" --time-limit 540 "$@"
echo
echo "== held-out test documents (Macbeth, Twelfth Night), sampled boundaries =="
rltok eval --checkpoint "$out" --json > "$out/test_eval.json"
python3 - "$out/test_eval.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"test bits per byte     {s['bpb']:.4f}   (per-document mean {s['bpb_doc_mean']:.4f})")
print(f"boundary rate          {s['rate']:.4f}   ({s['bytes_per_chunk']:.2f} bytes per chunk; target 0.2)")
print(f"whitespace recall      {s['whitespace_recall']:.4f}   (chance: about the rate)")
print(f"whitespace precision   {s['whitespace_precision']:.4f}")
print(f"word-start recall      {s['word_start_recall']:.4f}   (chunks ending on a word's first letter)")
print(f"word-start precision   {s['word_start_precision']:.4f}")
PY
echo
echo "== a passage of Macbeth, chunk by chunk (sampled boundaries, chunks separated by |) =="
python3 -c 'from rltok.data import embedded_corpus as c; import sys; sys.stdout.buffer.write(c().test[0][40000:40600])' > "$out/passage.txt"
rltok segment --checkpoint "$out" --file "$out/passage.txt" --format plain
