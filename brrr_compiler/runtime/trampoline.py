"""One native call that runs several compiled kernels in a row (the runner's segments).

A ctypes call costs about a microsecond before the kernel starts (argument conversion,
the GIL released and taken back), more than a tiny kernel's work. A segment of consecutive
kernels is run by one call of `brrr_segment_<n>` instead: its `n` arguments are the
segment's slots (the tensors it reads from outside, the outputs it hands back, and its
arena of intermediates), and a program, built once when the runner is built, lists per
kernel its function pointer and, per argument, a slot and a byte offset into it.

The library is plain C, the same for every graph: built once per cache directory (cached
on disk by content like any kernel) and shared, so a graph's own kernels keep their fast
builds. Kernels' parameters are all pointers here (segments take only kernels with static
sizes), which the calling convention passes alike whatever they point to.
"""
from __future__ import annotations

import ctypes
import threading

from brrr_compiler.log import logger

MAX_ARGS = 32      # a kernel with more buffers is called on its own
MAX_SLOTS = 32     # a segment reading and writing more tensors is not made


def _source() -> str:
    cases = []
    for n in range(1, MAX_ARGS + 1):
        params = ", ".join(["void*"] * n)
        args = ", ".join(f"a[{i}]" for i in range(n))
        cases.append(f"    case {n}: ((void (*)({params}))fn)({args}); break;")
    entries = []
    for n in range(1, MAX_SLOTS + 1):
        params = ", ".join(f"char* s{i}" for i in range(n))
        slots = ", ".join(f"s{i}" for i in range(n))
        entries.append(f'extern "C" void brrr_segment_{n}(const int64_t* p, {params}) '
                       f'{{ char* s[{n}] = {{{slots}}}; run(p, s); }}')
    return "\n".join([
        "// brrr: runs a segment's kernels in order (runtime/trampoline.py)",
        "#include <stdint.h>",
        "static void run(const int64_t* p, char** s) {",
        "  int64_t kernels = *p++;",
        "  for (int64_t k = 0; k < kernels; ++k) {",
        "    void* fn = (void*)*p++;",
        "    int64_t n = *p++;",
        f"    void* a[{MAX_ARGS}];",
        "    for (int64_t i = 0; i < n; ++i, p += 2) a[i] = s[p[0]] + p[1];",
        "    switch (n) {",
        *cases,
        "    }",
        "  }",
        "}",
        *entries,
        "",
    ])


_libs: dict[tuple, object] = {}
_lock = threading.Lock()


def load(cache_dir: str, cxx: str | None = None, max_bytes: int = 0):
    """The trampoline library for this cache and compiler, or None where it cannot be built
    (then every kernel is called on its own, as before)."""
    from brrr_compiler.runtime.build import BuildError, build_and_load

    key = (cache_dir, cxx)
    with _lock:
        if key not in _libs:
            try:
                _libs[key] = build_and_load(_source(), cache_dir, cxx, max_bytes)
            except (BuildError, OSError) as err:
                logger.debug("segment trampoline failed to build: %s", err)
                _libs[key] = None
        return _libs[key]


def entry(lib, slots: int):
    """The function running a program over `slots` tensors' data pointers."""
    fn = getattr(lib, f"brrr_segment_{slots}")
    fn.argtypes = [ctypes.c_void_p] * (slots + 1)
    fn.restype = None
    return fn


def address(fn) -> int:
    """A bound ctypes function's address."""
    return ctypes.cast(fn, ctypes.c_void_p).value
