"""A column walk's strided loads (and contiguous float16 ones, converted), copied per
streamed row into a local array of the tile before its `omp simd` loop
(CppSchedule.column_stage, schedule/columns.py).

Note on why. A load that steps along the tile's columns by other than one element (a
step-sliced or transposed input) has no vector load: gcc 12 builds each vector from
permutes of several loads (a stride of 2), from a gather (floats at a transpose's
stride) or from one insert per element (float16, bfloat16 and bytes at such a stride),
and in a loop that also converts halves and folds, the permuted vectors spilled.
Generated pattern 22 at the LLC size: an amax over dim 1 of (32, 31, 32, 64) float16
reading a step-2 input took 1.36 ms where the same kernel with that input contiguous
took 0.18 ms, and an amax over dim 0 reading a transposed float16 input 3.3 ms where
0.54. A plain loop that only copies the row's piece of such an input into a tile array
of its own type (kept as bits: the walk converts them as it converts any load) costs
one L1-resident pass; the walk then reads the array at unit stride: those two 0.68 and
0.89 ms. Floats gain as much: `(x - y.mT).amax(0)` over (32, 31, 32, 64) float32 2.27
-> 0.37 ms (eager 0.6-1.0), `(x * m.mT).mean(0)` with a bool mask 2.0 -> 0.19 ms, and
a step-2 float input 112 -> 84 us. With a tile of several short rows
(CppSchedule.column_rows) the copy runs along whichever of the two tiled dims the load
steps along by less, so that it reads the source in order; a load the same for each
row of the block is copied once, one row's worth.

A float16 load contiguous along the columns is staged too, converted as it is copied by
the prelude's brrr_f16_load (AVX-512 or F16C's vcvtph2ps, as pointwise loops convert),
where the walk converted it with integer code: about 10 vector ops per 16 values, and
gcc sizes a loop holding 16-bit loads at 32 lanes, so a tile narrower than that (24
columns) ran scalar. Kernels alone: `x.sum(1)` over (256, 64, 24) float16 47-49 -> 8.3-8.5
us (float32 5-6), `x.sum(0)` over (8192, 1024) 400 -> 260-320 us.
"""
from __future__ import annotations

import dataclasses

import sympy
import torch

from brrr_compiler.codegen.cpp_types import STORAGE
from brrr_compiler.kernel_ir import Stmt
from brrr_compiler.transforms.loops import linear_coeff

AT = sympy.Symbol("b", integer=True)      # the tile loop's position, printed as is
ALONG = sympy.Symbol("b2", integer=True)  # ... along a short row of a block of them


def staged_loads(body: list[Stmt], names: frozenset) -> list[Stmt]:
    """The loads of `body` the schedule stages, one per (buffer, index)."""
    seen, out = set(), []
    for s in body:
        if s.op == "load" and s.out in names and (s.buffer, s.index) not in seen:
            seen.add((s.buffer, s.index))
            out.append(s)
    return out


def restaged(body: list[Stmt], loads: list[Stmt], k, rows: int) -> list[Stmt]:
    """`body` with each staged load reading its tile array at the tile position (at the
    position along the row, for a load the same for each row of a block); a converted
    one reads floats."""
    arrays = {(s.buffer, s.index): (f"sd_{s.out}", ALONG if _row_invariant(s, k, rows) else AT,
                                    torch.float32 if converted(s, k) else s.dtype)
              for s in loads}
    out = []
    for s in body:
        if s.op == "load" and (s.buffer, s.index) in arrays:
            name, at, dtype = arrays[(s.buffer, s.index)]
            s = dataclasses.replace(s, buffer=name, index=at, dtype=dtype)
        out.append(s)
    return out


def converted(s: Stmt, k) -> bool:
    """Whether staged `s` is a float16 load contiguous along the columns, converted by
    the target's instructions as it is copied (brrr_f16_load; the module note)."""
    return s.dtype is torch.float16 and linear_coeff(s.index, k.loop_vars[-1], k.all_vars()) == 1


