"""Shared pytest setup: make the repository root importable, so `import brrr_compiler`
finds this checkout under a bare `pytest` as well as `python -m pytest`. (passes/ is
`brrr_compiler.passes`, a package-dir mapping that `pip install -e .` sets up.)"""
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
