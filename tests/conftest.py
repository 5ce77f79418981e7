"""Shared pytest setup: make the repository root importable, so `import passes` and
`import brrr_compiler` work under a bare `pytest` as well as `python -m pytest`."""
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
