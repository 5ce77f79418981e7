"""Shared pytest setup: make the repository root importable, so `import passes` and
`import brrr_compiler` work under a bare `pytest` as well as `python -m pytest`."""
import os
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

# every kernel lowered under the tests is checked by the kernel-IR verifier
# (brrr_compiler/kernel_verify.py); a broken rule fails the compile that made it
os.environ.setdefault("BRRR_VERIFY_IR", "1")
