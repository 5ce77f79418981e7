#!/usr/bin/env bash
# Run the default test suite on a fresh machine: sets up .venv, then pytest.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -m slow` for the long sweeps).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
