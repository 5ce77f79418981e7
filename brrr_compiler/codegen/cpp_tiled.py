"""C++ loops for pointwise kernels that read an operand transposed: 2-D tiles.

When some input is contiguous along an outer loop variable `a` but strided along the
innermost one (x + y.t()), walking whole rows touches a new page for every element of
y and vectorizes only as gathers. Tiling (a, inner) into TILE_A x TILE_INNER blocks and
first copying each such operand's block into a small local array, reading it along `a`
(contiguous), lets the main loop read every operand contiguously and store rows. An
output larger than the caches streams past them (cpp_stream.py) a tile row at a time:
TILE_INNER floats are four whole cache lines (benchmarks/results/notes.md, "Tiled
transposed reads").
"""
from __future__ import annotations

import dataclasses

import sympy

from brrr_compiler.codegen.cpp_parallel import forks, parallel_loop, product, static_sizes, tiles
from brrr_compiler.codegen.cpp_stream import chunked_loop, streamed
from brrr_compiler.lower.loops import linear_coeff

TILE_A = 128
TILE_INNER = 64


def transposed_var(k) -> int | None:
    """The outer var along which a load is contiguous while the inner var strides it."""
    if len(k.loop_vars) < 2 or k.is_reduction:
        return None
    inner, allv = k.loop_vars[-1], k.all_vars()
    for s in k.body:
        if s.op != "load":
            continue
        ci = linear_coeff(s.index, inner, allv)
        if ci is None or ci == 0 or ci == 1:
            continue
        for d, v in enumerate(k.loop_vars[:-1]):
            if linear_coeff(s.index, v, allv) == 1:
                return d
    return None


def _transposed_loads(k, a, inner) -> list:
    allv = k.all_vars()
    out = []
    for s in k.body:
        if s.op == "load":
            ci = linear_coeff(s.index, inner, allv)
            if ci not in (None, 0, 1) and linear_coeff(s.index, a, allv) == 1:
                out.append(s)
    return out


def _staging(k, loads, a, inner, storage, cexpr) -> tuple[list[str], object]:
    """Copy each transposed operand's block into tb<j>; return lines and a new kernel
    whose body reads the blocks instead."""
    lines, mapping = [], {}
    a_lo, b_lo = sympy.Symbol("a_lo", integer=True), sympy.Symbol("b_lo", integer=True)
    for j, s in enumerate(loads):
        key = (s.buffer, s.index)
        if key in mapping:
            continue
        name = f"tb{j}"
        mapping[key] = name
        copy = [f"    for (int64_t {inner} = b_lo; {inner} < b_hi; ++{inner})",
                f"      for (int64_t {a} = a_lo; {a} < a_hi; ++{a})",
                f"        {name}[({a} - a_lo) * {TILE_INNER} + ({inner} - b_lo)] = "
                f"{s.buffer}[{cexpr(s.index)}];"]
        lines.append(f"    {storage[s.dtype]} {name}[{TILE_A * TILE_INNER}];")
        lines += (_transposed_copy(k, s, name, a, inner, copy, cexpr)
                  if storage[s.dtype] == "float" else copy)
    local = (a - a_lo) * TILE_INNER + (inner - b_lo)
    phases = [dataclasses.replace(p, body=[
        dataclasses.replace(s, buffer=mapping[(s.buffer, s.index)], index=local)
        if s.op == "load" and (s.buffer, s.index) in mapping else s for s in p.body])
        for p in k.phases]
    return lines, dataclasses.replace(k, phases=phases)


