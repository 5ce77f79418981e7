"""Byte-wide loads of a reduction chunk, staged as 32- or 64-bit lanes before its `omp simd`
loop, and its bool stores, gathered in such lanes and copied out after it.

Note on why. gcc sizes the vectors of an `omp simd reduction(...)` loop by the narrowest
type in it: a bool or uint8 load (a mask) makes them 64 lanes wide on AVX-512, so each
float partial lives in a 64-lane array that gcc folds after the loop. A max folds as a
tree, but a float sum may not be reassociated there: gcc adds the 64 lanes one at a time,
in order, 64 dependent scalar adds per chunk. A masked softmax row of a few hundred
elements spends more in that fold than in its own arithmetic. Copying the chunk's byte
values into a local int32 array first (a plain loop that vectorizes: widening loads and
stores, L1-resident) and reading that array in the reduction loop keeps every vector of
the loop at 16 float lanes, as in the same loop without its mask. The copy costs a pass
per chunk that the fold it saves outweighs only in short rows: loops folding a float
sum or product over rows of at most STAGE_MAX_ROW elements (a static extent) are staged
(the schedule names those phases: CppSchedule.staged, schedule/rows.py);
longer rows, and loops folding only maxes, mins or integers, keep their byte loads
(benchmarks/results/masks.md has the measurements), except loops that call libm.

A libm call in a loop of 64 byte lanes has no vector clone that wide (cpp_prelude.h
declares clones up to the target's float or double width), so gcc called the scalar
function lane by lane: generated pattern seed 14 at the L2 size, a masked softmax's max
walk over float64 rows that also computed exp, two log1p and an erf, took 3.9 ms, 1.4 ms
staged. Those loops are staged at any row length. Lanes are 64-bit where the loop
computes in double (16 int32 lanes against 8 double lanes left the exp of the sum walk
on scalar calls) and 32-bit otherwise; the schedule records the width per phase.

A pointwise loop has no sums to fold, but the same vector sizing hurts it where its row
is short: with bytes in it gcc wants 32 (AVX2) or 64 (AVX-512) iterations per vector, a
row of 31 has fewer, and gcc fell back to 4 float lanes, each libm call through its
4-lane clone. Such loops (a static row under 64 with a transcendental: schedule/cpp.py
`short_row_masks`) stage their bytes the same way (`staged_row`).

Only loads of 1-byte types whose index uses no value loaded in the loop (a gather's
index) are staged; the values are the same (a bool reads back as `!= 0`, an int8 keeps
its value in int32), so the printed body only reads another array.

A bool the loop stores (a comparison saved for the backward, a mask output) is a byte
too: a mean over rows of 100 that also stored `x * 2 <= 0.5` ran 3.3x slower than
staged, its sum no better than a sequential one (gcc's vector loop took the first 64
elements in 64 lanes, the other 36 in a scalar loop, then folded the lanes in order:
fuzz seed 162962, a mean three ulps off). Such stores, where the loop does not read the
buffer back, write 0 or 1 into a local integer array instead, copied to the buffer as
bytes after the loop; the phases staged are the same.

float16 and bfloat16 loads are 16-bit lanes: 32 of them on AVX-512, folded in order
after each chunk as the bytes were. The same phases convert them into a local float
array first (brrr_f16_to_f32 / brrr_bf16_to_f32 in a plain loop): one thread, layer_norm
over (8192, 100) float16 505 -> 412 us, over (8192, 200) bfloat16 720 -> 636, sum over
(16384, 64) float16 265 -> 210, `x.abs().log1p().sum(-1)` over (1024, 1024) bfloat16
(a libm walk: staged at any row length) 466 -> 387 (benchmarks/results/notes.md).
A float16 row read at unit stride converts with the prelude's brrr_f16_load (AVX-512 or
F16C's vcvtph2ps, as pointwise loops do) instead of the integer conversion, 2 threads,
kernels alone: sum over (16384, 64) 183 -> 111 us, var_mean over (2048, 256) 78 -> 36,
layer_norm over (8192, 100) 265 -> 232, softmax over (4096, 200) 521 -> 506.
Where the CPU rounds bfloat16 in one instruction, a row's bfloat16 stores stage the same
way (brrr_bf16_store, codegen/cpp_half.py's note), but a walk that neither folds nor
calls libm keeps its bfloat16 loads' shift in the loop: staging them too cost layer_norm
over (2000, 1000) bfloat16 509 -> 554-584 us, the stores alone 358 -> 322 kernel alone.

A float load that steps along the row by more than one element (a transposed or
step-sliced input) kept gcc 12 from vectorizing a walk that called libm at all (a double
walk over rows of 17 with exp, two log1p and an erf, one input read at stride 16): each
element then called the 8-lane libm kernels one lane at a time, 62 us for 2176 values
(generated pattern seed 14 at the L1 size). In a staged phase those loads are copied
into a local array of their own type first (a walk that calls libm with such a load is
staged for it alone): 12.5 us. The copy keeps values as they are.
"""
from __future__ import annotations

