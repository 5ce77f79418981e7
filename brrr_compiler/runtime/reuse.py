"""Kernels built earlier in this process, found again by their code.

Note on reuse. A training graph's backward often repeats kernels of its forward: the
channels-last copy of a convolution's weight, for one, is recomputed in the backward
rather than saved. Such a kernel has the code (codegen.cpp.code_key: its text less its
name) of one this process has already built and loaded, so the runtime binds that
kernel's symbol in its library instead of compiling the code again (for the conv net's
training step, 4 of the backward's 14 kernels). The key holds the toolchain and the cache
dir too: another compiler, other flags or another cache never share a library.
Libraries are never unloaded (ctypes does not close them), so keeping them here costs
only the table.
"""
from __future__ import annotations

import hashlib
import threading

from brrr_compiler.codegen.cpp import code_key

_built: dict[str, tuple[object, str]] = {}    # key -> (loaded library, symbol)
_lock = threading.Lock()


def key(kernel, source: str, toolchain, cache_dir: str) -> str:
    """What two kernels share when one may be bound to the other's built code."""
    text = "\0".join((repr(toolchain), cache_dir, code_key(kernel, source)))
    return hashlib.sha256(text.encode()).hexdigest()


def find(keys: dict[str, str]) -> dict[str, tuple[object, str]]:
    """{kernel name: (library, symbol)} for the kernels of `keys` (name -> key) built
    earlier in this process."""
    with _lock:
        return {name: _built[k] for name, k in keys.items() if k in _built}


def remember(k: str, lib, symbol: str) -> None:
    with _lock:
        _built.setdefault(k, (lib, symbol))
