"""Build a graph's kernels into shared libraries, falling back per kernel on failure.

A graph's kernels go into one translation unit, or, when there is enough code and more
than one core, into several built side by side (codegen/cpp_units.py's note). If a unit
fails to build, each of its kernels is built alone to find the culprits; their groups
run through ATen instead, with one warning. Without a working C++ compiler every group
runs through ATen. A kernel whose code this process has built before is bound from that
build instead (runtime/reuse.py).

Note on UNIT_MIN_LINES. Compiler start-up and the prelude cost each unit a fixed time,
so a unit built beside another pays only with enough code of its own: about 60 lines of
kernels (measurements: benchmarks/results/notes.md, "Translation-unit size").
"""
from __future__ import annotations

import ctypes
import os
from concurrent.futures import ThreadPoolExecutor

from brrr_compiler.codegen import cpp
from brrr_compiler.codegen.cpp_units import translation_units
from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.log import fallback, logger
from brrr_compiler.runtime import reuse
from brrr_compiler.runtime.build import BuildError, build_and_load, find_toolchain
from brrr_compiler.runtime.runner import CompiledKernel, bind

UNIT_MIN_LINES = 60     # lines of kernel source a unit needs to be worth its own process


def compiled_kernel(kernel: Kernel, lib, symbol: str, group_id: int, out_specs) -> CompiledKernel:
    """`kernel` bound to `symbol` in `lib` (its own name, or an earlier kernel's of the same
    code)."""
    fn = bind(lib, symbol, len(kernel.buffers), len(kernel.size_vars))
    take_error = None
    if kernel.checks_bounds:
        take_error = lib.brrr_take_error
        take_error.restype, take_error.argtypes = ctypes.c_int, []
    return CompiledKernel(group_id, kernel.name, fn, [b.origin for b in kernel.inputs], out_specs,
                          list(kernel.size_vars), take_error)


def build_kernels(kernels: dict[int, Kernel], out_specs: dict[int, list], cfg, num_threads: int,
                  printed: dict[str, str] | None = None):
    """Returns ({group_id: CompiledKernel}, source of the translation units). `printed`:
    kernels' sources by name, already printed for `num_threads` (the rest are printed here)."""
    if not kernels:
        return {}, ""
    toolchain = find_toolchain(cfg.cxx, cfg.cache_dir)
    if toolchain is None:
        fallback("no-compiler", "brrr: no working C++ compiler with OpenMP found (set CXX or "
                 "BRRR_CXX); all fused groups run through ATen instead", cfg.strict)
        return {}, ""
    printed = {k.name: (printed or {}).get(k.name) or cpp.kernel_source(k, num_threads)
               for k in kernels.values()}
    keys = {k.name: reuse.key(k, printed[k.name], toolchain, cfg.cache_dir)
            for k in kernels.values()}
    earlier = reuse.find(keys)
    compiled = {gid: compiled_kernel(k, *earlier[k.name], gid, out_specs[gid])
                for gid, k in kernels.items() if k.name in earlier}
    fresh = [k for k in kernels.values() if k.name not in earlier]
    units, libs = build_units(fresh, cfg, num_threads, printed)
    group_of = {k.name: gid for gid, k in kernels.items()}
    for (members, _), lib in zip(units, libs):
        for k in members:
            gid = group_of[k.name]
            own = lib if lib is not None else _build_alone(k, cfg, num_threads, printed)
            compiled.update(_bind(k, own, gid, out_specs[gid], keys[k.name]))
    return compiled, _joined([source for _, source in units], earlier)


def build_units(kernels: list[Kernel], cfg, num_threads: int, printed: dict[str, str]):
    """([(kernels, source)] per translation unit, [its library, or None where it failed
    to build]): the units built side by side (the module note)."""
    units = translation_units(kernels, num_threads, printed, _cores(), UNIT_MIN_LINES) \
        if kernels else []
    with ThreadPoolExecutor(max(len(units), 1), thread_name_prefix="brrr-build") as pool:
        return units, list(pool.map(lambda unit: _try_build(unit[1], cfg), units))


def _bind(k: Kernel, lib, gid: int, out_specs, key: str) -> dict:
    """{gid: CompiledKernel} for `k` in `lib`, remembered for reuse; {} without a library."""
    if lib is None:
        return {}
    reuse.remember(key, lib, k.name)
    return {gid: compiled_kernel(k, lib, k.name, gid, out_specs)}


def _try_build(source: str, cfg):
    """The loaded library of one translation unit, or None when it fails to build."""
    try:
        return build_and_load(source, cfg.cache_dir, cfg.cxx, cfg.cache_max_bytes)
    except (BuildError, OSError) as err:
        logger.debug("translation unit failed to build: %s", err)
        return None


def _build_alone(k: Kernel, cfg, num_threads: int, printed):
    """The library of `k` built in a unit of its own; None (and one warning, or under
    cfg.strict an error) when it fails to build there too."""
    try:
        return build_and_load(cpp.translation_unit([k], num_threads, printed), cfg.cache_dir,
                              cfg.cxx, cfg.cache_max_bytes)
    except (BuildError, OSError) as err:
        logger.debug("kernel %s failed to build: %s", k.name, err)
        first = err.first_error if isinstance(err, BuildError) else str(err)
        where = f" (source: {err.source})" if getattr(err, "source", "") else ""
        fallback(f"build-{k.name}-{hash(str(k))}",
                 f"brrr: kernel {k.name} failed to build: {first}{where}; its ops run "
                 "through ATen instead (the whole compiler output: logging level DEBUG on "
                 "the 'brrr' logger)", cfg.strict)
        return None


def _cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def _joined(sources: list[str], earlier: dict[str, tuple]) -> str:
    """The units' sources, after a line per kernel bound to an earlier build."""
    head = "".join(f"// {name}: the code of {symbol}, built earlier in this process\n"
                   for name, (_, symbol) in earlier.items())
    if len(sources) <= 1:
        return head + "".join(sources)
    n = len(sources)
    return head + "\n".join(f"// ==== translation unit {i + 1} of {n} ====\n{s}"
                             for i, s in enumerate(sources))
