"""C++ column folds of a row kernel: partial rows per thread, combined in thread order.

Note on the partials. A column fold (kernel_ir `column_reduce`: LayerNorm's weight and
bias gradients beside its input gradient's row sums) adds each element of every row
into its column's accumulator. Each thread of the parallel-rows schedule keeps a partial
row `cp_<c>` of the fold's dtype (private, cache-resident) and, every BLOCK_ROWS rows it
walked, adds it into its own double row of `cs_<c>` (one row per thread) and clears it:
a float sum of at most BLOCK_ROWS values per element, doubles beyond, as the row
schedule's chunks do. After all rows, the columns phase adds the threads' rows in thread
order (results depend on the thread count, never on timing), rounds once, and computes
and stores what depends on the sums. When rows are too few to spread (the split
schedule: rows one after another, each loop phase's slice of the row on its own
thread), each element goes straight into thread 0's double row: a column is then only
touched by one thread at a time.
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.codegen.cpp_accumulators import is_short
from brrr_compiler.codegen.cpp_parallel import pragma
from brrr_compiler.kernel_ir import Kernel, Stmt

BLOCK_ROWS = 64


class ColumnFolds:
    def __init__(self, k: Kernel, ctype: dict, stmt_line, cexpr):
        self.k, self.ctype, self.stmt_line, self.cexpr = k, ctype, stmt_line, cexpr
        self.folds = [s for p in k.phases if p.per_row_loop for s in p.body
                      if s.op == "column_reduce"]
        self.phase = next((p for p in k.phases if p.loop and p.once), None)
        self.split = False          # printing the split schedule (module note)
        # fewer rows than cpp_accumulators.SHORT: the partial rows add in double too
        self.short = is_short(sympy.Mul(*k.ranges))

    def __bool__(self) -> bool:
        return bool(self.folds)

    def update(self, s: Stmt) -> str:
        at = self.cexpr(s.index)
        if self.split:
            return f"cs_{s.out}[{at}] += (double){s.args[0]};"
        return f"cp_{s.out}[{at}] += {s.args[0]};"

    def shared(self, indent: str, nt: int) -> list[str]:
        """Each thread's double row, zeroed, before the rows."""
        return [f"{indent}double* cs_{c.out} = (double*)calloc((size_t){nt} * "
                f"(n_red > 0 ? n_red : 1), sizeof(double));" for c in self.folds]

    def thread_begin(self, indent: str) -> list[str]:
        lines = []
        for c in self.folds:
            ct = "double" if self.short and c.dtype is torch.float32 else self.ctype[c.dtype]
            lines.append(f"{indent}{ct}* cp_{c.out} = ({ct}*)calloc(n_red > 0 ? n_red : 1, sizeof({ct}));")
        return lines + ([f"{indent}int64_t col_rows = 0;"] if self.folds else [])

    def row_end(self, indent: str) -> list[str]:
        if not self.folds:
            return []
        return ([f"{indent}if (++col_rows == {BLOCK_ROWS}) {{"]
                + self._flush(indent + "  ") + [f"{indent}  col_rows = 0;", f"{indent}}}"])

    def thread_end(self, indent: str) -> list[str]:
        return self._flush(indent) + [f"{indent}free(cp_{c.out});" for c in self.folds]

    def _flush(self, indent: str) -> list[str]:
        """Add this thread's partial rows into its double rows and clear them."""
        lines = []
        for c in self.folds:
            lines += [f"{indent}{{",
                      f"{indent}  double* const row = cs_{c.out} + (int64_t)omp_get_thread_num() * n_red;",
                      f"{indent}  #pragma omp simd",
                      f"{indent}  for (int64_t j = 0; j < n_red; ++j) {{ row[j] += (double)cp_{c.out}[j]; cp_{c.out}[j] = 0; }}",
                      f"{indent}}}"]
        return lines

    def columns_phase(self, indent: str, nt: int, min_numel: int, fork: bool | None) -> list[str]:
        """Per column: the threads' sums in thread order, then the columns phase (`fork`:
        CppSchedule.columns_forks)."""
        if self.phase is None:
            return [f"{indent}free(cs_{c.out});" for c in self.folds]
        rv = self.k.reduction_vars
        dtypes = {s.out: s.dtype for s in self.k.body if s.out}
        lines = pragma(indent, f"#pragma omp parallel for num_threads({nt}) schedule(static)",
                       f"n_red * {nt} >= {min_numel}", fork)
        lines += [f"{indent}for (int64_t rr = 0; rr < n_red; ++rr) {{",
                  f"{indent}  int64_t rrest = rr;"]
        lines += [f"{indent}  const int64_t {rv[j]} = rrest % m{j}; rrest /= m{j};"
                  for j in reversed(range(len(rv)))]
        for c in self.folds:
            at = self.cexpr(c.index)
            lines += [f"{indent}  double t_{c.out} = 0;",
                      f"{indent}  for (int t = 0; t < {nt}; ++t) t_{c.out} += cs_{c.out}[(int64_t)t * n_red + {at}];",
                      f"{indent}  const {self.ctype[c.dtype]} {c.out} = ({self.ctype[c.dtype]})t_{c.out};"]
        lines += [f"{indent}  {self.stmt_line(s, dtypes)}" for s in self.phase.body]
        return lines + [f"{indent}}}"] + [f"{indent}free(cs_{c.out});" for c in self.folds]
