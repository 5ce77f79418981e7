"""C++ loops for pointwise kernels that read an operand transposed: 2-D tiles.

When some input is contiguous along an outer loop variable `a` but strided along the
innermost one (x + y.t()), walking whole rows touches a new page for every element of
y and vectorizes only as gathers. Tiling (a, inner) into TILE_A x TILE_INNER blocks and
first copying each such operand's block (the C++ schedule picks `a` and the block:
schedule/cpp.py) into a small local array, reading it along `a`
(contiguous), lets the main loop read every operand contiguously and store rows. An
output larger than the caches streams past them (cpp_stream.py) a tile row at a time:
TILE_INNER floats are four whole cache lines (benchmarks/results/notes.md, "Tiled
transposed reads").

An inner dim no longer than a tile (31 in a (.., 32, 31) channels-last-style block) is
whole in every tile: the blocks are then staged with that dim's length as their row
pitch, and where every access is contiguous across the tile's rows too (stride n along
`a`), the main loop is one flat loop over the tile instead of a loop per row. gcc sizes
a loop's vectors by its narrowest type: a bool mask's or a float16's loop takes 64 or 32
lanes, so a 31-long row loop never ran its vector body (benchmarks/results/notes.md,
"Flat tiles"). The schedule records that choice (CppSchedule.flat_tile,
transforms/flat_tile.py). A flat tile converts its float16 loads and stores a chunk at a
time with the target's instructions (cpp_half.staged_loop), the tile arrays' loads too:
a float16 NCHW -> NHWC copy over (16, 64, 56, 56) ran 1.9x faster, below eager's time.
Tiles looping per row keep the prelude's integer conversions: staged per 64-element row,
`x + y.t()` in float16 ran slower (notes.md, "float16 in flat tiles").
"""
from __future__ import annotations

import dataclasses
import functools

import sympy

from brrr_compiler.codegen.cpp_half import staged_halves, staged_loop
from brrr_compiler.codegen.cpp_parallel import parallel_loop
from brrr_compiler.codegen.cpp_stream import chunked_loop
from brrr_compiler.schedule_ir import TRANSPOSE_BLOCK, CppSchedule
from brrr_compiler.transforms.flat_tile import FLAT, flattened, whole_inner
from brrr_compiler.transforms.loops import linear_coeff


def _staging(k, loads, a, inner, storage, cexpr, tile) -> tuple[list[str], object]:
    """Copy each transposed operand's block (`tile`: its extent along a, and its row pitch:
    the tile's extent along inner, or the inner dim's length where that is shorter) into
    tb<j>; return lines and a new kernel whose body reads the blocks instead."""
    tile_a, tile_inner = tile
    lines, mapping = [], {}
    a_lo, b_lo = sympy.Symbol("a_lo", integer=True), sympy.Symbol("b_lo", integer=True)
    for j, s in enumerate(loads):
        key = (s.buffer, s.index)
        if key in mapping:
            continue
        name = f"tb{j}"
        mapping[key] = name
        copy = functools.partial(_copy, name, s.buffer, cexpr(s.index), a, inner, tile_inner)
        lines.append(f"    {storage[s.dtype]} {name}[{tile_a * tile_inner}];")
        block = _block(storage[s.dtype], tile_a)
        lines += (_transposed_copy(k, s, name, a, inner, copy, cexpr, tile, block) if block
                  else copy("a_lo", "    "))
    local = (a - a_lo) * tile_inner + (inner - b_lo)
    phases = [dataclasses.replace(p, body=[
        dataclasses.replace(s, buffer=mapping[(s.buffer, s.index)], index=local)
        if s.op == "load" and (s.buffer, s.index) in mapping else s for s in p.body])
        for p in k.phases]
    return lines, dataclasses.replace(k, phases=phases)


def _copy(name: str, buffer: str, src: str, a, inner, tile_inner: int, a_start: str,
          indent: str) -> list[str]:
    """The element-by-element copy of a tile into `name`, each column's rows from
    `a_start` (a C expression) on."""
    return [f"{indent}for (int64_t {inner} = b_lo; {inner} < b_hi; ++{inner})",
            f"{indent}  for (int64_t {a} = {a_start}; {a} < a_hi; ++{a})",
            f"{indent}    {name}[({a} - a_lo) * {tile_inner} + ({inner} - b_lo)] = {buffer}[{src}];"]


def _block(storage: str, tile_a: int) -> str | None:
    """The prelude's 16x16 block transposer for an operand of C type `storage` in tiles
    `tile_a` long along the transposed dim: float's (short tiles too, through
    brrr_transpose16k), 16-bit float16 and bfloat16 bits' in whole blocks only; None
    (element by element) for other types."""
    if storage == "float":
        return "brrr_transpose16"
    return "brrr_transpose16h" if storage == "uint16_t" and tile_a >= TRANSPOSE_BLOCK else None


