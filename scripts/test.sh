#!/usr/bin/env bash
# Run the default test suite on a fresh machine: sets up .venv, then pytest.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -m slow` for the long sweeps).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The CUDA path's tests run Triton's CPU interpreter. Triton is an optional extra (a
# ~290 MB wheel, ~1 GB installed), kept out of [test]; BRRR_NO_TRITON=1 skips it here,
# and those tests then skip.
if [ -z "${BRRR_NO_TRITON:-}" ]; then
  .venv/bin/python -m pip install -q -e ".[triton]"
fi
# One pytest worker per core (pytest-xdist); BRRR_TEST_WORKERS=0 runs in one process.
# worksteal: a worker that runs out takes queued tests from the other, so one long test
# near the end does not leave a core idle.
exec .venv/bin/python -m pytest -q -n "${BRRR_TEST_WORKERS:-auto}" --dist worksteal "$@"
