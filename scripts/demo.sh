#!/usr/bin/env bash
# Run the demo on a fresh machine: sets up .venv, then `brrr demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/brrr demo "$@"