def _transposed_copy(k, s, name: str, a, inner, copy, cexpr, tile, block: str) -> list[str]:
    """A float or 16-bit operand is staged 16x16 blocks at a time through `block` (in the
    prelude): a full tile with constant bounds, a partial tile at an edge as far as its
    whole blocks reach, and only the rest element by element (a float tile short along
    `a` through brrr_transpose16k). (Partial tiles copied
    wholly by the scalar loop held channels-last conversions to 40 GB/s in cache: 96
    channels are a full tile of 64 and a partial one of 32.) `copy(a_start, indent)`: the
    element-by-element copy, of each column's rows from `a_start` on."""
    tile_a, tile_inner = tile
    qa, qb = sympy.Symbol("qa", integer=True), sympy.Symbol("qb", integer=True)
    a_lo, b_lo = sympy.Symbol("a_lo", integer=True), sympy.Symbol("b_lo", integer=True)
    src = cexpr(s.index.xreplace({a: a_lo + qa, inner: b_lo + qb}))
    row = cexpr(linear_coeff(s.index, inner, k.all_vars()))
    full = f"    if (a_hi - a_lo == {tile_a} && b_hi - b_lo == {tile_inner}) {{"
    # what the whole blocks (fa x fb from the tile's corner) leave: every row past fa,
    # and the columns past fb of the rows before it
    rest = copy(f"({inner} < b_lo + fb ? a_lo + fa : a_lo)", "      ")
    if tile_a < TRANSPOSE_BLOCK:        # a short dim, whole in each tile: 16 x tile_a blocks
        first = cexpr(s.index.xreplace({a: a_lo, inner: b_lo + qb}))
        block = f"brrr_transpose16k(&{s.buffer}[{first}], {row}, &{name}[qb], {tile_inner}, "
        return _either(full, [f"      for (int64_t qb = 0; qb < {tile_inner}; qb += {TRANSPOSE_BLOCK})",
                              f"        {block}{tile_a});"],
                       ["      const int64_t fa = a_hi - a_lo, fb = (b_hi - b_lo) & "
                        f"~(int64_t){TRANSPOSE_BLOCK - 1};",
                        f"      for (int64_t qb = 0; qb < fb; qb += {TRANSPOSE_BLOCK})",
                        f"        {block}(int)fa);"] + rest, tile_inner)
    block = (f"{block}(&{s.buffer}[{src}], {row}, &{name}[qa * {tile_inner} + qb], "
             f"{tile_inner});")
    return _either(full, [f"      for (int64_t qb = 0; qb < {tile_inner}; qb += {TRANSPOSE_BLOCK})",
                          f"        for (int64_t qa = 0; qa < {tile_a}; qa += {TRANSPOSE_BLOCK})",
                          f"          {block}"],
                   _partial_blocks(block) + copy(f"({inner} < b_lo + cb ? a_lo + ca : a_lo)",
                                                 "      "), tile_inner)


def _partial_blocks(block: str) -> list[str]:
    """A partial tile's 16x16 blocks: the whole ones from its corner, then, along a side
    at least a block long, one more block ending at its edge, overlapping the last whole
    one (it rewrites the same values). What is left (ca rows, cb columns covered) is
    copied element by element: a side shorter than a block. A tile of 31 rows copied its
    last 15 element by element, half its elements: the kernel of generated pattern 2 at
    the LLC size spent half its time staging (notes.md, "float16 in flat tiles")."""
    n = TRANSPOSE_BLOCK
    return [f"      const int64_t na = a_hi - a_lo, nb = b_hi - b_lo;",
            f"      const int64_t fa = na & ~(int64_t){n - 1}, fb = nb & ~(int64_t){n - 1};",
            f"      const int64_t ca = na >= {n} ? na : fa, cb = nb >= {n} ? nb : fb;",
            f"      for (int64_t qb = 0; qb < fb; qb += {n})",
            f"        for (int64_t qa = 0; qa < fa; qa += {n})",
            f"          {block}",
            f"      if (ca > fa) {{   // the last rows, in blocks overlapping the whole ones",
            f"        const int64_t qa = na - {n};",
            f"        for (int64_t qb = 0; qb < fb; qb += {n})",
            f"          {block}",
            f"      }}",
            f"      if (cb > fb) {{   // the last columns, the corner block too",
            f"        const int64_t qb = nb - {n};",
            f"        for (int64_t qa = 0; qa < fa; qa += {n})",
            f"          {block}",
            f"        if (ca > fa) {{",
            f"          const int64_t qa = na - {n};",
            f"          {block}",
            f"        }}",
            f"      }}"]


def _either(full: str, whole: list[str], partial: list[str], pitch: int) -> list[str]:
    """`whole` for a full tile (test `full`), else `partial`; only `partial` where the row
    pitch is not whole blocks (a short inner dim's length: a full tile's constant-bound
    blocks would run past each row)."""
    if pitch % TRANSPOSE_BLOCK:
        return ["    {"] + partial + ["    }"]
    return [full] + whole + ["    } else {"] + partial + ["    }"]