import dataclasses

import sympy
import torch

from brrr_compiler.codegen.cpp_half import STORE_HELPER, rounded_only_for
from brrr_compiler.codegen.cpp_types import CTYPE
from brrr_compiler.kernel_ir import Stmt
from brrr_compiler.scalar_ops import EXACT
from brrr_compiler.schedule.rows import (bool_stores, byte_loads, calls_libm, half_loads,
                                         half_stores, strided_loads)
from brrr_compiler.transforms.loops import linear_coeff


def stage(body: list[Stmt], inner: str, lo: str, hi: str, chunk: int, cexpr,
          indent: str, bits: int) -> tuple[list[str], list[Stmt], list[str]]:
    """Lines that copy each byte load of `body` over [lo, hi) of `inner` (at most
    `chunk` values) into a local array of `bits`-wide integers (the schedule's lane
    width, CppSchedule.staged) and each half load into a float array, `body` reading
    those arrays instead and storing its bools into integer arrays, and the lines after
    the loop that copy those to their buffers."""
    loads: dict = {}
    for s in byte_loads(body):
        loads.setdefault((s.buffer, s.index), f"st_{s.out}")
    halves = {(s.buffer, s.index): (f"sh_{s.out}", s.dtype) for s in _float_copies(body)}
    strided = {} if isinstance(inner, str) else \
        {(s.buffer, s.index): (f"sd_{s.out}", s.dtype) for s in strided_loads(body, inner)}
    stores = {(s.buffer, s.index): f"ss_{s.args[0]}" for s in bool_stores(body)}
    staged = [] if isinstance(inner, str) else half_stores(body, inner)
    hstores = {(s.buffer, s.index): f"hs_{s.args[0]}" for s in staged}
    helpers = {(s.buffer, s.index): STORE_HELPER[s.dtype] for s in staged}
    if not loads and not stores and not halves and not strided and not hstores:
        return [], body, []
    lane = {32: torch.int32, 64: torch.int64}[bits]

    def copy(dst: str, src: str) -> list[str]:
        return [f"{indent}#pragma omp simd",
                f"{indent}for (int64_t {inner} = st_lo; {inner} < {hi}; ++{inner}) {dst} = {src};"]

    at = f"[{inner} - st_lo]"
    lines = [f"{indent}const int64_t st_lo = {lo};"]
    for (buffer, index), name in loads.items():
        lines += [f"{indent}int{bits}_t {name}[{chunk}];"] + copy(name + at, f"{buffer}[{cexpr(index)}]")
    for (buffer, index), (name, dtype) in halves.items():
        convert = "brrr_f16_to_f32" if dtype is torch.float16 else "brrr_bf16_to_f32"
        lines.append(f"{indent}float {name}[{chunk}];")
        if _unit_stride(index, inner):       # F16C, or bfloat16's shift in vectors: the note
            helper = "brrr_f16_load" if dtype is torch.float16 else "brrr_bf16_load"
            lines.append(f"{indent}{helper}({name}, &{buffer}[{_start(index, inner, cexpr)}], "
                         f"{hi} - st_lo);")
        else:
            lines += copy(name + at, f"{convert}({buffer}[{cexpr(index)}])")
    for (buffer, index), (name, dtype) in strided.items():
        lines += [f"{indent}{CTYPE[dtype]} {name}[{chunk}];"] + \
            copy(name + at, f"{buffer}[{cexpr(index)}]")
    halves.update(strided)         # read back as arrays of their own type
    lines += [f"{indent}int{bits}_t {name}[{chunk}];" for name in dict.fromkeys(stores.values())]
    after = [ln for (buffer, index), name in stores.items()
             for ln in copy(f"{buffer}[{cexpr(index)}]", f"(uint8_t){name}{at}")]
    lines += [f"{indent}float {name}[{chunk}];" for name in dict.fromkeys(hstores.values())]
    after += [f"{indent}{helpers[key]}(&{key[0]}[{_start(key[1], inner, cexpr)}], {name}, "
              f"{hi} - st_lo);" for key, name in hstores.items()]   # F16C: the note
    stores.update(hstores)
    position = sympy.Symbol(f"{inner} - st_lo", integer=True)     # printed as is
    exact = rounded_only_for(body, [s for s in body if s.op == "store"
                                    and (s.buffer, s.index) in hstores])
    body = [dataclasses.replace(s, value=EXACT) if s.out in exact else s for s in body]
    return lines, [_restaged(s, loads, halves, stores, position, lane) for s in body], after


