"""A walk over a whole row of static length: constant bounds, and a scalar tail of its own.

Note. A row walk runs in segments of at most a chunk (cpp_reduce.segments), bounds
computed per segment. A row of static length E no longer than a chunk is one segment,
so it is printed as one: bounds 0 and E, which gcc folds. And where E is not a multiple
of the vector (rows of 50, 100, 197 floats), gcc's `omp simd` reduction ends in a scalar
epilogue that merges its elements into the vector partial through the stack: a 4-byte
store into the spilled vector and a 64-byte load of it, which store forwarding cannot
serve (perf over a softmax over rows of 50: the loads after those stores held a fifth of
the kernel's samples, and the sum fold after its lane remainder another eighth). So a
walk that folds a max or min, or sums in a block of lanes (cpp_sum_lanes.py), walks the
first E - E % U elements (U: one vector of the walk's narrowest values, or its block)
and the last E % U in a plain loop into partials of their own (t_*, tn_*, ti_*), folded
into the row's totals after the vector part's: no store meets a wider load. A walk of
plain simd sums keeps gcc's epilogue, which merged its remainder without the stall and
ran faster than a scalar tail (var_mean over rows of 100: 221 against 265 us), and so
does a row of 512 or more (schedule/sum_lanes.py: its block of lanes is four vectors,
and the lanes walk runs its partial block vectorized): there a scalar tail cost more
than the stall (bfloat16 amax over rows of 1000, a block's 40 values: 225 -> 320 us; over
rows of 3000, a vector's 24: 175 -> 185).
benchmarks/results/notes.md, "Static short rows", has the measurements.
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.codegen.cpp_accumulators import ARG_FOLDS
from brrr_compiler.schedule.sum_lanes import MIN_ROW

VECTOR_BYTES = 64          # the widest vector gcc is given (AVX-512; a multiple of AVX2's)


def whole_row(printer, phase, reds, chunk: int, lo: str, hi: str, flat: bool) -> int | None:
    """E, where `phase`'s walk over [lo, hi) is one static row of E <= `chunk` elements
    that this module may print (the module note); else None."""
    rv, extent = printer.k.reduction_vars, sympy.sympify(printer.row_extent)
    if flat or len(rv) != 1 or (lo, hi) != ("0", "n_red") or not extent.is_Integer:
        return None
    if int(extent) > chunk or printer.staged_bits(phase) or any(
            r.value in ARG_FOLDS for r in reds):
        return None
    if not reds and printer.stream & {s.buffer for s in phase.body if s.op == "store"}:
        return None           # streamed stores: cpp_stream.chunked_loop's own loop
    return int(extent)


def vector_part(phase, reds, extent: int, lanes: int | None) -> int:
    """How many of the row's first elements the vector loop takes (the module note)."""
    if not reds or not (lanes or any(r.value in ("max", "min") for r in reds)):
        return extent          # gcc's epilogue of a plain simd sum measured faster
    if lanes and extent >= MIN_ROW:
        return extent          # a long row's block of four vectors (the module note)
    unit = lanes or VECTOR_BYTES // min([_width(s) for s in phase.body
                                         if s.dtype is not None] + [4])
    return extent - extent % unit


def _width(s) -> int:
    """Bytes a statement's value takes in gcc's vectors: a comparison's bool is a mask at
    the width of what it compares (a masked softmax over rows of 32 floats counted its
    `x > 0.3` as 1-byte values, a unit of 64, and walked every row in the scalar tail:
    2.2x slower); a bool loaded or stored is a byte."""
    if s.dtype is torch.bool and s.op not in ("load", "store"):
        return 4
    return s.dtype.itemsize


def whole_row_walk(printer, phase, reds, indent: str, extent: int, prefetch: bool) -> list[str]:
    """The walk: the vector part as a segment with constant bounds (cpp_reduce.chunk,
    folded into acc_*), then the tail into t_* and those into acc_*."""
    rv, lanes = printer.k.reduction_vars, printer.in_lanes(phase)
    inner, m = rv[0], "m0"
    main = vector_part(phase, reds, extent, lanes)
    body = indent + "  "
    lines = [f"{indent}{{   // the whole row, {extent} elements (cpp_static_row.py)",
             f"{body}const int64_t cb = 0, ro = 0, ce = {main};"]
    for r in reds if not lanes else ():          # a block of lanes declares its own
        lines += printer.acc.decls(r, body, "c_", "cn_", "ci_", lanes=True)
    if prefetch:
        lines += printer.prefetch.segment(phase, body, "0", str(extent))
    lines += printer.chunk(phase, reds, body, inner, m) if main else []
    if main < extent:
        for r in reds:
            lines += printer.acc.decls(r, body, "t_", "tn_", "ti_", lanes=True)
        lines.append(f"{body}for (int64_t {inner} = {main}; {inner} < {extent}; ++{inner}) {{")
        lines += printer.body_lines(phase.body, body + "  ", True, part="t")
        lines.append(f"{body}}}")
        for r in reds:
            lines += printer.acc.combine(r, body, "t_", "tn_", "ti_")
    return lines + [f"{indent}}}"]
