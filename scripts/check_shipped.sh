#!/usr/bin/env bash
# Issue 24's checks of one learned checkpoint: on the rendered 3-D benchmark's test split, changes
# reported and distractors called unchanged (spotdiff eval), CIDEr-D against nn with a paired bootstrap
# (--compare), and on the held-out real-frame pairs of tests/test_real_frames.py the change type and
# object (scripts/check_real_pairs.py), with the sentences for the bundled parking-lot and tiger pairs.
#
# Usage: scripts/check_shipped.sh MODEL WEIGHTS OUT
#   DATA (default runs/robust/clevr-400: scripts/robust_results.sh renders it) and NN (nn's
#   predictions on its test split, default runs/robust/eval/nn-best-s0/predictions.json).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=$1 WEIGHTS=$2 OUT=$3
DATA=${DATA:-runs/robust/clevr-400}
NN=${NN:-runs/robust/eval/nn-best-s0/predictions.json}
SPOTDIFF=${SPOTDIFF:-.venv/bin/spotdiff}
PYTHON=${PYTHON:-.venv/bin/python}
mkdir -p "$OUT"
"$SPOTDIFF" eval --model "$MODEL" --weights "$WEIGHTS" --dataset "$DATA" --split test \
  --protocol single --device cpu --out "$OUT/eval" > "$OUT/eval.log"
"$SPOTDIFF" eval -p "$OUT/eval/predictions.json" --compare "$NN" --dataset "$DATA" --split test \
  --protocol single --out "$OUT/vs-nn" > "$OUT/vs-nn.log"
"$PYTHON" scripts/check_real_pairs.py --model "$MODEL" --weights "$WEIGHTS" > "$OUT/real.log"
grep -A1 "^model  *accuracy" "$OUT/eval.log" | cut -f1,4,5
grep "changed pairs only\|distractors only" "$OUT/vs-nn.log"
cat "$OUT/real.log"
