"""KernelStats from the kernel IR: the statements codegen prints, counted.

A statement in a scalar phase runs once per outer point (row); in a loop phase once per
point of the whole domain. A buffer's footprint is what its accesses touch: per distinct
index expression, the product of the extents of the loop variables it uses (a stride-0
broadcast drops a variable), summed over the expressions and capped by the largest index
touched plus one (x and x.t() read the same elements). A buffer loaded at a full-domain
index in k loop phases is re-read k - 1 times.
"""
from __future__ import annotations

import sympy

from brrr_compiler.cost.stats import KernelStats, as_int, itemsize, op_cost, prod
from brrr_compiler.kernel_ir import Kernel

NO_WORK = frozenset({"load", "store", "const", "cast", "index"})


def _footprint(indices, extents: dict, hints: dict | None) -> int:
    """Elements touched by accesses at `indices` over variables with `extents`."""
    per_index, largest = 0, 0
    for e in indices:
        used = [v for v in e.free_symbols if v in extents]
        per_index += prod(extents[v] for v in used)
        top = e.xreplace({v: sympy.Integer(extents[v] - 1) for v in used})
        largest = max(largest, as_int(top, hints) + 1)
    return min(per_index, largest)


def _accesses(kernel: Kernel):
    """buffer -> (set of index expressions, set of loop phases loading it at full index)."""
    red = set(kernel.reduction_vars)
    out: dict = {}
    for k, phase in enumerate(kernel.phases):
        for s in phase.body:
            if s.op not in ("load", "store"):
                continue
            idx, phases = out.setdefault(s.buffer, (set(), set()))
            idx.add(sympy.expand(s.index))
            if phase.loop and s.index.free_symbols & red:
                phases.add(k)
    return out


def kernel_stats(kernel: Kernel, hints: dict | None = None) -> KernelStats:
    """What `kernel` computes and moves; `hints` gives numbers for symbolic sizes."""
    rows = prod(as_int(r, hints) for r in kernel.ranges)
    red = prod(as_int(r, hints) for r in kernel.reduction_ranges)
    stats = KernelStats(points=rows * red, rows=rows)
    for phase in kernel.phases:
        count = rows * red if phase.loop else rows
        for s in phase.body:
            if s.op in NO_WORK:
                continue
            cost = op_cost(s.value, True) if s.op == "reduce" else op_cost(s.op)
            stats.add_op(cost, s.dtype, count)
    extents = {v: as_int(r, hints) for v, r in zip(kernel.loop_vars, kernel.ranges)}
    extents.update({v: as_int(r, hints) for v, r in
                    zip(kernel.reduction_vars, kernel.reduction_ranges)})
    dtypes = {b.name: b.dtype for b in kernel.buffers}
    outputs = {b.name for b in kernel.outputs}
    for name, (indices, loop_phases) in _accesses(kernel).items():
        nbytes = _footprint(indices, extents, hints) * itemsize(dtypes[name])
        if name in outputs:
            stats.bytes_written += nbytes
            continue
        stats.bytes_read += nbytes
        if len(loop_phases) > 1:
            stats.reread_bytes += (len(loop_phases) - 1) * nbytes
            stats.reread_row_bytes += red * itemsize(dtypes[name])
    return stats
