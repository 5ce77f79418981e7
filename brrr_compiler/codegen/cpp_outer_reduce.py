"""C++ loops for reductions over outer (strided) dims: columns in tiles, rows streamed.

When the innermost kept dim is the contiguous one (a sum over dim 0 of a row-major
matrix), walking each column's reduction separately would stride through memory. This
schedule instead hands each thread a tile of adjacent columns; it streams the
reduced rows once and, per row, updates one accumulator per column with an `omp simd`
loop over the contiguous columns. Tiles are as wide as the threads allow (the schedule's
column_tile, schedule/columns.py: up to MAX_COLUMN_TILE columns, and the tile arrays within
MAX_TILE_BYTES): each row then reads long contiguous runs, which the hardware prefetcher
streams, rather than 1 KB pieces 16 KB apart. Too few columns for a COLUMN_TILE per
thread (a bias gradient's 256 on 2 threads) get narrower tiles, down to MIN_COLUMN_TILE,
so that no thread idles. Per-row values of the kernel
(scalar phases, reduction results) become arrays over the tile.

A float32 sum folds rows in blocks of BLOCK_ROWS, as the row kernel's column folds do: a
column adds at most BLOCK_ROWS values in float, then each block's total goes into a
double (cpp_accumulators.total_ctype; a column shorter than cpp_accumulators.SHORT adds
in double throughout, unless eager's own order is known: then as eager does,
cpp_column_order.py). Its rounding error then grows with the block, not with the
column's length: a plain float sum of 1024 rows erred 4x eager's (whose sums
are cascaded) on a bias gradient. Other folds (max, min, sums in double) take blocks of
CHUNK rows, as before.

Each row of a tile is a piece of at most a few KB on pages of its own (the next row's
piece is a whole row further on), where the hardware prefetcher starts afresh. So the
loop asks for the piece PREFETCH_BYTES ahead (the schedule names the inputs: schedule/columns.py) (at least MIN_AHEAD rows, at most MAX_AHEAD)
of every input it reads contiguously along the columns (benchmarks/results/notes.md,
"Column prefetch").

Values of a row that are the same for every column of the tile (an input broadcast
along the columns, what is computed from it) are computed once per streamed row, before
the loop over the tile (transforms/hoist.column_hoisted), not once per column.
"""
from __future__ import annotations

import sympy

from brrr_compiler.codegen.cpp_parallel import pragma
from brrr_compiler.codegen.cpp_prefetch import prefetch_loop
from brrr_compiler.codegen.cpp_accumulators import (EAGER_CHUNK_ROWS, adds_in_order,
                                                     arg_update, init_value, is_short, update)
from brrr_compiler.codegen.cpp_column_order import (eager_split, interleaved_array,
                                                    interleaved_reset, interleaved_rows,
                                                    interleaved_total)
from brrr_compiler.codegen.cpp_columns import BLOCK_ROWS
from brrr_compiler.codegen.cpp_column_split import shared_rows
from brrr_compiler.codegen.cpp_column_stage import copies, declarations, restaged, staged_loads
from brrr_compiler.codegen.cpp_hoist import invariant_bits
from brrr_compiler.codegen.cpp_reduce import CHUNK, ReductionPrinter
from brrr_compiler.codegen.cpp_types import held_ctype
from brrr_compiler.kernel_ir import ARG_FOLDS, Phase, Stmt
from brrr_compiler.schedule.columns import column_prefetch_loads
from brrr_compiler.schedule.stream import LINE_BYTES
from brrr_compiler.transforms.hoist import column_row_level

PREFETCH_BYTES = 64 * 1024   # how far ahead of the row being read its input is requested
MIN_AHEAD, MAX_AHEAD = 8, 64 # ... in rows (measured on sum(0) of 4096^2: 8-16 rows best)


