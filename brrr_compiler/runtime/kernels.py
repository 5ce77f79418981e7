"""Build a graph's kernels into one shared library, falling back per kernel on failure.

The whole graph is one translation unit. If it fails to build, each kernel is built
alone to find the culprits; their groups run through ATen instead, with one warning.
Without a working C++ compiler every group runs through ATen.
"""
from __future__ import annotations

import ctypes

from brrr_compiler.codegen import cpp
from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.log import logger, warn_once
from brrr_compiler.runtime.build import BuildError, build_and_load, find_toolchain
from brrr_compiler.runtime.runner import CompiledKernel, bind


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
    """Returns ({group_id: CompiledKernel}, source of the translation unit). `printed`:
    kernels' sources by name, already printed for `num_threads` (the rest are printed here)."""
    if not kernels:
        return {}, ""
    if find_toolchain(cfg.cxx, cfg.cache_dir) is None:
        warn_once("no-compiler", "brrr: no working C++ compiler found (set CXX or BRRR_CXX); "
                                 "all fused groups run through ATen instead")
        return {}, ""
    source = cpp.translation_unit(list(kernels.values()), num_threads, printed)
    try:
        lib = build_and_load(source, cfg.cache_dir, cfg.cxx)
        return {gid: _compiled(k, lib, gid, out_specs[gid]) for gid, k in kernels.items()}, source
    except (BuildError, OSError) as err:
        logger.debug("translation unit failed to build: %s", err)
    compiled = {}
    for gid, k in kernels.items():
        try:
            unit = cpp.translation_unit([k], num_threads, printed)
            lib = build_and_load(unit, cfg.cache_dir, cfg.cxx)
            compiled[gid] = _compiled(k, lib, gid, out_specs[gid])
        except (BuildError, OSError) as err:
            warn_once(f"build-{k.name}-{hash(str(k))}",
                      f"brrr: kernel {k.name} failed to build; its ops run through ATen "
                      f"instead ({str(err).splitlines()[0]})")
    return compiled, source