def tiled_loops(k, sched: CppSchedule, cexpr, stmt_line, storage) -> list[str]:
    """The kernel's loops over (tile_a x tile_inner) blocks of (outer dim d, innermost)."""
    d, (tile_a, tile_inner) = sched.transposed, sched.tile
    *outer, inner = k.loop_vars
    a = outer[d]
    others = [i for i in range(len(outer)) if i != d]
    lines = [f"  const int64_t n{i} = {cexpr(r)};" for i, r in enumerate(k.ranges[:-1])]
    lines += [f"  const int64_t n_inner = {cexpr(k.ranges[-1])};",
              f"  const int64_t nta = (n{d} + {tile_a} - 1) / {tile_a};",
              f"  const int64_t ntb = (n_inner + {tile_inner} - 1) / {tile_inner};",
              "  const int64_t nwork = " + "".join(f"n{i} * " for i in others) + "nta * ntb;",
              "  if (nwork == 0) return;"]
    loop = ["  for (int64_t w = 0; w < nwork; ++w) {",
            "    const int64_t tb = w % ntb;",
            "    int64_t rest = w / ntb;",
            "    const int64_t ta = rest % nta; rest /= nta;"]
    for i in reversed(others):
        loop.append(f"    const int64_t {outer[i]} = rest % n{i}; rest /= n{i};")
    loop += [f"    const int64_t a_lo = ta * {tile_a};",
             f"    const int64_t a_hi = brrr_min_i64(a_lo + {tile_a}, n{d});",
             f"    const int64_t b_lo = tb * {tile_inner};",
             f"    const int64_t b_hi = brrr_min_i64(b_lo + {tile_inner}, n_inner);"]
    stream = set(sched.stream)
    if tile_inner < TRANSPOSE_BLOCK:
        return lines + parallel_loop("  ", sched.threads, _cond(sched), sched.forks,
                                     loop + _short_inner_loop(k, a, inner, tile_inner,
                                                              stmt_line), False)
    whole = whole_inner(k, tile_inner)
    pitch = whole or tile_inner
    tiled = [s for s in k.body if s.op == "load" and (s.buffer, str(s.index)) in sched.tile_loads]
    staged, k = _staging(k, tiled, a, inner, storage, cexpr, (tile_a, pitch))
    dtypes = {s.out: s.dtype for s in k.body if s.out}
    n = sched.flat_tile
    flat = n and flattened(k, a, inner, n)
    if flat:        # one loop over the tile's rows end to end (module note)
        k, inner, lo, hi = _flat_loop(flat, tile_a * n), FLAT, f"a_lo * {n}", f"a_hi * {n}"
        body, indent = ["    {"], "      "
    else:
        lo, hi = "b_lo", "b_hi"
        body, indent = [f"    for (int64_t {a} = a_lo; {a} < a_hi; ++{a}) {{"], "      "
    loop += staged + body
    line = functools.partial(_line, stmt_line, dtypes)
    if stream:
        loop += chunked_loop(k.body, stream, inner, lo, hi, line, cexpr, indent)
    elif flat and any(staged_halves(k, k.body)):
        loop += staged_loop(k, k.body, lo, hi, line, cexpr, indent)
    else:
        loop += [f"{indent}#pragma omp simd",
                 f"{indent}for (int64_t {inner} = {lo}; {inner} < {hi}; ++{inner}) {{"]
        loop += [f"{indent}  " + stmt_line(s, dtypes) for s in k.body] + [f"{indent}}}"]
    loop += ["    }", "  }"]
    return lines + parallel_loop("  ", sched.threads, _cond(sched), sched.forks, loop,
                                 bool(stream))


def _line(stmt_line, dtypes, s) -> str:
    return stmt_line(s, dtypes)


def _flat_loop(k, extent: int):
    """`k` (flattened) as cpp_half reads a loop: FLAT its innermost variable, of `extent`."""
    return dataclasses.replace(k, loop_vars=[*k.loop_vars[:-1], FLAT],
                               ranges=[*k.ranges[:-1], sympy.Integer(extent)])


def _cond(sched: CppSchedule) -> str:
    return f"nwork * {sched.tile[0] * sched.tile[1]} >= {sched.min_parallel} && nwork > 1"


def _short_inner_loop(k, a, inner, extent: int, stmt_line) -> list[str]:
    """A whole short inner dim (schedule/cpp.py `short_inner`): `a` is the vector loop,
    reading every operand along it, and the inner dim unrolled inside it, so each
    store is one of `extent` interleaved lanes."""
    dtypes = {s.out: s.dtype for s in k.body if s.out}
    return (["    #pragma omp simd",
             f"    for (int64_t {a} = a_lo; {a} < a_hi; ++{a}) {{",
             f"      #pragma GCC unroll {TRANSPOSE_BLOCK}",
             f"      for (int64_t {inner} = 0; {inner} < {extent}; ++{inner}) {{"]
            + ["        " + stmt_line(s, dtypes) for s in k.body] + ["      }", "    }", "  }"])
