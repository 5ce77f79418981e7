"""Which float16 loads, stores and rounding casts a kernel converts with the target's
instructions, as the printer prints the (kernel, schedule) pair: those cost
HARDWARE_COST each, the others the prelude's integer conversions
(scalar_ops.CONVERSION_COST).

The printers convert float16 with vcvtph2ps / vcvtps2ph (AVX-512 or F16C, through the
prelude's brrr_f16_load and brrr_f16_store) a chunk at a time, into and out of a local
float array, where the access steps by one element along the loop that walks it:
pointwise loops along their innermost variable (codegen/cpp_half.py; not those
streaming their stores or prefetching gathered rows), row walks of the
phases the schedule stages (CppSchedule.staged) along the innermost reduced variable
(codegen/cpp_staging.py), and column walks' loads the schedule stages
(CppSchedule.column_stage) along the columns (codegen/cpp_column_stage.py), and flat
tiles (CppSchedule.flat_tile) along the tile, their transposed loads from the tile
arrays (codegen/cpp_tiled.py). A rounding
cast whose only readers are such stores prints no rounding of its own (the store's
conversion rounds). bfloat16 stores (and the casts only they read) count the same where
the CPU rounds bfloat16 in one instruction (machine.stages_store): the printers
stage them too. Triton converts every float16 access in hardware.
"""
from __future__ import annotations

import torch

from brrr_compiler.kernel_ir import Kernel, Phase
from brrr_compiler.machine import converts_in_chunks, staged_store_types
from brrr_compiler.schedule_ir import TritonSchedule

HARDWARE_COST = 0.5      # a 16-lane conversion and the chunk array's store and load, per value


def hardware_converted(kernel: Kernel, schedule, index: int, phase: Phase) -> set[str]:
    """The statements of `kernel`'s phase `index` (as `key` gives them) whose float16
    conversion is the target's instruction (module note)."""
    if isinstance(schedule, TritonSchedule):
        return {key(s) for s in phase.body if s.dtype is torch.float16
                and s.op in ("load", "store", "cast")}
    var = _walked(kernel, schedule, index, phase)
    if var is None:
        return set()
    kind = getattr(schedule, "kind", None)
    ops = ("load",) if kind == "columns" else ("load", "store")
    extent = kernel.ranges[-1] if kind == "pointwise" and kernel.ranges else None
    tiles = set()      # a flat tile's transposed loads read its tile array along the loop
    if kind == "tiled":
        extent = schedule.tile[0] * schedule.flat_tile
        tiles = {key(s) for s in phase.body if s.op == "load"
                 and (s.buffer, str(s.index)) in schedule.tile_loads}
    picked = [s for s in phase.body if s.op in ops and (_unit(s.index, var) or key(s) in tiles)
              and converts_in_chunks(s, phase.body, extent)
              and (kind != "columns" or s.out in schedule.column_stage)]
    keys = {key(s) for s in picked}
    stores = {s.args[0] for s in picked if s.op == "store"}
    readers: dict[str, set] = {}
    for s in phase.body:
        for a in s.args:
            readers.setdefault(a, set()).add(key(s))
    keys |= {key(s) for s in phase.body if s.op == "cast" and s.dtype in staged_store_types()
             and s.out in stores and readers.get(s.out, set()) <= keys}
    return keys


def _walked(kernel: Kernel, schedule, index: int, phase: Phase):
    """The loop variable along which `phase`'s accesses are converted a chunk at a
    time, if any."""
    kind = getattr(schedule, "kind", None)
    if kind == "pointwise" and kernel.loop_vars and not schedule.stream \
            and not schedule.gather_rows:          # those print chunked_loop's loads
        return kernel.loop_vars[-1]
    if kind == "rows" and kernel.reduction_vars and index in dict(schedule.staged):
        return kernel.reduction_vars[-1]
    if kind == "columns" and kernel.loop_vars and phase.loop:
        return kernel.loop_vars[-1]
    if kind == "tiled" and schedule.flat_tile and not schedule.stream:   # cpp_tiled.py
        return kernel.loop_vars[-1]
    return None


def _unit(index, var) -> bool:
    return index is not None and index.expand().coeff(var) == 1 and \
        var not in (index.expand() - var).free_symbols


def key(s) -> tuple:
    return (s.op, s.out, s.buffer, str(s.index))
