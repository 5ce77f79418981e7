"""Which gathers of a pointwise kernel prefetch their next row (codegen/cpp_stream.py
prints the prefetches and has the note on why)."""
from __future__ import annotations

import sympy

from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.schedule.stream import LINE_BYTES
from brrr_compiler.transforms.loops import linear_coeff

# Sources smaller than this are gathered without: on an AMD EPYC (512 KB L2 a core, 32 MB
# L3), 2 threads, sources of 1 and 2 MB lost 11% and 17% with the prefetches, 4 MB gained
# 1.45x, 8 MB 2.65x, 64 MB 1.6-2.0x (benchmarks/results/notes.md, "Gathers within rows")
MIN_SOURCE_BYTES = 4 << 20


def gathered_rows(k: Kernel) -> tuple[tuple[str, str, int], ...]:
    """Loads of a pointwise kernel that gather within one row of their input per outer
    step (`x.gather(-1, idx)`: the row of the second innermost loop variable, the column
    a bounds-checked value): (load, the value, the row's extent), for the printer to
    prefetch the next outer step's row while this one is gathered (codegen/cpp_stream.py
    has the note). Only where the gather touches nearly every line of a row (at least
    two elements per line per row) and the rows together reach MIN_SOURCE_BYTES."""
    if k.is_reduction or len(k.loop_vars) < 2 or not all(r.is_Integer for r in k.ranges):
        return ()
    bounded = {s.out: s.index for s in k.body if s.op == "bounded"}
    outer, inner = k.loop_vars[-2], k.loop_vars[-1]
    rows, per_row = int(sympy.Mul(*k.ranges[:-1])), int(k.ranges[-1])   # rows walked in all
    found = []
    for s in k.body:
        if s.op != "load" or s.index is None:
            continue
        index = sympy.sympify(s.index)
        data = [x for x in index.free_symbols if x.name in bounded]
        if len(data) != 1 or not sympy.sympify(bounded[data[0].name]).is_Integer:
            continue
        extent, base = int(bounded[data[0].name]), index.subs(data[0], 0)
        line = LINE_BYTES // s.dtype.itemsize
        if (linear_coeff(index, data[0], index.free_symbols) == 1 and inner not in base.free_symbols
                and outer in base.free_symbols and per_row >= 2 * extent / line
                and rows * extent * s.dtype.itemsize >= MIN_SOURCE_BYTES):
            found.append((s.out, data[0].name, extent))
    return tuple(found)
