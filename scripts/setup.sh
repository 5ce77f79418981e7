#!/usr/bin/env bash
# Create/refresh .venv with torch (CPU build, pinned for this project's machines), brrr
# in editable mode and the test extra. Idempotent: a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
# torch first and pinned: a bare `torch` requirement would pull a multi-GB CUDA build.
if ! "$VPY" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null; then
  "$VPY" -m pip install -q "torch==2.13.0"
fi
"$VPY" -m pip install -q -e ".[test]"
