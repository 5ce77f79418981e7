"""Pointwise kernels whose values do not depend on one outer loop: computed once, stored
once per index of that loop (CppSchedule.replicate, chosen in schedule/cpp.py).

Note on why. An input expanded along an outer dim (x[:, None] broadcast over heads, a
rotary embedding's cos over batch and heads) makes every value of the kernel the same
for each index of that dim: only the stores move along it. The plain loop nest computed
each value once per output element; a float16 log1p of a (16, 13, 1, 17) input expanded
to (16, 13, 17, 17) called libm 17 times per input value. Here each work item (the
other outer indices and a tile of the innermost loop) computes its values into local
arrays once, in the storage type its stores write, and a second loop copies them to
every index of the replicated dim. The tile is short (REPLICATE_TILE) so the arrays
stay in L1.
"""
from __future__ import annotations

import dataclasses

import sympy

from brrr_compiler.codegen.cpp_parallel import parallel_loop
from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.schedule_ir import CppSchedule


def replicated_loops(k: Kernel, sched: CppSchedule, stmt_line, cexpr, storage: dict) -> list[str]:
    """The loop nest of `k` with its stores replicated along loop var sched.replicate."""
    d = sched.replicate
    *outer, inner = k.loop_vars
    *outer_n, inner_n = [cexpr(r) for r in k.ranges]
    others = [i for i in range(len(outer)) if i != d]
    lines = [f"  const int64_t n{i} = {n};" for i, n in enumerate(outer_n)]
    lines += [f"  const int64_t n_inner = {inner_n};",
              f"  const int64_t tile = {sched.inner_tile};",
              "  const int64_t ntiles = (n_inner + tile - 1) / tile;",
              "  const int64_t nwork = " + "".join(f"n{i} * " for i in others) + "ntiles;",
              "  if (nwork == 0) return;"]
    loop = ["  for (int64_t w = 0; w < nwork; ++w) {", "    int64_t rest = w / ntiles;"]
    for i in reversed(others):
        loop.append(f"    const int64_t {outer[i]} = rest % n{i}; rest /= n{i};")
    loop += ["    const int64_t lo = (w % ntiles) * tile;",
             "    const int64_t hi = brrr_min_i64(lo + tile, n_inner);"]
    once = [s for s in k.body if s.out in sched.per_row]   # once per row (transforms/hoist.py)
    dtypes = {s.out: s.dtype for s in k.body if s.out}
    loop += ["    " + stmt_line(s, dtypes) for s in once]
    before = {s.out for s in once}
    at = sympy.Symbol(f"{inner} - lo", integer=True)        # printed as is
    stores = [s for s in k.body if s.op == "store"]
    held = {id(s): f"rp{j}" for j, s in enumerate(stores)}
    loop += [f"    {storage[s.dtype]} {held[id(s)]}[{sched.inner_tile}];" for s in stores]
    loop += ["    #pragma omp simd", f"    for (int64_t {inner} = lo; {inner} < hi; ++{inner}) {{"]
    for s in k.body:
        if s.out in before:
            continue
        s = dataclasses.replace(s, buffer=held[id(s)], index=at) if s.op == "store" else s
        loop.append("      " + stmt_line(s, dtypes))
    loop += ["    }", f"    for (int64_t {outer[d]} = 0; {outer[d]} < n{d}; ++{outer[d]}) {{",
             "      #pragma omp simd",
             f"      for (int64_t {inner} = lo; {inner} < hi; ++{inner}) {{"]
    loop += [f"        {s.buffer}[{cexpr(s.index)}] = {held[id(s)]}[{inner} - lo];"
             for s in stores]
    loop += ["      }", "    }", "  }"]
    # each work item stores its tile n{d} times: that is its share of the work
    cond = f"nwork * n{d} * (n_inner < tile ? n_inner : tile) >= {sched.min_parallel} && nwork > 1"
    return lines + parallel_loop("  ", sched.threads, cond, sched.forks, loop, False)
