"""What this machine's sysfs says of its data caches, its memory, and the CPU feature
flags the printers choose by, read once per process."""
from __future__ import annotations

import functools
import os
from pathlib import Path

import sympy
import torch

from brrr_compiler.scalar_ops import EXACT

GIB, MIB = 1 << 30, 1 << 20


@functools.cache
def cache_sizes() -> tuple[int, int]:
    """(L2 per core, last-level cache) bytes from sysfs; 1 MiB and 32 MiB if unknown. A VM
    reads its chip's whole LLC (480 MB on a 2-vCPU Xeon), not the share it gets:
    calibration measures that share for the cost model (calibration.py `_llc_share`)."""
    sizes = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        mult = {"K": 1 << 10, "M": MIB, "G": GIB}.get(text[-1], 1)
        try:
            sizes[level] = int(text.rstrip("KMG")) * mult
        except ValueError:
            continue
    return sizes.get(2, MIB), sizes.get(max(sizes) if sizes else 3, 32 * MIB)


@functools.cache
def memory_bytes() -> int:
    """The machine's physical memory (64 GiB where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return 64 * GIB


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The first processor's feature flags as /proc/cpuinfo names them (none where it
    does not exist)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":")[0].strip() == "flags":
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def rounds_bfloat16() -> bool:
    """Whether the CPU rounds 16 floats to bfloat16 in one instruction (AVX512-BF16's
    vcvtneps2bf16, with AVX512-DQ's vfpclassps to find subnormals): the C++ printers then
    stage contiguous bfloat16 stores through the prelude's brrr_bf16_store
    (codegen/cpp_half.py)."""
    return {"avx512_bf16", "avx512dq"} <= cpu_flags()


def staged_store_types() -> frozenset:
    """The 16-bit float types whose stores, contiguous along a pointwise loop or a row
    walk, the C++ printers stage into a local float array and convert after it with the
    target's instructions (codegen/cpp_half.py, codegen/cpp_staging.py): float16
    everywhere (F16C or AVX-512; the prelude's integer code where neither), bfloat16
    where rounds_bfloat16(). The cost model counts the same (cost/conversions.py)."""
    return frozenset({torch.float16, torch.bfloat16} if rounds_bfloat16() else {torch.float16})


BF16_MIN_RUN = 16      # vcvtneps2bf16 rounds 16 values: a shorter loop only pays the staging


def stages_store(store, body: list, extent=None) -> bool:
    """Whether the C++ printers stage `store` (a kernel IR store statement of `body`,
    contiguous along its loop of length `extent`: a number or sympy expression, None or
    symbolic where unknown) and convert
    it after the loop: a float16 store always; a bfloat16 one where rounds_bfloat16(),
    its value a rounding cast made in `body` (a loaded or already exact value stores its
    bits with one shift: staging a circular pad's copies made it 5x slower) and the loop
    at least BF16_MIN_RUN long where its length is known."""
    if store.dtype not in staged_store_types():
        return False
    if store.dtype is torch.float16:
        return True
    made = {s.out: s for s in body if s.out is not None}.get(store.args[0])
    n = sympy.sympify(extent) if extent is not None else None
    return (made is not None and made.op == "cast" and made.dtype is torch.bfloat16
            and made.value != EXACT and (n is None or not n.is_Integer or n >= BF16_MIN_RUN))


def converts_in_chunks(access, body: list, extent=None) -> bool:
    """Whether the C++ printers convert the half-precision load or store `access` through
    a chunk array with the target's instructions: every float16 load, the stores
    stages_store takes (the same arguments)."""
    return access.dtype is torch.float16 if access.op == "load" else \
        stages_store(access, body, extent)
