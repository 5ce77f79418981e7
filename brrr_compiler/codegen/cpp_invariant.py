"""The tables of values that depend on a pointwise kernel's innermost loop variable alone,
or on its rows alone, filled once per call before its loops (which values:
transforms/tables.py, chosen by the C++ schedule as CppSchedule.tables and row_tables)."""
from __future__ import annotations

from brrr_compiler.codegen.cpp_types import STORAGE
from brrr_compiler.kernel_ir import Kernel, Stmt
from brrr_compiler.symbolic import static_sizes
from brrr_compiler.transforms.hoist import closure
from brrr_compiler.transforms.tables import (from_rows, load_tables, row_dims, rows_kernel,
                                            table_entries, table_index)


def invariant_tables(k: Kernel, names: tuple[str, ...], stmt_line,
                     dims: tuple[int, ...] = ()) -> tuple[list[str], Kernel]:
    """The lines that fill the tables of `names` (before the parallel loop; a loop per
    outer dim in `dims` around the inner one) and `k` with those values loaded from
    them; ([], k) when there are none."""
    if not names:
        return [], k
    inner, (n,) = k.loop_vars[-1], static_sizes(k.ranges[-1:])
    dtypes = {s.out: s.dtype for s in k.body if s.out}
    # stored and loaded as a buffer would be (bfloat16 as its bits, bool as a byte), so
    # the loop reads each value exactly as it was computed
    lines = [f"  {STORAGE[dtypes[v]]} tab_{v}[{table_entries(k, dims)}];" for v in names]
    pad = "  "
    for d in dims:
        var, (extent,) = k.loop_vars[d], static_sizes([k.ranges[d]])
        lines.append(f"{pad}for (int64_t {var} = 0; {var} < {extent}; ++{var}) {{")
        pad += "  "
    lines += [f"{pad}#pragma omp simd", f"{pad}for (int64_t {inner} = 0; {inner} < {n}; ++{inner}) {{"]
    at = table_index(k, dims)
    lines += [pad + "  " + stmt_line(s, dtypes) for s in closure(k.body, list(names))]
    lines += [pad + "  " + stmt_line(Stmt(None, dtypes[v], "store", (v,), f"tab_{v}", at), dtypes)
              for v in names]
    lines += [f"{'  ' * (depth + 1)}}}" for depth in range(len(dims), -1, -1)]
    return lines, load_tables(k, names, dims)


def row_tables(k: Kernel, names: tuple[str, ...], stmt_line) -> tuple[list[str], Kernel]:
    """The lines that fill one table per value of `names` over the rows of `k` (its outer
    dims, the last one vectorized) and `k` reading them (transforms/tables.py, "Rows")."""
    if not names:
        return [], k
    rows = rows_kernel(k)
    lines, read = invariant_tables(rows, names, stmt_line, row_dims(rows))
    return lines, from_rows(read, k)
