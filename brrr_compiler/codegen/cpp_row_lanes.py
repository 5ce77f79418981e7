"""Short rows, many at a time: one row per vector lane.

A row of a few elements (a logsumexp over dims of 5) leaves the row loop nothing to
vectorize: each row ran its folds and its libm calls one value at a time (the log through
a 16-lane libmvec call for one lane), 0.56x eager's speed. gcc will not vectorize across
rows by itself: their inputs are strided (a gather, which gcc does not emit for AMD
tuning) and the row's inner loops stay loops. So rows are taken in blocks of ROW_LANES
(schedule/rows.py decides): a scalar loop first copies the block's inputs into small
arrays laid out [element][lane] (sl*), then one `omp simd` loop over the lanes runs each
row's phases, every loop phase unrolled over the row's static extent, so each value is a
vector of 16 rows and each libm call one vector call; stores go to [element][lane] arrays
(ss*) that a scalar loop writes back. The rows past the last whole block run the usual
per-row code. Folds keep their per-row order (element 0, 1, ...), so sums round as the
per-row code's do. Hand-built on a logsumexp over (200000, 5): 10.0 ms -> 2.2 ms, one
thread (benchmarks/results/notes.md, "Short rows in vector lanes").

Short columns the same way (column_lanes): a reduction over an outer dim whose kept inner
dim is narrow (a max over the middle dim of (4000, 9, 31)) takes ROW_LANES adjacent
columns per block, a column per lane. Their loads are contiguous across the lanes, so
nothing is staged: each element of the column is one vector load, each fold one
register. The columns schedule's tile arrays and 31-column loops (a vector and a scalar
remainder of 15 per row) took 3-5x Inductor's time there. The last block of a row starts
ROW_LANES before its end, overlapping the one before rather than running a partial
vector: its columns are computed twice, the same way, and stored twice with the same
value (no reduction kernel stores into an input it reads: runtime/inplace.py).
"""
from __future__ import annotations

import dataclasses

import sympy

from brrr_compiler.codegen.cpp_accumulators import (EAGER_CHUNK_ROWS, EAGER_CHUNK_WIDTH,
                                                     PARTIALS, adds_in_order,
                                                     eager_interleaved, is_short)
from brrr_compiler.codegen.cpp_parallel import pragma
from brrr_compiler.codegen.cpp_types import STORAGE
from brrr_compiler.kernel_ir import ARG_FOLDS

LANE = sympy.Symbol("lane", integer=True)


def row_lanes(printer) -> list[str]:
    """The rows branch of `printer`'s kernel (cpp_reduce.ReductionPrinter) in blocks."""
    k, n = printer.k, printer.sched.row_lanes
    phases, loads, stores = _staged(k, n)
    cond = f"n_outer * n_red >= {printer.sched.min_parallel} && n_blocks > 1"
    lines = ["    const int64_t n_blocks = n_outer / " + str(n) + ";"]
    lines += pragma("    ", f"#pragma omp parallel for num_threads({printer.threads}) "
                    "schedule(static)", cond, printer.sched.forks)
    lines += ["    for (int64_t wb = 0; wb < n_blocks; ++wb) {"]
    lines += [f"      {ct} {name}[{size}];" for name, (ct, size, _) in {**loads, **stores}.items()]
    lines += _copies(printer, loads, n, "in")
    lines += ["      #pragma omp simd", f"      for (int64_t lane = 0; lane < {n}; ++lane) {{"]
    for p in phases:
        lines += _unrolled(printer, p, "        ") if p.loop else \
            printer.body_lines(p.body, "        ", False)
    lines += ["      }"] + _copies(printer, stores, n, "out") + ["    }"]
    lines += [f"    for (int64_t w = n_blocks * {n}; w < n_outer; ++w) {{"]
    return lines + printer.row_lines("      ", False) + ["    }"]


