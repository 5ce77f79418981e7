"""C++ loops for reduction kernels: rows in parallel, phases per row.

Per outer point ("row"), scalar phases are straight-line code and loop phases walk the
reduced dims, in segments that never cross a row of the innermost reduced dim (the
others are decoded once per segment, and the innermost loop is one `omp simd` loop),
or as one flat run (schedule/flat_rows.py).
A loop phase that folds reductions walks them in chunks of at most CHUNK elements
(SUM_CHUNK where a float32 sum's values may cancel):
inside a chunk an `omp simd reduction(...)` loop keeps one partial per vector lane;
chunk results are then folded into the row total (the partials, their C types and NaN
flags: cpp_accumulators.py). That blocked scheme keeps sums of millions of elements
accurate without paying for double-width vector lanes. argmax/argmin keep a (value,
index) pair per lane (cpp_arg_lanes.py).
A row's max and sum of exps may fold in one walk (cpp_online.py). A fold across rows (a
`reduce` in a scalar phase) keeps one partial per thread; after all rows the partials
are combined in thread order (so results do not depend on timing) and the `once` phase
runs. Column folds keep a partial row per thread, combined likewise (cpp_columns.py).
Fewer rows than threads: the threads share a row (cpp_split_row.py).
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.codegen.cpp_arg_lanes import lane_chunk, lane_update
from brrr_compiler.codegen.cpp_across import AcrossRows
from brrr_compiler.codegen.cpp_accumulators import (ARG_FOLDS, CHUNK, CLAUSE, Accumulators,
                                                     arg_update, invariant_sums, is_short,
                                                     signed_sums, sums_into_totals, update)
from brrr_compiler.codegen.cpp_columns import ColumnFolds
from brrr_compiler.codegen.cpp_flat_tables import table_fills
from brrr_compiler.codegen.cpp_hoist import invariant_bits
from brrr_compiler.codegen.cpp_online import online_walk
from brrr_compiler.codegen.cpp_parallel import parallel_loop, pragma
from brrr_compiler.codegen.cpp_prefetch import NextRowPrefetch
from brrr_compiler.codegen.cpp_row_lanes import column_lanes, row_lanes
from brrr_compiler.codegen.cpp_split_row import split_folds, split_plain
from brrr_compiler.codegen.cpp_static_row import whole_row, whole_row_walk
from brrr_compiler.codegen.cpp_stream import chunked_loop
from brrr_compiler.codegen.cpp_staging import stage
from brrr_compiler.codegen.cpp_sum_lanes import lanes_chunk, lanes_walk
from brrr_compiler.codegen.cpp_types import held_ctype
from brrr_compiler.kernel_ir import Kernel, Phase, Stmt
from brrr_compiler.schedule.flat_rows import flattened
from brrr_compiler.schedule.online import pair_at
from brrr_compiler.schedule.rows import SHORT_ROW, half_stores
from brrr_compiler.schedule_ir import CppSchedule
from brrr_compiler.transforms.scratch import rows_in_outputs
from brrr_compiler.transforms.signs import known_signs

# A float32 sum of values that may cancel: its float lanes add at most SUM_CHUNK / lanes
# values each before the chunk's total goes on in double. With 1024 (128 adds a lane at
# AVX2 widths) the sum of 10,000 randn values erred 2.8x eager's cascade sum (median over
# 30 seeds), and a broadcast scalar's gradient failed against float64 (fuzz seed 79097);
# with 256 the median error is eager's or below from 1e3 to 1e7 values. Shorter chunks
# cost a sum loop up to ~15% in cache, so sums of one sign (cpp_accumulators.signed_sums:
# exps, squares), whose error stays relative to their result, keep CHUNK.
SUM_CHUNK = 256
# Selecting folds lose nothing to long chunks; arg folds pay a lane combine per chunk
ARG_CHUNK = 8192
# A product's lanes restart at 1 in every chunk: where the product underflows, each
# chunk's lanes and their combine pass through the subnormals again, each vector op
# there a microcode assist (a prod of 1M floats in (-1, 1) ran 12x eager's time in
# chunks of 1024). Order does not change a product's rounding error, so its lanes run
# the whole segment and underflow once.
PROD_CHUNK = 1 << 24


class ReductionPrinter(AcrossRows):
    def __init__(self, kernel: Kernel, sched: CppSchedule, ctype, stmt_line, cexpr):
        kernel = rows_in_outputs(kernel, sched.scratch_rows)
        self.k, self.ctype, self.stmt_line, self.cexpr = kernel, ctype, stmt_line, cexpr
        self.sched, self.threads = sched, sched.threads
        self.dtypes = {s.out: s.dtype for s in kernel.body if s.out}
        self.arg_dtype = {s.out: self.dtypes.get(s.args[0]) for s in kernel.body
                          if s.op == "reduce"}
        self.prefetch = NextRowPrefetch(kernel, cexpr, sched.prefetch)
        self.columns = ColumnFolds(kernel, ctype, stmt_line, cexpr)
        self.stream = set(sched.stream)            # outputs past the caches
        self.online = pair_at(kernel, sched.online)   # max and sum of exps in one walk
        rr = kernel.reduction_ranges   # the innermost loop's extent (segment_head):
        self.row_extent = rr[-1] if kernel.reduction_vars else sympy.Mul(*rr)
        inner = kernel.reduction_vars[-1] if kernel.reduction_vars else None
        signs = known_signs(kernel)
        # short columns in lanes add in float, in eager's order (cpp_row_lanes._slots)
        short = is_short(self.row_extent) and not sched.column_lanes
        self.acc = Accumulators(ctype, self.arg_dtype, short,
                                (invariant_sums(kernel.body, inner) if inner is not None
                                 else frozenset()) | sums_into_totals(kernel, signs))
        self.signed = signed_sums(kernel, signs)
        self.bits = frozenset()      # while a loop phase prints: cpp_hoist.invariant_bits

    def body_lines(self, stmts: list[Stmt], indent: str, chunk: bool, shared: bool = False,
                   lanes: bool = False, acc_sub: str = "", part: str = "c") -> list[str]:
        """`lanes`: arg folds update their lane's pair (cpp_arg_lanes.py). `shared`: values
        the split row's threads read from outside their parallel region (a bool among them
        is held as cpp_types.held_ctype says). `acc_sub`: what indexes a sum's partial (a
        lane of cpp_sum_lanes.py's block), and a max's NaN flag. `part`: the partials'
        prefix (c_*, cn_*, ci_*; t_* for a static row's tail, cpp_static_row.py)."""
        out = []
        for s in stmts:
            if s.op != "reduce":
                held = shared and s.out and s.dtype is torch.bool and s.op != "column_reduce"
                out.append(indent + (self.stmt_line(s, self.dtypes, held_ctype(s.dtype))
                                     if held else self._line(s)))
            elif s.value in ARG_FOLDS and lanes:
                out += lane_update(s.value, s.out, s.args[0], s.args[1], indent)
            elif s.value in ARG_FOLDS:
                out.append(indent + arg_update(s.value, f"{part}_{s.out}", f"{part}i_{s.out}",
                                               s.args[0], s.args[1]))
            else:
                out.append(indent + update(s.value, f"{part}_{s.out}{acc_sub}", s.args[0]))
                if s.value in ("max", "min"):
                    out.append(f"{indent}{part}n_{s.out}{acc_sub} |= ({s.args[0]} != {s.args[0]});")
        return out

    def _line(self, s: Stmt) -> str:
        if s.op == "column_reduce":
            return self.columns.update(s)
        return self.stmt_line(s, self.dtypes, bits=self.bits)

    def loop_phase(self, phase: Phase, indent: str, split: bool = False) -> list[str]:
        """The walk of one loop phase; values of the row it stores as float16 are
        converted before it (cpp_hoist.invariant_bits)."""
        outside = {a for s in phase.body for a in s.args} - {s.out for s in phase.body}
        rv = self.k.reduction_vars
        staged = half_stores(phase.body, rv[-1]) if rv and self.staged_bits(phase) else []
        converted, self.bits = invariant_bits([s for s in phase.body if s not in staged],
                                              outside, indent)   # staged: cpp_staging.py
        lines = converted + self._walk(phase, indent, split)
        self.bits = frozenset()
        return lines

    def _walk(self, phase: Phase, indent: str, split: bool) -> list[str]:
        reds = [s for s in phase.body if s.op == "reduce"]
        if not reds:
            return split_plain(self, phase, indent) if split else \
                self.segments(phase, [], indent, "0", "n_red", prefetch=True)
        lines = [ln for r in reds for ln in self.acc.decls(r, indent, "acc_", "nan_", "ai_")]
        short = None if split else self._short_row(phase, reds, indent)
        if short is not None:
            lines += short
        elif not split:
            lines += self.segments(phase, reds, indent, "0", "n_red", prefetch=True)
        else:
            lines += split_folds(self, phase, reds, indent)
        return lines + [indent + self.acc.finish(r) for r in reds]

    def _short_row(self, phase, reds, indent: str) -> list[str] | None:
        """A row of at most SHORT_ROW elements along one reduced dim of static extent: one
        constant loop without `omp simd`, which gcc unrolls. As a simd loop, each row paid
        a masked vector and a horizontal reduction per partial: a max over rows of 5
        floats took 12 ns a row, eager 4 (benchmarks/results/notes.md, "Short rows")."""
        rv, extent = self.k.reduction_vars, sympy.sympify(self.row_extent)
        if len(rv) != 1 or not extent.is_Integer or int(extent) > SHORT_ROW or self.online \
                or any(s.op == "column_reduce" or (s.op == "store" and s.buffer in self.stream)
                       for s in phase.body):
            return None
        lines = [ln for r in reds
                 for ln in self.acc.decls(r, indent, "c_", "cn_", "ci_", lanes=True)]
        lines.append(f"{indent}for (int64_t {rv[0]} = 0; {rv[0]} < {int(extent)}; ++{rv[0]}) {{")
        lines += self.body_lines(phase.body, indent + "  ", True) + [f"{indent}}}"]
        return lines + [ln for r in reds for ln in self.acc.combine(r, indent, "c_", "cn_", "ci_")]

    def segments(self, phase, reds, indent: str, lo: str, hi: str,
                  prefetch: bool = False, fence: bool = False) -> list[str]:
        """Walk [lo, hi) of the flattened reduced dims in segments of at most CHUNK
        elements that never cross a row of the innermost reduced dim, so the innermost
        loop is a plain `omp simd` loop over that dim (the outer reduced dims are decoded
        once per segment, not per element). Reductions fold each segment into c_*, then
        into acc_*. `prefetch`: a row of the parallel-rows schedule, where the next row's
        inputs may be prefetched (cpp_prefetch.py). `fence`: streamed stores are fenced
        after the segments (a thread's slice of a split row); rows fence once per thread
        (cpp_parallel.parallel_loop). A phase of CppSchedule.flat_phases walks the reduced
        dims as one flat run (schedule/flat_rows.py), without the next row's prefetch."""
        flat = self._at(phase) in self.sched.flat_phases
        phase, prefetch = (flattened(self.k, phase), False) if flat else (phase, prefetch)
        chunk = SUM_CHUNK if any(self.acc.float_lanes_sum(r) and r.out not in self.signed
                                 for r in reds) else CHUNK
        if reds and all(r.value in ARG_FOLDS + ("max", "min") for r in reds):
            chunk = ARG_CHUNK
        lanes = self.in_lanes(phase)
        chunk = lanes_chunk(self, reds, lanes) if lanes else chunk
        if reds and all(r.value == "prod" for r in reds):
            chunk = PROD_CHUNK           # in a block of lanes too

        if self.staged_bits(phase):     # arrays of CHUNK elements, lanes or not
            chunk = min(chunk, CHUNK)
        extent = None if fence else whole_row(self, phase, reds, chunk, lo, hi, flat)
        if extent is not None:           # one static segment: cpp_static_row.py
            return whole_row_walk(self, phase, reds, indent, extent, prefetch)
        inner, m, lines = self.segment_head(indent, lo, hi, chunk, flat)
        for r in reds if not lanes else ():      # a block of lanes declares its own
            lines += self.acc.decls(r, indent + "  ", "c_", "cn_", "ci_", lanes=True)
        if prefetch:
            lines += self.prefetch.segment(phase, indent + "  ", f"cb - ro * {m}", f"ce - ro * {m}")
        if not reds and self.stream & {s.buffer for s in phase.body if s.op == "store"}:
            lines += chunked_loop(phase.body, self.stream, inner, f"cb - ro * {m}",
                                  f"ce - ro * {m}", self._line, self.cexpr, indent + "  ")
            lines += [f"{indent}  cb = ce;", f"{indent}}}"]
            return lines + ([f"{indent}brrr_stream_fence();"] if fence else [])
        lines += self.chunk(phase, reds, indent + "  ", inner, m)
        return lines + [f"{indent}  cb = ce;", f"{indent}}}"]

    def segment_head(self, indent: str, lo: str, hi: str, chunk: int = CHUNK,
                     flat: bool = False) -> tuple[str, str, list[str]]:
        """Open the segment loop over [lo, hi), segments of at most `chunk` elements:
        (innermost variable, its extent, lines). `flat`: the reduced dims as one."""
        rv = [] if flat else self.k.reduction_vars
        last = len(rv) - 1
        inner, m = (rv[last], f"m{last}") if rv else ("rr", "n_red")   # unit dims dropped
        lines = [f"{indent}for (int64_t cb = {lo}; cb < {hi};) {{",
                 f"{indent}  const int64_t ro = cb / {m};",
                 f"{indent}  const int64_t ce = brrr_min_i64(brrr_min_i64(cb + {chunk}, {hi}), (ro + 1) * {m});"]
        if last > 0:
            lines.append(f"{indent}  int64_t rrest = ro;")
            lines += [f"{indent}  const int64_t {rv[j]} = rrest % m{j}; rrest /= m{j};"
                      for j in reversed(range(last))]
        return inner, m, lines

    def chunk(self, phase, reds, indent: str, inner: str, m: str, fold: bool = True) -> list[str]:
        """The innermost loop over one segment, its reductions folded into c_* (and then
        into acc_* when `fold`)."""
        lines, body, after, sub = [], phase.body, [], ""
        lanes = self.in_lanes(phase)
        bits = self.staged_bits(phase)
        if bits:                         # masks as int lanes, halves as floats: cpp_staging.py
            lines, body, after = stage(body, inner, f"cb - ro * {m}", f"ce - ro * {m}",
                                       CHUNK, self.cexpr, indent, bits)
        if any(r.value in ARG_FOLDS for r in reds):
            lines = lane_chunk(self, phase, reds, indent, inner, m)
        elif lanes:                      # sums in a block of lanes: cpp_sum_lanes.py
            lines += lanes_walk(self, body, reds, indent, inner, f"cb - ro * {m}",
                                f"ce - ro * {m}", lanes) + after
            sub = "[0]"
        else:
            clauses = [f"reduction({CLAUSE[r.value]}:c_{r.out})" for r in reds]
            clauses += [f"reduction(|:cn_{r.out})" for r in reds if r.value in ("max", "min")]
            lines.append(f"{indent}#pragma omp simd " + " ".join(clauses))
            lines.append(f"{indent}for (int64_t {inner} = cb - ro * {m}; {inner} < ce - ro * {m}; ++{inner}) {{")
            lines += self.body_lines(body, indent + "  ", True)
            lines += [f"{indent}}}"] + after
        for r in reds if fold else ():
            lines += self.acc.combine(r, indent, "c_", "cn_", "ci_", sub)
        return lines

    def in_lanes(self, phase) -> int | None:
        """The block of lanes `phase`'s folds add in (cpp_sum_lanes.py), if they do."""
        return self._of_phase(self.sched.sum_lanes, phase)

    def staged_bits(self, phase) -> int | None:
        """The lane width `phase`'s byte loads are staged at (cpp_staging.py), if they are:
        into arrays of CHUNK lanes, so its segments are at most CHUNK long (a min's
        segments of ARG_CHUNK overran them: a kernel that also called cos on a masked
        value wrote past its stack array and never returned, fuzz seed 161391)."""
        return self._of_phase(self.sched.staged, phase)

    def _of_phase(self, table, phase) -> int | None:
        """`phase`'s entry in a schedule table of (phase index, value) pairs."""
        return dict(table).get(self._at(phase))

    def _at(self, phase) -> int | None:
        """`phase`'s index in the kernel; None for a flattened copy (flat_rows.py)."""
        return next((i for i, p in enumerate(self.k.phases) if p is phase), None)

    def row_lines(self, indent: str, split: bool) -> list[str]:
        k = self.k
        lines = [f"{indent}int64_t rest = w;"]
        for i in reversed(range(len(k.ranges))):
            lines.append(f"{indent}const int64_t {k.loop_vars[i]} = rest % n{i}; rest /= n{i};")
        pair = None if split else self.online
        if not split and self.prefetch.active and (pair is None or self.prefetch.phase is not pair.second):
            lines += self.prefetch.next_row(indent)
        for p in k.phases:
            if pair is not None and p is pair.first:
                lines += online_walk(self, pair, indent)
            elif not p.once and not (pair is not None and p is pair.second):
                lines += self.loop_phase(p, indent, split) if p.loop else \
                    self.body_lines(p.body, indent, False, shared=split)
        return lines

    def loops(self) -> list[str]:
        nt, min_numel = self.threads, self.sched.min_parallel
        k, across = self.k, self._across()
        lines = [f"  const int64_t n{i} = {self.cexpr(r)};" for i, r in enumerate(k.ranges)]
        lines += [f"  const int64_t m{j} = {self.cexpr(r)};" for j, r in enumerate(k.reduction_ranges)]
        lines += ["  const int64_t n_outer = " + " * ".join(["(int64_t)1"] + [f"n{i}" for i in range(len(k.ranges))]) + ";",
                  "  const int64_t n_red = " + " * ".join(["(int64_t)1"] + [f"m{j}" for j in range(len(k.reduction_ranges))]) + ";"]
        lines += table_fills(k, self.sched.flat_phases, self.cexpr)   # cpp_flat_tables.py
        lines += [ln for r in across for ln in self.acc.partials(r, "  ", nt)]
        lines += self.columns.shared("  ", nt)
        lines += [f"  if (n_outer > 0 && n_outer < {nt} && n_red >= {self.sched.split_min_red} && {nt} > 1) {{"]
        lines += self._scratch("    ", "malloc") + self._thread_locals(across, "    ")
        self.columns.split = True
        lines += ["    for (int64_t w = 0; w < n_outer; ++w) {"] + self.row_lines("      ", True) + ["    }"]
        self.columns.split = False
        lines += self._publish(across, "    ", "0") + self._scratch("    ", "free")
        lines += ["  } else if (n_outer > 0) {"] + self._parallel_rows(across, min_numel) + ["  }"]
        lines += self._once(across, "  ") if across else []
        return lines + (self.columns.columns_phase("  ", nt, min_numel, self.sched.columns_forks)
                        if self.columns else [])

    def _parallel_rows(self, across, min_numel: int) -> list[str]:
        """Rows spread over the threads; each thread owns its scratch rows and partials."""
        if self.sched.row_lanes:
            return column_lanes(self) if self.sched.column_lanes else row_lanes(self)
        cond = f"n_outer * n_red >= {min_numel} && n_outer > 1"
        fork = self.sched.forks
        row = ["for (int64_t w = 0; w < n_outer; ++w) {"]
        if not (self.k.scratch or across or self.columns):
            loop = ["    " + row[0]] + self.row_lines("      ", False) + ["    }"]
            return parallel_loop("    ", self.threads, cond, fork, loop, bool(self.stream))
        lines = pragma("    ", f"#pragma omp parallel num_threads({self.threads})", cond, fork)
        lines += ["    {"] + self._scratch("      ", "malloc") + self._thread_locals(across, "      ")
        lines += self.columns.thread_begin("      ")
        # nowait: what a thread does after its rows touches only its own partials and
        # scratch, so the region's closing barrier is the only one needed
        lines += [] if fork is False else ["      #pragma omp for schedule(static) nowait"]
        lines += ["      " + row[0]]
        lines += self.row_lines("        ", False) + self.columns.row_end("        ") + ["      }"]
        lines += ["      brrr_stream_fence();"] if self.stream else []
        lines += self._publish(across, "      ", "omp_get_thread_num()")
        lines += self.columns.thread_end("      ") if self.columns else []
        return lines + self._scratch("      ", "free") + ["    }"]
