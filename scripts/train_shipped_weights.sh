#!/usr/bin/env bash
# Re-create the shipped captioner weights (weights/ddla-real.pt, capt-real.pt, duda-real.pt,
# duda-aux-real.pt, onediff-real.pt, clip4idc-real.pt, idc-pcl-real.pt).
#
# Training data: the synthetic benchmark mixed with real-pixel composites: object sprites and an
# empty background cut from the two CC BY 4.0 Intel clips ("Sample videos from
# github.com/intel-iot-devkit/sample-videos, licensed CC BY 4.0"), pasted at their real scale into
# their own camera's scene. Held out for the real-frame check (tests/test_real_frames.py):
#   - the parking lot from frame 290 on (the fourth car, frames ~315-345, is never seen),
#   - the room from frame 900 on (the last two people, frames ~930-1350, are never seen),
#   - the GIF camera (intel_person-bicycle-car-detection.gif) entirely.
# The DVR-Scan clips have no licence: never train shipped weights on them.
#
# Usage: scripts/train_shipped_weights.sh [MEDIA_DIR]   (default: ../shared/media); writes runs/shipped/
# Each model took 8-48 min on 2 shared CPU cores (weights/README.md); the 3-D benchmark's
# render about 35 min, the mix's cache about 14 min.
set -euo pipefail
cd "$(dirname "$0")/.."
MEDIA=${1:-../shared/media}
WORK=runs/shipped  # the recipes' data and init_from point here
SPOTDIFF=${SPOTDIFF:-.venv/bin/spotdiff}
PYTHON=${PYTHON:-.venv/bin/python}
MODELS=${MODELS:-ddla capt duda duda-aux onediff clip4idc idc-pcl}

# 1. Sprites and empty backgrounds from the training part of each CC BY clip. --every: the
#    cutter keeps one sprite per still object, so sparser samples give more distinct poses.
if [ ! -f "$WORK/sprites/car-lot/sprites.json" ]; then
  "$SPOTDIFF" data sprites "$MEDIA/intel_car-detection.mp4" --kind car --every 4 --stop 290 \
    --out "$WORK/sprites/car-lot" --backgrounds-out "$WORK/backgrounds"
  "$SPOTDIFF" data sprites "$MEDIA/intel_one-by-one-person-detection.mp4" --kind person --every 5 \
    --stop 900 --out "$WORK/sprites/room" --backgrounds-out "$WORK/backgrounds"
fi

# 2. One benchmark, half real composites and half procedural scenes. Seed 1, so none of its
#    procedural pairs is a pair of the default benchmark (seed 0), whose test split scores the
#    models on the synthetic distribution.
if [ ! -f "$WORK/data/synth.json" ]; then
  "$SPOTDIFF" data synth --out "$WORK/data" --pairs 1200 --seed 1 --real-share 0.5 \
    --backgrounds "$WORK/backgrounds" --sprites "$WORK/sprites"
fi

# 3. The rendered 3-D benchmark (scripts/robust_results.sh renders the same folder; about 35 min
#    on two cores) and one mix of it with the composites for the families trained on both
#    (duda, duda-aux, ...: training/<model>-real.yaml read runs/mixed). The mix lists the images
#    in place; its cache is its own (analysis, grids, and the levels onediff reads).
CLEVR=runs/robust/clevr-400
MIX=runs/mixed
if [ ! -f "$CLEVR/splits.json" ]; then
  "$SPOTDIFF" data clevr --out "$CLEVR" --pairs 400 --seed 0
fi
if [ ! -f "$MIX/train.jsonl" ]; then
  "$SPOTDIFF" data mix "$MIX" "$CLEVR" "$WORK/data" --split train --split val
fi
OMP_NUM_THREADS=1 "$SPOTDIFF" data prepare "$MIX" --backbone efficientnet_lite0 --device cpu
OMP_NUM_THREADS=1 "$SPOTDIFF" data prepare "$MIX" --backbone efficientnet_lite0 --device cpu --level 8 --level 16

# 4. Every model trains from scratch on the mix (ddla and capt did, until 2026-11-27, start
#    from the synthetic-only weights of commit 4baa580 and fine-tune on the composites alone).
#    Recipes: training/<model>-real.yaml. Then the best checkpoint is slimmed (no optimizer
#    state, float16) into weights/.
for model in $MODELS; do
  "$SPOTDIFF" train --model "$model" --recipe "training/$model-real.yaml" --data "$MIX" \
    --out "$WORK/runs/$model"
  "$PYTHON" -c "from spotdiff_cli.captioners.checkpoint import slim_checkpoint; slim_checkpoint('$WORK/runs/$model/best.pt', 'weights/$model-real.pt')"
  sha256sum "weights/$model-real.pt"  # goes into weights/manifest.json with the byte count
done