def column_lanes(printer) -> list[str]:
    """The rows branch of `printer`'s kernel, a reduction over an outer dim, in blocks of
    adjacent columns (module note)."""
    k, n = printer.k, printer.sched.row_lanes
    *outer, inner = k.loop_vars
    last = len(k.ranges) - 1
    cond = f"n_outer * n_red >= {printer.sched.min_parallel} && n_blocks > 1"
    lines = [f"    const int64_t n_chunks = (n{last} + {n - 1}) / {n};",
             f"    const int64_t n_blocks = n_outer / n{last} * n_chunks;"]
    lines += pragma("    ", f"#pragma omp parallel for num_threads({printer.threads}) "
                    "schedule(static)", cond, printer.sched.forks)
    lines += ["    for (int64_t wb = 0; wb < n_blocks; ++wb) {", "      int64_t rest = wb / n_chunks;"]
    lines += [f"      const int64_t {outer[i]} = rest % n{i}; rest /= n{i};"
              for i in reversed(range(last))]
    lines += [f"      const int64_t lo = brrr_min_i64((wb % n_chunks) * {n}, n{last} - {n});",
              "      #pragma omp simd", f"      for (int64_t lane = 0; lane < {n}; ++lane) {{",
              f"        const int64_t {inner} = lo + lane;"]
    for p in k.phases:
        lines += _unrolled(printer, p, "        ") if p.loop else \
            printer.body_lines(p.body, "        ", False)
    return lines + ["      }", "    }"]


def _tree(total: str, parts: list[str], indent: str) -> list[str]:
    """total += the parts, added pairwise: ((t + p1) + (p2 + p3))."""
    if len(parts) == 3:
        return [f"{indent}{total} = ({total} + {parts[0]}) + ({parts[1]} + {parts[2]});"]
    return [f"{indent}{total} += {p};" for p in parts]


def _staged(k, n: int):
    """The phases with loads and stores of row values rewritten to the local arrays, and
    the arrays: name -> (C storage type, size, the original statement)."""
    rv, extent = k.reduction_vars[0], int(k.reduction_ranges[0])
    loads, stores, names = {}, {}, {}
    phases = []
    for p in k.phases:
        body = []
        for s in p.body:
            rows = set(k.loop_vars) & sympy.sympify(s.index).free_symbols if s.index is not None else ()
            if s.op not in ("load", "store") or not rows:
                body.append(s)
                continue
            per_elem = rv in sympy.sympify(s.index).free_symbols
            key = ("store", s.buffer, s.index)     # a scratch row read back: the staged store
            key = key if key in names else (s.op, s.buffer, s.index)
            table = loads if s.op == "load" else stores
            if key not in names:
                names[key] = f"{'sl' if s.op == 'load' else 'ss'}{len(names)}"
                table[names[key]] = (STORAGE[s.dtype], extent * n if per_elem else n, s)
            local = rv * n + LANE if per_elem else LANE
            body.append(dataclasses.replace(s, buffer=names[key], index=local))
        phases.append(dataclasses.replace(p, body=body))
    return phases, loads, stores


def _copies(printer, arrays: dict, n: int, way: str) -> list[str]:
    """Copy the block's row values into (`way` "in") or out of the local arrays, lane by
    lane, each lane's row decoded from its flat index."""
    k, rv = printer.k, printer.k.reduction_vars[0]
    extent = int(k.reduction_ranges[0])
    lines = [f"      for (int64_t lane = 0; lane < {n}; ++lane) {{",
             f"        int64_t rest = wb * {n} + lane;"]
    for i in reversed(range(len(k.ranges))):
        lines.append(f"        const int64_t {k.loop_vars[i]} = rest % n{i}; rest /= n{i};")
    for name, (_, size, s) in arrays.items():
        per_elem = size != n
        far = f"{s.buffer}[{printer.cexpr(s.index)}]"
        near = f"{name}[{printer.cexpr(rv * n + LANE if per_elem else LANE)}]"
        copy = f"{near} = {far};" if way == "in" else f"{far} = {near};"
        lines.append(f"        for (int64_t {rv} = 0; {rv} < {extent}; ++{rv}) {copy}"
                     if per_elem else f"        {copy}")
    return lines + ["      }"]