def _row_invariant(s: Stmt, k, rows: int) -> bool:
    """Whether, in a tile of `rows` short rows, `s` reads the same values in every row."""
    return rows > 1 and linear_coeff(s.index, k.loop_vars[-2], k.all_vars()) == 0


def declarations(loads: list[Stmt], k, tile: int, indent: str) -> list[str]:
    return [f"{indent}{'float' if converted(s, k) else STORAGE[s.dtype]} sd_{s.out}[{tile}];"
            for s in loads]


def _conversion(s: Stmt, k, rows: int, width: int, cexpr, indent: str) -> list[str]:
    """brrr_f16_load of a converted load's piece of one streamed row."""
    inner, allv = k.loop_vars[-1], k.all_vars()
    lo, lo1 = sympy.Symbol("lo", integer=True), sympy.Symbol("lo1", integer=True)
    if rows == 1:
        start = cexpr(s.index.xreplace({inner: lo}))
        return [f"{indent}brrr_f16_load(sd_{s.out}, &{s.buffer}[{start}], bn);"]
    sec = k.loop_vars[-2]
    across = linear_coeff(s.index, sec, allv)
    if across == 0 or across == width:        # one row's worth, or the block in one piece
        start = cexpr(s.index.xreplace({inner: 0, sec: lo1}))
        return [f"{indent}brrr_f16_load(sd_{s.out}, &{s.buffer}[{start}], "
                f"{width if across == 0 else 'bn'});"]
    start = cexpr(s.index.xreplace({inner: 0}))
    return [f"{indent}for (int64_t b1 = 0; b1 < bn1; ++b1) {{",
            f"{indent}  const int64_t {sec} = lo1 + b1;",
            f"{indent}  brrr_f16_load(sd_{s.out} + b1 * {width}, &{s.buffer}[{start}], {width});",
            f"{indent}}}"]


def copies(loads: list[Stmt], k, rows: int, width: int, cexpr, indent: str) -> list[str]:
    """The copy loops of one streamed row: over the tile's `bn` columns, or with `rows`
    short rows of `width`, over both dims in the order the module note says."""
    inner = k.loop_vars[-1]
    lines = []
    for s in loads:
        src = f"{s.buffer}[{cexpr(s.index)}]"
        if converted(s, k):
            lines += _conversion(s, k, rows, width, cexpr, indent)
            continue
        if rows == 1:
            lines += [f"{indent}for (int64_t b = 0; b < bn; ++b) {{",
                      f"{indent}  const int64_t {inner} = lo + b;",
                      f"{indent}  sd_{s.out}[b] = {src};", f"{indent}}}"]
            continue
        if _row_invariant(s, k, rows):       # one row's worth serves the block
            lines += [f"{indent}for (int64_t b2 = 0; b2 < {width}; ++b2) {{",
                      f"{indent}  const int64_t {inner} = b2;",
                      f"{indent}  sd_{s.out}[b2] = {src};", f"{indent}}}"]
            continue
        sec, allv = k.loop_vars[-2], k.all_vars()
        along, across = linear_coeff(s.index, inner, allv), linear_coeff(s.index, sec, allv)
        rows_inner = _ints(along, across) and abs(int(across)) < abs(int(along))
        outer_loop = (f"for (int64_t b2 = 0; b2 < {width}; ++b2) {{", f"const int64_t {inner} = b2;")
        inner_loop = ("for (int64_t b1 = 0; b1 < bn1; ++b1) {", f"const int64_t {sec} = lo1 + b1;")
        first, second = (outer_loop, inner_loop) if rows_inner else (inner_loop, outer_loop)
        lines += [f"{indent}{first[0]}", f"{indent}  {first[1]}",
                  f"{indent}  {second[0]}", f"{indent}    {second[1]}",
                  f"{indent}    sd_{s.out}[b1 * {width} + b2] = {src};",
                  f"{indent}  }}", f"{indent}}}"]
    return lines


def _ints(*coeffs) -> bool:
    return all(c is not None and sympy.sympify(c).is_Integer for c in coeffs)
