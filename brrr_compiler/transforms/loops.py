"""Loop simplification on the kernel IR: order loops for memory, collapse dims.

Outer loops are ordered by the first output's strides (largest outermost), so stores
walk memory forward; reduction loops by the strides of the first load that uses them.
Unit-extent loops disappear. Two adjacent loops of one kind (a outer, b inner) collapse
into one when every access is linear in both and a's coefficient equals b's times b's
extent — then `ca*a + cb*b == cb*(a*nb + b)` and one variable walks both. A contiguous
4096x4096 pointwise kernel becomes one loop of 16M iterations.
"""
from __future__ import annotations

import dataclasses
import functools

import sympy

from brrr_compiler.kernel_ir import Kernel, Stmt, loop_symbol, reduction_symbol
from brrr_compiler.symbolic import free_symbols


def linear_coeff(expr: sympy.Expr, var: sympy.Symbol, all_vars) -> sympy.Expr | None:
    """d(expr)/d(var) if expr is linear in var with a loop-invariant coefficient."""
    return _linear_coeff(expr, var, frozenset(all_vars))


@functools.lru_cache(maxsize=4096)     # asked again of each access for each pair of loops
def _linear_coeff(expr: sympy.Expr, var: sympy.Symbol, all_vars: frozenset):
    c = sympy.expand(expr).coeff(var)
    rest = sympy.expand(expr - c * var)
    if c.free_symbols & all_vars or var in rest.free_symbols:
        return None
    return c


def _substitute(kernel: Kernel, mapping: dict, **changes) -> Kernel:
    """`kernel` with `mapping` applied (simultaneously) to every index expression."""
    mapping = {k: v for k, v in mapping.items() if k != v}
    keys = set(mapping)

    def sub(s: Stmt) -> Stmt:
        if s.index is None or not free_symbols(s.index) & keys:
            return s
        return dataclasses.replace(s, index=sympy.expand(s.index.xreplace(mapping)))
    if not mapping:
        return dataclasses.replace(kernel, **changes)
    phases = [dataclasses.replace(p, body=[sub(s) for s in p.body]) for p in kernel.phases]
    return dataclasses.replace(kernel, phases=phases, **changes)


def _vars(kernel: Kernel, reduction: bool):
    if reduction:
        return kernel.reduction_vars, kernel.reduction_ranges, reduction_symbol
    return kernel.loop_vars, kernel.ranges, loop_symbol


def _with_vars(kernel: Kernel, reduction: bool, vars_, ranges, mapping) -> Kernel:
    key = ("reduction_vars", "reduction_ranges") if reduction else ("loop_vars", "ranges")
    return _substitute(kernel, mapping, **{key[0]: vars_, key[1]: ranges})


def _rename(kernel: Kernel, reduction: bool, keep: list[int], extra: dict) -> Kernel:
    """Keep dims `keep` (in that order), renumbered; `extra` substitutes the others
    (one simultaneous substitution, so swapping two variables needs no temporaries)."""
    old, ranges, symbol = _vars(kernel, reduction)
    mapping = {**extra, **{old[d]: symbol(k) for k, d in enumerate(keep)}}
    return _with_vars(kernel, reduction, [symbol(k) for k in range(len(keep))],
                      [ranges[d] for d in keep], mapping)


def _as_number(x) -> float:
    try:
        return float(x)
    except TypeError:
        return float("inf")     # symbolic strides are large


def _load_strides(kernel: Kernel, vars_) -> list:
    """Per var, its coefficient in the first access that uses it (for ordering)."""
    out = []
    for v in vars_:
        c = next((linear_coeff(s.index, v, kernel.all_vars()) for s in kernel.accesses()
                  if v in s.index.free_symbols), None)
        out.append(c if c is not None else 0)
    return out


def _reorder(kernel: Kernel, reduction: bool, strides) -> Kernel:
    vars_, ranges, _ = _vars(kernel, reduction)
    dims = [d for d, r in enumerate(ranges) if r != 1]
    dims.sort(key=lambda d: -_as_number(strides[d]) if d < len(strides) else 0)
    zero = {v: sympy.Integer(0) for d, v in enumerate(vars_) if d not in dims}
    return _rename(kernel, reduction, dims, zero)


def _can_collapse(kernel: Kernel, reduction: bool, k: int) -> bool:
    vars_, ranges, _ = _vars(kernel, reduction)
    a, b, nb = vars_[k], vars_[k + 1], ranges[k + 1]
    for s in kernel.accesses():
        ca = linear_coeff(s.index, a, kernel.all_vars())
        cb = linear_coeff(s.index, b, kernel.all_vars())
        if ca is None or cb is None or sympy.expand(ca - cb * nb) != 0:
            return False
    return True


def _collapse(kernel: Kernel, reduction: bool, k: int) -> Kernel:
    """Merge var k into var k+1 (which then walks both extents), then renumber."""
    vars_, ranges, _ = _vars(kernel, reduction)
    new_vars = list(vars_[:k]) + list(vars_[k + 1:])
    new_ranges = list(ranges[:k]) + [ranges[k] * ranges[k + 1]] + list(ranges[k + 2:])
    kernel = _with_vars(kernel, reduction, new_vars, new_ranges, {vars_[k]: sympy.Integer(0)})
    return _rename(kernel, reduction, list(range(len(new_vars))), {})


def _collapse_all(kernel: Kernel, reduction: bool) -> Kernel:
    k = len(_vars(kernel, reduction)[0]) - 2
    while k >= 0:
        if _can_collapse(kernel, reduction, k):
            kernel = _collapse(kernel, reduction, k)
        k -= 1
    return kernel


def simplify_loops(kernel: Kernel, out_strides) -> Kernel:
    kernel = _reorder(kernel, False, out_strides)
    if kernel.reduction_vars:
        kernel = _reorder(kernel, True, _load_strides(kernel, kernel.reduction_vars))
        kernel = _collapse_all(kernel, True)
    return _collapse_all(kernel, False)


def reduces_outer_dim(kernel: Kernel) -> bool:
    """True when the innermost kept dim is contiguous and the reduced dims are not (a sum
    over dim 0 of a row-major matrix): the schedule stage then picks the columns schedule,
    which tiles columns and streams rows (lowering asks too: that schedule keeps no
    scratch). Never for a kernel that folds across rows (a loss's sum, column folds): only the row
    schedule keeps per-thread partials (partition/domains.py); over a transposed input it
    walks rows at a stride, the lines a row touches staying in cache for the next rows."""
    if (not kernel.loop_vars or not kernel.reduction_vars or kernel.folds_columns
            or kernel.folds_across):
        return False
    if any(s.op == "reduce" and s.value in ("argmax", "argmin") for s in kernel.body):
        return False
    inner, red = kernel.loop_vars[-1], kernel.reduction_vars[-1]
    for s in kernel.body:
        if s.op == "load" and red in s.index.free_symbols:
            ci = linear_coeff(s.index, inner, kernel.all_vars())
            cr = linear_coeff(s.index, red, kernel.all_vars())
            return ci == 1 and cr != 1
    return False
