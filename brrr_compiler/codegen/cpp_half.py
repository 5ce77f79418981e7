"""float16 loads and stores of pointwise loops through the target's conversion instructions.

Note on why. gcc 12 vectorizes no conversion between _Float16 and float, so the prelude
converts float16 bits with integer and float arithmetic (cpp_prelude_lowp.h): about 10
vector operations per 16 values to load, and a rounding plus 7 more to store, where
F16C's vcvtph2ps and vcvtps2ph take one each. A bare float32 -> float16 cast over 1M
values ran 4.3x eager's time, and a float16 -> float32 cast 2x (eager converts with
those instructions).

A pointwise loop whose float16 loads or stores step by one along its innermost variable
runs in chunks of CHUNK values: before each chunk's `omp simd` loop, `brrr_f16_load`
(the prelude) converts each such load's values into a local float array, which the loop
reads; the loop writes each such store's floats into a local array, which
`brrr_f16_store` converts after it. Both use AVX-512 or F16C where the target has them
(the prelude's integer conversions otherwise), and round to nearest even, as eager and
the prelude's `brrr_round_f16` do; a cast to float16 whose only reader is such a store
is therefore printed without its own rounding (its statement is marked exact). Loads at
a computed index (a gather), and buffers the loop both reads and writes, keep the
prelude's conversions. The arrays stay in L1 (1 KB each).

bfloat16 stores take the same path where the CPU has AVX512-BF16
(machine.stages_store): `brrr_bf16_store` rounds with vcvtneps2bf16, one
instruction for 16 values where the prelude's integer rounding takes 7 vector ops, and
loops bound by their vector ALUs paid for those: silu over 2M bfloat16 values 609 -> 494
us kernel alone, hardswish 349 -> ~220 (benchmarks/results/notes.md, "bfloat16 stores
rounded by the CPU"); row walks stage theirs too (cpp_staging.py). Elsewhere the
integer rounding stays in the loop, where staging would only add the array's traffic.
bfloat16 loads are a shift either way and stay.
"""
from __future__ import annotations

import dataclasses

import sympy
import torch

from brrr_compiler.codegen.cpp_strided import strided_copies
from brrr_compiler.kernel_ir import Kernel, Stmt
from brrr_compiler.machine import converts_in_chunks, staged_store_types
from brrr_compiler.scalar_ops import EXACT
from brrr_compiler.transforms.loops import linear_coeff

CHUNK = 256
STORE_HELPER = {torch.float16: "brrr_f16_store", torch.bfloat16: "brrr_bf16_store"}


def staged_halves(k: Kernel, body: list[Stmt]) -> tuple[list[Stmt], list[Stmt]]:
    """(loads, stores) of `body` that go through the conversion helpers (the note)."""
    var, allv = k.loop_vars[-1], k.all_vars()
    computed = {s.out for s in body if s.out is not None}
    loaded = {s.buffer for s in body if s.op == "load"}
    stored = {s.buffer for s in body if s.op == "store"}

    extent = k.ranges[-1] if k.ranges else None

    def plain(s: Stmt) -> bool:
        return (converts_in_chunks(s, body, extent) and s.buffer not in loaded & stored
                and linear_coeff(s.index, var, allv) == 1
                and not {v.name for v in sympy.sympify(s.index).free_symbols} & computed)

    return ([s for s in body if s.op == "load" and plain(s)],
            [s for s in body if s.op == "store" and plain(s)])


