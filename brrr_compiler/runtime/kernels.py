"""Build a graph's kernels into shared libraries, falling back per kernel on failure.

A graph's kernels go into one translation unit, or, when there is enough code and more
than one core, into several built side by side (codegen/cpp_units.py's note). If a unit
fails to build, each of its kernels is built alone to find the culprits; their groups
run through ATen instead, with one warning. Without a working C++ compiler every group
runs through ATen.

Note on UNIT_MIN_LINES. Measured with gcc 12 -O3 on this project's 2-vCPU machine (two
SMT siblings), wall time of two units built side by side over one unit: the model zoo's
ten training graphs (420 to 1460 lines of kernels), 0.57-0.84x; two kernels of 60 lines
each, 0.8x; two of 10 lines, 1.2x (compiler start-up and the prelude cost about 50 ms a
unit). So a unit needs about 60 lines of kernels to pay for itself.
"""
from __future__ import annotations

import ctypes
import os
from concurrent.futures import ThreadPoolExecutor

from brrr_compiler.codegen import cpp
from brrr_compiler.codegen.cpp_units import translation_units
from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.log import logger, warn_once
from brrr_compiler.runtime.build import BuildError, build_and_load, find_toolchain
from brrr_compiler.runtime.runner import CompiledKernel, bind

UNIT_MIN_LINES = 60     # lines of kernel source a unit needs to be worth its own process


def _compiled(kernel: Kernel, lib, group_id: int, out_specs) -> CompiledKernel:
    fn = bind(lib, kernel.name, len(kernel.buffers), len(kernel.size_vars))
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
    if find_toolchain(cfg.cxx, cfg.cache_dir) is None:
        warn_once("no-compiler", "brrr: no working C++ compiler found (set CXX or BRRR_CXX); "
                                 "all fused groups run through ATen instead")
        return {}, ""
    units = translation_units(list(kernels.values()), num_threads, printed, _cores(),
                              UNIT_MIN_LINES)
    with ThreadPoolExecutor(len(units), thread_name_prefix="brrr-build") as pool:
        libs = list(pool.map(lambda unit: _try_build(unit[1], cfg), units))
    group_of = {k.name: gid for gid, k in kernels.items()}
    compiled = {}
    for (members, source), lib in zip(units, libs):
        for k in members:
            gid = group_of[k.name]
            if lib is not None:
                compiled[gid] = _compiled(k, lib, gid, out_specs[gid])
            else:
                compiled.update(_build_alone(k, gid, out_specs[gid], cfg, num_threads, printed))
    return compiled, _joined([source for _, source in units])


def _try_build(source: str, cfg):
    """The loaded library of one translation unit, or None when it fails to build."""
    try:
        return build_and_load(source, cfg.cache_dir, cfg.cxx)
    except (BuildError, OSError) as err:
        logger.debug("translation unit failed to build: %s", err)
        return None


def _build_alone(k: Kernel, gid: int, out_specs, cfg, num_threads: int, printed) -> dict:
    """{gid: CompiledKernel} for `k` built in a unit of its own; {} (and one warning)
    when it fails to build there too."""
    try:
        lib = build_and_load(cpp.translation_unit([k], num_threads, printed), cfg.cache_dir,
                             cfg.cxx)
        return {gid: _compiled(k, lib, gid, out_specs)}
    except (BuildError, OSError) as err:
        warn_once(f"build-{k.name}-{hash(str(k))}",
                  f"brrr: kernel {k.name} failed to build; its ops run through ATen "
                  f"instead ({str(err).splitlines()[0]})")
        return {}


def _cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def _joined(sources: list[str]) -> str:
    if len(sources) == 1:
        return sources[0]
    n = len(sources)
    return "\n".join(f"// ==== translation unit {i + 1} of {n} ====\n{s}"
                     for i, s in enumerate(sources))