def staged_row(body: list[Stmt], inner, lo: str, hi: str, extent: int, line, cexpr,
               indent: str, bits: int) -> list[str]:
    """A pointwise kernel's inner loop over [lo, hi) of a short static row (`extent`
    values at most) with its masks staged as `bits`-wide lanes (schedule/cpp.py
    `short_row_masks`): the copies, the `omp simd` loop over the restaged body, the
    copies out, in a block of their own. `line(stmt)` prints one statement."""
    lines, body, after = stage(body, inner, lo, hi, extent, cexpr, indent + "  ", bits)
    loop = [f"{indent}  #pragma omp simd",
            f"{indent}  for (int64_t {inner} = {lo}; {inner} < {hi}; ++{inner}) {{"]
    loop += [f"{indent}    {line(s)}" for s in body] + [f"{indent}  }}"]
    return [f"{indent}{{"] + lines + loop + after + [f"{indent}}}"]


def _float_copies(body: list[Stmt]) -> list[Stmt]:
    """The half loads `body` reads from float arrays: all float16 ones (F16C), bfloat16
    ones where the walk folds or calls libm (the note); a walk staged only for its
    bfloat16 stores (codegen/cpp_half.py) keeps their shift in its loop."""
    keep = any(s.op == "reduce" for s in body) or \
        calls_libm(body, {s.out: s.dtype for s in body if s.out})
    return [s for s in half_loads(body) if s.dtype is torch.float16 or keep]


def _start(index, inner, cexpr) -> str:
    """`index` at the chunk's first element (st_lo), printed."""
    return cexpr(sympy.sympify(index).subs(inner, sympy.Symbol("st_lo", integer=True)))


def _unit_stride(index, inner) -> bool:
    """Whether `index` steps by one element along `inner` (a loop variable's symbol)."""
    return not isinstance(inner, str) and linear_coeff(index, inner, (inner,)) == 1


def _restaged(s: Stmt, loads: dict, halves: dict, stores: dict, at, lane: torch.dtype) -> Stmt:
    """`s` reading or writing its staged array, if it has one."""
    key = (s.buffer, s.index)
    if s.op == "load" and key in loads:
        return _read(s, loads[key], at, lane)
    if s.op == "load" and key in halves:
        dtype = s.dtype if s.dtype in (torch.float32, torch.float64) else torch.float32
        return dataclasses.replace(s, buffer=halves[key][0], index=at, dtype=dtype)
    if s.op == "store" and key in stores:
        return dataclasses.replace(s, buffer=stores[key], index=at,
                                   dtype=torch.float32 if s.dtype is torch.float16 else lane)
    return s


def _read(load: Stmt, array: str, at, lane: torch.dtype) -> Stmt:
    """`load` from the staged array. An int8/uint8 value is held as the `lane` integer it
    was staged as (a const int8_t copy would bring byte vectors back); every statement
    reading it assigns its result to its own C type, so values are unchanged."""
    dtype = load.dtype if load.dtype is torch.bool else lane
    return dataclasses.replace(load, buffer=array, index=at, dtype=dtype)