def _transposed_copy(k, s, name: str, a, inner, copy: list[str], cexpr) -> list[str]:
    """A full tile of a float operand is staged 16x16 blocks at a time through
    brrr_transpose16 (in the prelude); partial tiles at the edges keep the scalar copy."""
    qa, qb = sympy.Symbol("qa", integer=True), sympy.Symbol("qb", integer=True)
    a_lo, b_lo = sympy.Symbol("a_lo", integer=True), sympy.Symbol("b_lo", integer=True)
    src = cexpr(s.index.xreplace({a: a_lo + qa, inner: b_lo + qb}))
    row = cexpr(linear_coeff(s.index, inner, k.all_vars()))
    return ([f"    if (a_hi - a_lo == {TILE_A} && b_hi - b_lo == {TILE_INNER}) {{",
             f"      for (int64_t qb = 0; qb < {TILE_INNER}; qb += 16)",
             f"        for (int64_t qa = 0; qa < {TILE_A}; qa += 16)",
             f"          brrr_transpose16(&{s.buffer}[{src}], {row}, "
             f"&{name}[qa * {TILE_INNER} + qb], {TILE_INNER});",
             "    } else {"] + ["  " + ln for ln in copy] + ["    }"])


def _tiled_forks(k, d: int, others: list[int], min_numel: int) -> bool | None:
    """Whether tiled_loops' parallel loop ever forks, for constant sizes (cpp_parallel.py)."""
    sizes = static_sizes(k.ranges)
    if sizes is None:
        return None
    nwork = product(sizes[i] for i in others) * tiles(sizes[d], TILE_A) * tiles(sizes[-1], TILE_INNER)
    return forks(nwork, TILE_A * TILE_INNER, min_numel)


def tiled_loops(k, d: int, num_threads: int, cexpr, stmt_line, min_numel: int,
                storage) -> list[str]:
    *outer, inner = k.loop_vars
    a = outer[d]
    others = [i for i in range(len(outer)) if i != d]
    lines = [f"  const int64_t n{i} = {cexpr(r)};" for i, r in enumerate(k.ranges[:-1])]
    lines += [f"  const int64_t n_inner = {cexpr(k.ranges[-1])};",
              f"  const int64_t nta = (n{d} + {TILE_A} - 1) / {TILE_A};",
              f"  const int64_t ntb = (n_inner + {TILE_INNER} - 1) / {TILE_INNER};",
              "  const int64_t nwork = " + "".join(f"n{i} * " for i in others) + "nta * ntb;",
              "  if (nwork == 0) return;"]
    loop = ["  for (int64_t w = 0; w < nwork; ++w) {",
            "    const int64_t tb = w % ntb;",
            "    int64_t rest = w / ntb;",
            "    const int64_t ta = rest % nta; rest /= nta;"]
    for i in reversed(others):
        loop.append(f"    const int64_t {outer[i]} = rest % n{i}; rest /= n{i};")
    loop += [f"    const int64_t a_lo = ta * {TILE_A};",
             f"    const int64_t a_hi = brrr_min_i64(a_lo + {TILE_A}, n{d});",
             f"    const int64_t b_lo = tb * {TILE_INNER};",
             f"    const int64_t b_hi = brrr_min_i64(b_lo + {TILE_INNER}, n_inner);"]
    stream = streamed(k)
    staged, k = _staging(k, _transposed_loads(k, a, inner), a, inner, storage, cexpr)
    dtypes = {s.out: s.dtype for s in k.body if s.out}
    loop += staged + [f"    for (int64_t {a} = a_lo; {a} < a_hi; ++{a}) {{"]
    if stream:
        loop += chunked_loop(k.body, stream, inner, "b_lo", "b_hi",
                             lambda s: stmt_line(s, dtypes), cexpr, "      ")
    else:
        loop += ["      #pragma omp simd",
                 f"      for (int64_t {inner} = b_lo; {inner} < b_hi; ++{inner}) {{"]
        loop += ["        " + stmt_line(s, dtypes) for s in k.body] + ["      }"]
    loop += ["    }", "  }"]
    cond = f"nwork * {TILE_A * TILE_INNER} >= {min_numel} && nwork > 1"
    return lines + parallel_loop("  ", num_threads, cond, _tiled_forks(k, d, others, min_numel),
                                 loop, bool(stream))