def _update(kind: str, acc: str, x: str) -> str:
    """A fold's update. A max or min keeps a NaN once one comes, as torch's do: no OpenMP
    reduction here to drop it, so no NaN flags beside each column (amax over the middle
    dim of (4000, 9, 31) 1.5x faster without them). The prelude's maximum/minimum, whose
    one unordered test covers both operands: a NaN test of `x` alone (`x != x`), where
    `x` is a select (relu), gcc 12 rewrote as a select of booleans of two widths beside a
    bool mask's loads, and left the loop scalar (pattern 36 at 32 MB: its column kernel
    3.5x slower, 2x Inductor's time)."""
    if kind in ("max", "min"):
        return f"{acc} = brrr_{kind}imum({acc}, {x});"
    return update(kind, acc, x)


class OuterReductionPrinter(ReductionPrinter):
    def __init__(self, kernel, sched, ctype, stmt_line, cexpr):
        super().__init__(kernel, sched, ctype, stmt_line, cexpr)
        column = sympy.Mul(*kernel.reduction_ranges)
        # double throughout for short columns, unless eager's own are float and in order,
        # or this kernel adds them in eager's order (cpp_column_order.py)
        self.eager_at = eager_split(kernel, sched)
        self.acc.short = is_short(column) and not adds_in_order(column) and self.eager_at is None
        # sums whose tile's last columns add in eager's interleaved partials
        self.tail = frozenset() if self.eager_at in (None, "bn") else frozenset(
            s.out for s in kernel.body if s.op == "reduce" and self.acc.float_lanes_sum(s))
        self.row_level = column_row_level(kernel)

    def _ref(self, line: str, s: Stmt) -> str:
        return line

    def stmt(self, s: Stmt) -> str:
        """One statement, with row-level values read as tile arrays."""
        index = s.index
        if index is not None:            # a gathered index is a row-level value too
            index = sympy.sympify(index).xreplace({
                v: sympy.Symbol(f"{v.name}[b]", integer=True)
                for v in sympy.sympify(index).free_symbols if v.name in self.row_level})
        renamed = Stmt(s.out, s.dtype, s.op, tuple(f"{a}[b]" if a in self.row_level else a
                                                   for a in s.args), s.buffer, index, s.value)
        line = self.stmt_line(renamed, {**self.dtypes, **{f"{a}[b]": self.dtypes[a]
                                                          for a in self.row_level if a in self.dtypes}},
                              bits=self.bits)
        if s.out in self.row_level:
            line = line.replace(f"const {self.ctype[s.dtype]} {s.out} =", f"{s.out}[b] =", 1)
        return line

    def _decode_r(self, indent: str) -> list[str]:
        """The reduced dims' indices from `rr`, the flat index of one streamed row."""
        rv = self.k.reduction_vars
        lines = [f"{indent}int64_t rrest = rr;"]
        for j in reversed(range(len(rv))):
            lines.append(f"{indent}const int64_t {rv[j]} = rrest % m{j}; rrest /= m{j};")
        return lines

    def tile_loop(self, indent: str, lines: list[str], start: str = "0",
                  stop: str = "bn") -> list[str]:
        inner = self.k.loop_vars[-1]
        if self.rows > 1:     # a block of whole short rows: b1 over them, b2 along each
            sec, w = self.k.loop_vars[-2], self.width
            return ([f"{indent}for (int64_t b1 = 0; b1 < bn1; ++b1) {{",
                     f"{indent}  const int64_t {sec} = lo1 + b1;",
                     f"{indent}  #pragma omp simd", f"{indent}  for (int64_t b2 = 0; b2 < {w}; ++b2) {{",
                     f"{indent}    const int64_t b = b1 * {w} + b2;",
                     f"{indent}    const int64_t {inner} = b2;"]
                    + [f"{indent}    {ln}" for ln in lines] + [f"{indent}  }}", f"{indent}}}"])
        if start == stop:
            return []
        return ([f"{indent}#pragma omp simd",
                 f"{indent}for (int64_t b = {start}; b < {stop}; ++b) {{",
                 f"{indent}  const int64_t {inner} = lo + b;"]
                + [f"{indent}  {ln}" for ln in lines] + [f"{indent}}}"])

    def scalar_phase(self, phase: Phase, indent: str) -> list[str]:
        return self.tile_loop(indent, [self.stmt(s) for s in phase.body])

    def loop_phase(self, phase: Phase, indent: str, lo: str = "0", hi: str = "n_red",
                   final: bool = True) -> list[str]:
        """The walk of rows [lo, hi) folding `phase` over the tile into acc_*, then (where
        `final`) the results into the row-level arrays."""
        reds = [s for s in phase.body if s.op == "reduce"]
        once = [s for s in phase.body if s.out in self.sched.per_row]   # once per row
        hoisted = {s.out for s in once}
        converted, self.bits = invariant_bits(phase.body, hoisted, indent + "    ")
        staged = staged_loads(phase.body, self.sched.column_stage)
        body, tail = self._bodies(restaged(phase.body, staged, self.k, self.rows), hoisted)
        tails = [r for r in reds if r.out in self.tail]
        at = self.eager_at if tails else "bn"
        chunks = self.eager_at is not None and any(self.acc.float_lanes_sum(r) for r in reds)
        rows = EAGER_CHUNK_ROWS if chunks else \
            BLOCK_ROWS if any(self.acc.total_ctype(r) == "double" for r in reds) else CHUNK
        lines = self.tile_loop(indent, [ln for r in tails for ln in interleaved_reset(r)],
                               at) if tails else []
        lines += [f"{indent}for (int64_t cb = {lo}; cb < {hi}; cb += {rows}) {{",
                  f"{indent}  const int64_t ce = brrr_min_i64(cb + {rows}, {hi});"]
        lines += self._per_block(reds, at, indent + "  ", self._reset)

        def row(ind: str, q: int = 0) -> list[str]:      # one streamed row, rr
            out = self._decode_r(ind) + self._prefetch(phase, ind)
            out += [f"{ind}{self.stmt(s)}" for s in once] + converted
            out += declarations(staged, self.k, self.tile, ind)
            out += copies(staged, self.k, self.rows, self.width, self.cexpr, ind)
            out += self.tile_loop(ind, body, stop=at)
            # the tail's sums add into cq_<r> (_bodies): each copy names its partial q
            return out + (self.tile_loop(ind, [ln.replace("cq_", f"cq{q}_") for ln in tail],
                                         start=at) if tails else [])

        if tails:
            lines += interleaved_rows(indent + "  ", row, sympy.Mul(*self.k.reduction_ranges))
        else:
            lines += [f"{indent}  for (int64_t rr = cb; rr < ce; ++rr) {{"]
            lines += row(indent + "    ") + [f"{indent}  }}"]
        lines += self._per_block(reds, at, indent + "  ", self._fold) + [f"{indent}}}"]
        lines += self.tile_loop(indent, [interleaved_total(r) for r in tails], at) if tails else []
        if final:
            lines += self.tile_loop(indent, [self.final_line(r) for r in reds])
        self.bits = frozenset()
        return lines

    def _per_block(self, reds, at: str, indent: str, lines_of) -> list[str]:
        """A block's resets or folds (`lines_of`) of the partials c_<r>: over the tile, and
        for sums with an interleaved tail over its columns before `at` only."""
        whole = [ln for r in reds if r.out not in self.tail for ln in lines_of(r)]
        head = [ln for r in reds if r.out in self.tail for ln in lines_of(r)]
        return (self.tile_loop(indent, whole) if whole else []) + \
            (self.tile_loop(indent, head, stop=at) if head else [])

    def _bodies(self, stmts, hoisted: set) -> tuple[list[str], list[str]]:
        """The tile loop's body per streamed row, and its body over the columns past
        eager_at, whose sums in self.tail add into their interleaved partials."""
        body, tail = [], []
        for s in stmts:
            if s.out in hoisted:
                continue
            if s.op == "reduce" and s.value in ARG_FOLDS:
                line = arg_update(s.value, f"c_{s.out}[b]", f"ci_{s.out}[b]",
                                  *(self._arg(a) for a in s.args[:2]))
            elif s.op == "reduce":
                line = _update(s.value, f"c_{s.out}[b]", s.args[0])
            else:
                line = self.stmt(s)
            body.append(line)
            tail.append(_update(s.value, f"cq_{s.out}[b]", s.args[0])
                        if s.out in self.tail else line)
        return body, tail

    def _prefetch(self, phase: Phase, indent: str) -> list[str]:
        """Request each contiguous input's piece of a row further ahead (module note); only
        with one reduced dim, whose next rows are `r + ahead`, and only the inputs the
        schedule names (CppSchedule.prefetch: those past the L2)."""
        k = self.k
        loads = sorted(((b, i) for b, i in column_prefetch_loads(k, phase, self.rows)
                        if b in self.sched.prefetch), key=str)
        if not loads:
            return []
        r, inner = k.reduction_vars[0], k.loop_vars[-1]
        inputs = {b.name: b.dtype.itemsize for b in k.inputs}
        pf, lo = sympy.Symbol("pf", integer=True), sympy.Symbol("lo", integer=True)
        at = {inner: lo + pf}
        if self.rows > 1:       # the block's rows are one contiguous piece of these loads
            at = {inner: pf, k.loop_vars[-2]: sympy.Symbol("lo1", integer=True)}
        lines = []
        for buf, index in loads:
            size = inputs[buf]
            ahead = min(MAX_AHEAD, max(MIN_AHEAD, PREFETCH_BYTES // (self.tile * size)))
            addr = self.cexpr(index.xreplace({r: r + ahead, **at}))
            lines.append(prefetch_loop(indent, f"{r} + {ahead} < m0", "0", "bn", LINE_BYTES // size,
                                       buf, addr))
        return lines

    def _arg(self, a: str) -> str:
        return f"{a}[b]" if a in self.row_level else a

    def _reset(self, r: Stmt) -> list[str]:
        if r.value in ARG_FOLDS:
            dt = self.arg_dtype[r.out]
            return [f"c_{r.out}[b] = {init_value(r.value, self.ctype[dt], dt)};",
                    f"ci_{r.out}[b] = 0;"]
        ct = self.acc.total_ctype(r, lanes=True) or self.ctype[r.dtype]
        return [f"c_{r.out}[b] = {init_value(r.value, ct, r.dtype)};"]

    def _fold(self, r: Stmt) -> list[str]:
        if r.value in ARG_FOLDS:     # blocks come in row order: the first extreme or NaN stays
            return [arg_update(r.value, f"acc_{r.out}[b]", f"ai_{r.out}[b]",
                               f"c_{r.out}[b]", f"ci_{r.out}[b]")]
        return [self.fold_line(r, f"c_{r.out}[b]")]

    def reset_total(self, r: Stmt) -> list[str]:
        """acc_r[b] back to the fold's initial value."""
        at = self.acc.total_ctype(r) or self.ctype[r.dtype]
        return [f"acc_{r.out}[b] = {init_value(r.value, at, r.dtype)};"]

    def fold_line(self, r: Stmt, part: str) -> str:
        """Fold `part` (a partial of r's column b, not an arg fold's) into acc_r[b]."""
        return _update(r.value, f"acc_{r.out}[b]", part)

    def final_line(self, r: Stmt) -> str:
        ct = self.ctype[r.dtype]
        if r.value in ARG_FOLDS:
            return f"{r.out}[b] = ai_{r.out}[b];"
        return f"{r.out}[b] = ({ct})acc_{r.out}[b];"

    def _tile_bounds(self, split: int, t: int, indent: str) -> list[str]:
        """`lo` and `bn` (the tile's first column and its columns); with a block of short
        rows, `lo1` and `bn1` (its first row and its rows) too, `bn` counting all."""
        if self.rows > 1:
            r = self.rows
            return [f"{indent}const int64_t lo1 = (w % ntiles) * {r};",
                    f"{indent}const int64_t bn1 = brrr_min_i64(lo1 + {r}, n{split}) - lo1;",
                    f"{indent}const int64_t bn = bn1 * {t};"]
        # a tile as wide as a static row of columns: every tile is whole, and gcc sizes
        # the tile loops at compile time
        whole = sympy.sympify(self.k.ranges[split]) == t
        return [f"{indent}const int64_t lo = (w % ntiles) * {t};",
                f"{indent}const int64_t bn = {t};" if whole else
                f"{indent}const int64_t bn = brrr_min_i64(lo + {t}, n{split}) - lo;"]

    def work_item(self, indent: str) -> list[str]:
        """Work item `w`'s outer indices, its tile's bounds and its tile arrays."""
        *outer, _ = self.k.loop_vars
        lines = [f"{indent}int64_t rest = w / ntiles;"]
        for i in reversed(range(self.split)):
            lines.append(f"{indent}const int64_t {outer[i]} = rest % n{i}; rest /= n{i};")
        return lines + self._tile_bounds(self.split, self.width, indent) + self._arrays(indent)

    def _arrays(self, indent: str) -> list[str]:
        lines = []
        for p in self.k.phases:
            for s in p.body:
                if s.out not in self.row_level:
                    continue
                ct = self.ctype[s.dtype] if s.op == "reduce" else held_ctype(s.dtype, self.ctype)
                t = self.tile
                lines.append(f"{indent}{ct} {s.out}[{t}];")
                if s.op == "reduce" and s.value in ARG_FOLDS:
                    vt = self.ctype[self.arg_dtype[s.out]]     # the value; the index is int64
                    init = init_value(s.value, vt, self.arg_dtype[s.out])
                    lines += [f"{indent}{vt} acc_{s.out}[{t}], c_{s.out}[{t}];",
                              f"{indent}int64_t ai_{s.out}[{t}], ci_{s.out}[{t}];",
                              f"{indent}for (int64_t b = 0; b < bn; ++b) {{ acc_{s.out}[b] = {init}; "
                              f"ai_{s.out}[b] = 0; }}"]
                elif s.op == "reduce":
                    at = self.acc.total_ctype(s) or ct
                    init = init_value(s.value, at, s.dtype)
                    bt = self.acc.total_ctype(s, lanes=True) or ct   # a block's partial
                    # only the tile's bn columns: every loop stops there
                    lines += [indent + a for a in interleaved_array(s, t)] \
                        if s.out in self.tail else []
                    lines += [f"{indent}{at} acc_{s.out}[{t}];", f"{indent}{bt} c_{s.out}[{t}];",
                              f"{indent}for (int64_t b = 0; b < bn; ++b) acc_{s.out}[b] = {init};"]
        return lines

    def loops(self) -> list[str]:
        k, num_threads, min_numel = self.k, self.threads, self.sched.min_parallel
        self.width = t = self.sched.column_tile
        self.rows = self.sched.column_rows
        self.tile = t * self.rows
        lines = [f"  const int64_t n{i} = {self.cexpr(r)};" for i, r in enumerate(k.ranges)]
        lines += [f"  const int64_t m{j} = {self.cexpr(r)};" for j, r in enumerate(k.reduction_ranges)]
        last = len(k.ranges) - 1
        self.split = last - 1 if self.rows > 1 else last     # the dim cut into tiles
        step = self.rows if self.rows > 1 else t
        lines += ["  const int64_t n_red = " + " * ".join(["(int64_t)1"] + [f"m{j}" for j in range(len(k.reduction_ranges))]) + ";",
                  f"  const int64_t ntiles = (n{self.split} + {step} - 1) / {step};",
                  "  const int64_t nwork = " + "".join(f"n{i} * " for i in range(self.split)) + "ntiles;",
                  "  if (nwork == 0) return;"]
        if self.sched.column_split:
            return lines + shared_rows(self)
        lines += pragma("  ", f"#pragma omp parallel for num_threads({num_threads}) schedule(static)",
                        f"nwork * n_red * {self.tile} >= {min_numel} && nwork > 1", self.sched.forks)
        lines += ["  for (int64_t w = 0; w < nwork; ++w) {"] + self.work_item("    ")
        for p in k.phases:
            lines += self.loop_phase(p, "    ") if p.loop else self.scalar_phase(p, "    ")
        lines.append("  }")
        return lines
