"""max-autotune's measurements kept on disk (runtime/autotune.py), so that compiling the
same graph again does not measure again.

Note on the key. A measurement holds for the code measured, the layouts of its inputs,
the thread count and the machine. Its key is the sha256 of what was measured (a merge or
a thread count), each candidate's kernels' code (codegen.cpp.code_key: the text less the
kernel's name; thread counts are in the pragmas), the inputs' shapes, strides and dtypes,
the thread count, and the toolchain (compiler, flags and the CPU its code is built for:
runtime/toolchain.py). The record, `<cache_dir>/autotune/<key[:2]>/<key>.json`, holds
the median seconds per call of each candidate. It is written atomically as built kernels
are (build.py's note), lives in the trusted cache directory and is evicted with the rest
(cache.py); a record that does not parse is measured again.
"""
from __future__ import annotations

import hashlib
import json
import os

from brrr_compiler.runtime import cache
from brrr_compiler.runtime.build import _write_atomic

FORMAT = 1          # bump when what a record means changes


def key(what: str, candidates: dict[str, list[str]], inputs: list, threads: int,
        toolchain) -> str:
    """The measurement's key: `candidates` maps each candidate's name to its kernels' code
    keys, `inputs` lists the input tensors' specs (script_inputs.tensor_spec)."""
    text = json.dumps([FORMAT, what, sorted(candidates.items()), [repr(s) for s in inputs],
                       threads, repr(toolchain)])
    return hashlib.sha256(text.encode()).hexdigest()


def _path(cache_dir: str, k: str) -> str:
    return os.path.join(cache.usable_dir(cache_dir), "autotune", k[:2], k + ".json")


def lookup(cache_dir: str, k: str) -> dict[str, float] | None:
    """{candidate: median seconds per call} measured earlier, or None."""
    path = _path(cache_dir, k)
    try:
        with open(path) as f:
            record = json.load(f)
        times = {str(name): float(t) for name, t in record["seconds"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    cache.touch(path)
    return times


def store(cache_dir: str, k: str, seconds: dict[str, float], max_bytes: int = 0) -> None:
    """Keep `seconds` ({candidate: median seconds per call}) under key `k`; a cache that
    cannot be written only costs a measurement next time."""
    data = json.dumps({"format": FORMAT, "seconds": seconds}).encode()
    try:
        _write_atomic(_path(cache_dir, k), data)
    except OSError:
        return
    cache.evict(cache.usable_dir(cache_dir), max_bytes, added=len(data))