def _unrolled(printer, phase, indent: str) -> list[str]:
    """A loop phase over the row's static extent as straight-line code: each element's
    copy of the body with the element's index and its own value names (v3_0, v3_1, ...);
    folds update the row's partial in element order, but a sum split in partials
    (`_slots`) adds each element into its own, the partials added at the end (four in a
    tree). A sum in double: one chain of 16 dependent double adds per block of lanes left
    the core waiting on each add's latency (a variance over the middle dim of (512, 16,
    100) took 1.3-1.8x the columns schedule's time). Another order moves a double total
    of floats by about its last bit: the float result changes only where that total lies
    so close to the midpoint between two floats."""
    k, acc = printer.k, printer.acc
    rv, extent = k.reduction_vars[0], int(k.reduction_ranges[0])
    reds = [s for s in phase.body if s.op == "reduce"]
    lines = [ln for r in reds for ln in acc.decls(r, indent, "acc_", "nan_", "ai_")]
    lines += [ln for r in reds for ln in acc.decls(r, indent, "c_", "cn_", "ci_", lanes=True)]
    slots = {r.out: _slots(printer, r, extent) for r in reds}
    slots = {r: sl for r, sl in slots.items() if sl and max(sl) > 0}    # sums split in parts
    tree = {r.out for r in reds if acc.total_ctype(r, lanes=True) == "double"}
    lines += [f"{indent}{acc.total_ctype(r, lanes=True) or 'float'} c_{r.out}_p{j};"
              for r in sorted(reds, key=lambda r: r.out) if r.out in slots
              for j in range(1, max(slots[r.out]) + 1)]
    local = {s.out for s in phase.body if s.out is not None and s.op != "reduce"}
    for e in range(extent):
        ren = {v: f"{v}_{e}" for v in local}
        body = [dataclasses.replace(
            s, out=ren.get(s.out, s.out), args=tuple(ren.get(a, a) for a in s.args),
            index=None if s.index is None else sympy.sympify(s.index).xreplace({rv: e}))
            for s in phase.body]
        printer.dtypes.update({ren[v]: printer.dtypes[v] for v in local})   # stmt_line reads them
        lines += printer.body_lines([s for s in body if s.out not in slots], indent, True)
        for s in body:
            if s.out in slots:     # a partial starts at its first value: `0.0 + x` is not
                j = slots[s.out][e]    # folded (x may be -0.0)
                first = slots[s.out].index(j) == e
                lines.append(f"{indent}c_{s.out}{f'_p{j}' if j else ''} "
                             f"{'=' if first else '+='} {s.args[0]};")
    for r in sorted(slots):
        parts = [f"c_{r}_p{j}" for j in range(1, max(slots[r]) + 1)]
        lines += _tree(f"c_{r}", parts, indent) if r in tree else \
            [f"{indent}c_{r} += {p};" for p in parts]      # eager's partials add in order
    lines += [ln for r in reds for ln in _into_total(acc, r, indent)]
    return lines + [indent + acc.finish(r) for r in reds]


def _slots(printer, r, extent: int) -> list[int] | None:
    """Which partial of `r` each element of the row adds into, where the row is split in
    several (None: one, in order). A sum in double: element e into e % PARTIALS. A
    float32 sum over a short column (4 to SHORT - 1 rows) in column lanes adds in float
    in eager's order: in its chunks over EAGER_CHUNK_WIDTH columns or more (row e into
    chunk e // EAGER_CHUNK_ROWS: wide lanes, eager's order but in the columns past its
    last whole group), else in its PARTIALS interleaved partials
    (cpp_accumulators.eager_interleaved). Its lanes added in double before: the
    conversions and double adds took x.sum(1) of (4000, 9, 31) 72 us alone against 43 in
    float, where Inductor's whole call took 62 (benchmarks/results/notes.md, "Float sums
    over short columns"). Up to 3 rows eager adds in order (adds_in_order); from SHORT
    rows on the sum adds in float in order, as the columns schedule's blocks do."""
    if printer.acc.total_ctype(r, lanes=True) == "double":
        return [e % min(PARTIALS, extent) for e in range(extent)]
    if not (printer.sched.column_lanes and printer.acc.float_lanes_sum(r)
            and is_short(extent) and not adds_in_order(extent)):
        return None
    width = sympy.sympify(printer.k.ranges[-1])
    if width.is_Integer and int(width) >= EAGER_CHUNK_WIDTH:   # wide lanes: eager's order
        return [e // EAGER_CHUNK_ROWS for e in range(extent)]  # but in the last group's
    return eager_interleaved(extent)


def _into_total(acc, r, indent: str) -> list[str]:
    """The row's one partial into its total. An arg fold's total holds its initial pair
    still, which the partial's replaces as the combine would (a NaN, a larger value, or
    the initial pair itself): copied, not compared. gcc carried the compare's NaN test of
    the initial value as a select of bools it could not vectorize, and the lanes of a max
    with indices over (40000, 5, 5) ran scalar."""
    if r.value in ARG_FOLDS:
        return [f"{indent}acc_{r.out} = c_{r.out};", f"{indent}ai_{r.out} = ci_{r.out};"]
    return acc.combine(r, indent, "c_", "cn_", "ci_")