def staged_loop(k: Kernel, body: list[Stmt], start: str, end: str, line, cexpr,
                indent: str, strided: frozenset = frozenset()) -> list[str]:
    """`for var in [start, end)` in chunks of CHUNK, float16 loads and stores converted
    around each chunk's loop (the note), the loads of `strided` copied before it
    (cpp_strided.py). `line(stmt)` prints one statement."""
    var = k.loop_vars[-1]
    loads, stores = staged_halves(k, body)
    copy = _conversion(k, body)
    if copy is not None and not strided:
        load, store = copy
        helper = STORE_HELPER.get(store.dtype, "brrr_f16_load")
        first = sympy.Symbol(start, integer=True)      # printed as is
        return [f"{indent}{helper}(&{store.buffer}[{cexpr(store.index.subs(var, first))}], "
                f"&{load.buffer}[{cexpr(load.index.subs(var, first))}], {end} - ({start}));"]
    c, at = sympy.Symbol("c0", integer=True), sympy.Symbol(f"{var} - c0", integer=True)
    arrays = {}
    for s in loads + stores:
        arrays.setdefault((s.op, s.buffer, s.index), f"h{s.op[0]}{len(arrays)}_{s.buffer}")
    out = [f"{indent}for (int64_t c0 = {start}; c0 < {end}; c0 += {CHUNK}) {{",
           f"{indent}  const int64_t c1 = brrr_min_i64(c0 + {CHUNK}, {end});"]
    for (op, buffer, index), name in arrays.items():
        out.append(f"{indent}  float {name}[{CHUNK}];")
        if op == "load":
            out.append(f"{indent}  brrr_f16_load({name}, &{buffer}[{cexpr(index.subs(var, c))}], "
                       "c1 - c0);")
    copies, read = strided_copies(body, strided, var, CHUNK, cexpr, indent + "  ")
    out += copies
    out += [f"{indent}  #pragma omp simd", f"{indent}  for (int64_t {var} = c0; {var} < c1; ++{var}) {{"]
    exact = rounded_only_for(body, stores)
    for s, copied in zip(body, read):
        if s in loads or s in stores:
            s = dataclasses.replace(s, dtype=torch.float32, index=at,
                                    buffer=arrays[(s.op, s.buffer, s.index)])
        elif s.out in exact:
            s = dataclasses.replace(copied, value=EXACT)
        else:
            s = copied
        out.append(f"{indent}    {line(s)}")
    out.append(f"{indent}  }}")
    helper = {(s.buffer, s.index): STORE_HELPER[s.dtype] for s in stores}
    out += [f"{indent}  {helper[buffer, index]}(&{buffer}[{cexpr(index.subs(var, c))}], {name}, "
            "c1 - c0);" for (op, buffer, index), name in arrays.items() if op == "store"]
    return out + [f"{indent}}}"]


def rounded_only_for(body: list[Stmt], stores: list[Stmt]) -> set[str]:
    """Casts to float16 or bfloat16 whose every reader is one of `stores`, of the same
    type (their conversion rounds)."""
    readers: dict[str, list[Stmt]] = {}
    for s in body:
        for a in s.args:
            readers.setdefault(a, []).append(s)
    return {s.out for s in body if s.op == "cast" and s.dtype in STORE_HELPER
            and readers.get(s.out)
            and all(r in stores and r.dtype is s.dtype for r in readers[s.out])}


def _conversion(k: Kernel, body: list[Stmt]):
    """(load, store) when `body` only converts one float32 load into a float16 store (or a
    bfloat16 one the CPU rounds: the note) or one float16 load into a float32 store, both
    contiguous along the inner loop (casts between them only to those two types: one
    rounding): the helper converts straight from the
    input to the output, with no local array between (staging a bare cast cost it about
    half again: its loop alternates short reads and writes)."""
    loads = [s for s in body if s.op == "load"]
    stores = [s for s in body if s.op == "store"]
    if len(loads) != 1 or len(stores) != 1 or any(s.op not in ("load", "store", "cast")
                                                  for s in body):
        return None
    half = stores[0].dtype if stores[0].dtype in staged_store_types() else torch.float16
    if {loads[0].dtype, stores[0].dtype} != {half, torch.float32} or \
            any(s.op == "cast" and s.dtype not in (half, torch.float32) for s in body):
        return None
    var, allv = k.loop_vars[-1], k.all_vars()
    if any(linear_coeff(s.index, var, allv) != 1 for s in (loads[0], stores[0])):
        return None
    return loads[0], stores[0]
