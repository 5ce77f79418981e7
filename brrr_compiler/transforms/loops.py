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

from brrr_compiler.kernel_ir import ARG_FOLDS, Kernel, Stmt, loop_symbol, reduction_symbol
from brrr_compiler.symbolic import free_symbols


def linear_coeff(expr: sympy.Expr, var: sympy.Symbol, all_vars) -> sympy.Expr | None:
    """d(expr)/d(var) if expr is linear in var with a loop-invariant coefficient."""
    return _linear_coeff(expr, var, frozenset(all_vars))


@functools.lru_cache(maxsize=1 << 14)     # asked again of each access for each pair of loops
def _linear_coeff(expr: sympy.Expr, var: sympy.Symbol, all_vars: frozenset):
    c = sympy.expand(expr).coeff(var)
    rest = sympy.expand(expr - c * var)
    if c.free_symbols & all_vars or var in rest.free_symbols:
        return None
    return c


class _Loops:
    """The loop variables and ranges of a kernel and its distinct index expressions, as
    the transforms below rewrite them; the statements are rewritten once, at the end
    (a kernel holds few distinct indices and many statements, and the cost policy
    simplifies each candidate group's loops)."""

    def __init__(self, kernel: Kernel):
        self.loop_vars, self.ranges = list(kernel.loop_vars), list(kernel.ranges)
        self.reduction_vars = list(kernel.reduction_vars)
        self.reduction_ranges = list(kernel.reduction_ranges)
        # original index -> its current form, in the order the statements first use it
        self.index = {s.index: s.index for s in kernel.accesses()}

    def vars(self, reduction: bool):
        if reduction:
            return self.reduction_vars, self.reduction_ranges, reduction_symbol
        return self.loop_vars, self.ranges, loop_symbol

    def all_vars(self) -> frozenset:
        return frozenset(self.loop_vars) | frozenset(self.reduction_vars)

    def set_vars(self, reduction: bool, vars_, ranges, mapping: dict) -> None:
        """New variables and ranges, with `mapping` applied (simultaneously) to every
        index expression."""
        if reduction:
            self.reduction_vars, self.reduction_ranges = list(vars_), list(ranges)
        else:
            self.loop_vars, self.ranges = list(vars_), list(ranges)
        mapping = {k: v for k, v in mapping.items() if k != v}
        if not mapping:
            return
        keys, items = set(mapping), tuple(mapping.items())
        for orig, cur in self.index.items():
            if free_symbols(cur) & keys:
                self.index[orig] = _substituted(cur, items)

    def apply(self, kernel: Kernel) -> Kernel:
        def sub(s: Stmt) -> Stmt:
            if s.index is None or self.index[s.index] is s.index:
                return s
            return dataclasses.replace(s, index=self.index[s.index])
        phases = [dataclasses.replace(p, body=[sub(s) for s in p.body]) for p in kernel.phases]
        return dataclasses.replace(kernel, phases=phases, loop_vars=self.loop_vars,
                                   ranges=self.ranges, reduction_vars=self.reduction_vars,
                                   reduction_ranges=self.reduction_ranges)


@functools.lru_cache(maxsize=1 << 15)
def _substituted(expr: sympy.Expr, items: tuple) -> sympy.Expr:
    """`expr` with the (variable, replacement) `items` applied, expanded. The cost policy
    lowers a node's accesses again in every candidate group that holds it, and the loop
    transforms rename them the same way each time."""
    return sympy.expand(expr.xreplace(dict(items)))


def _rename(loops: _Loops, reduction: bool, keep: list[int], extra: dict) -> None:
    """Keep dims `keep` (in that order), renumbered; `extra` substitutes the others
    (one simultaneous substitution, so swapping two variables needs no temporaries)."""
    old, ranges, symbol = loops.vars(reduction)
    mapping = {**extra, **{old[d]: symbol(k) for k, d in enumerate(keep)}}
    loops.set_vars(reduction, [symbol(k) for k in range(len(keep))],
                   [ranges[d] for d in keep], mapping)


def _as_number(x) -> float:
    try:
        return float(x)
    except TypeError:
        return float("inf")     # symbolic strides are large


def _load_strides(loops: _Loops, vars_) -> list:
    """Per var, its coefficient in the first access that uses it (for ordering)."""
    out, all_vars = [], loops.all_vars()
    for v in vars_:
        c = next((_linear_coeff(e, v, all_vars) for e in loops.index.values()
                  if v in free_symbols(e)), None)
        out.append(c if c is not None else 0)
    return out


def _reorder(loops: _Loops, reduction: bool, strides) -> None:
    vars_, ranges, _ = loops.vars(reduction)
    dims = [d for d, r in enumerate(ranges) if r != 1]
    dims.sort(key=lambda d: -_as_number(strides[d]) if d < len(strides) else 0)
    zero = {v: sympy.Integer(0) for d, v in enumerate(vars_) if d not in dims}
    _rename(loops, reduction, dims, zero)


def _can_collapse(loops: _Loops, reduction: bool, k: int) -> bool:
    vars_, ranges, _ = loops.vars(reduction)
    a, b, nb, all_vars = vars_[k], vars_[k + 1], ranges[k + 1], loops.all_vars()
    return all(_collapsible(e, a, b, nb, all_vars) for e in loops.index.values())


@functools.lru_cache(maxsize=1 << 14)
def _collapsible(index: sympy.Expr, a, b, nb, all_vars: frozenset) -> bool:
    """Whether `index` walks `a` as one loop with `b` (a's step is b's times b's extent)."""
    ca = _linear_coeff(index, a, all_vars)
    cb = _linear_coeff(index, b, all_vars)
    return ca is not None and cb is not None and sympy.expand(ca - cb * nb) == 0


def _collapse(loops: _Loops, reduction: bool, k: int) -> None:
    """Merge var k into var k+1 (which then walks both extents), then renumber."""
    vars_, ranges, _ = loops.vars(reduction)
    new_vars = list(vars_[:k]) + list(vars_[k + 1:])
    new_ranges = list(ranges[:k]) + [ranges[k] * ranges[k + 1]] + list(ranges[k + 2:])
    loops.set_vars(reduction, new_vars, new_ranges, {vars_[k]: sympy.Integer(0)})
    _rename(loops, reduction, list(range(len(new_vars))), {})


def _collapse_all(loops: _Loops, reduction: bool) -> None:
    k = len(loops.vars(reduction)[0]) - 2
    while k >= 0:
        if _can_collapse(loops, reduction, k):
            _collapse(loops, reduction, k)
        k -= 1


def simplify_loops(kernel: Kernel, out_strides) -> Kernel:
    loops = _Loops(kernel)
    _reorder(loops, False, out_strides)
    if loops.reduction_vars:
        _reorder(loops, True, _load_strides(loops, loops.reduction_vars))
        _collapse_all(loops, True)
    _collapse_all(loops, False)
    return loops.apply(kernel)


def reduces_outer_dim(kernel: Kernel, arg_folds: bool = True) -> bool:
    """True when the innermost kept dim is contiguous and the reduced dims are not (a sum
    over dim 0 of a row-major matrix): the schedule stage then picks the columns schedule,
    which tiles columns and streams rows (lowering asks too: that schedule keeps no
    scratch). Never for a kernel that folds across rows (a loss's sum, column folds): only the row
    schedule keeps per-thread partials (partition/domains.py); over a transposed input it
    walks rows at a stride, the lines a row touches staying in cache for the next rows."""
    if (not kernel.loop_vars or not kernel.reduction_vars or kernel.folds_columns
            or kernel.folds_across):
        return False
    if not arg_folds and any(s.op == "reduce" and s.value in ARG_FOLDS
                             for s in kernel.body):
        return False        # Triton's column printer keeps no index (schedule/triton.py)
    inner, red = kernel.loop_vars[-1], kernel.reduction_vars[-1]
    # the first load (else store) that steps along both: one that the columns do not move
    # (an input expanded along them) is read once per row either way, and says nothing
    # (pattern seed 15: a norm over dims (1, 0) walked 512 columns at a 4 KB stride,
    # because its first load was such an input, contiguous along the reduced dim)
    for op in ("load", "store"):
        for s in kernel.body:
            if s.op != op or red not in s.index.free_symbols:
                continue
            ci = linear_coeff(s.index, inner, kernel.all_vars())
            if ci != 0:
                return _columns_step_less(ci, linear_coeff(s.index, red, kernel.all_vars()))
    return False


def _columns_step_less(ci, cr) -> bool:
    """Does the access step less along the columns (`ci`) than along the reduced dim
    (`cr`)? Where a stride is symbolic or not linear, only a unit column step counts (a
    strided input of stride 2 along the columns and 128 along the reduction walked rows
    at 128 floats apart, 2.3x slower than eager: generated pattern seed 29)."""
    if ci is None or cr is None:
        return ci == 1 and cr != 1
    try:
        return bool(abs(ci) < abs(cr))
    except TypeError:
        return ci == 1 and cr != 1


def inner_varying(body: list[Stmt], inner: str) -> set[str]:
    """The SSA values of `body` (in body order) that change along the loop variable named
    `inner`: an index that names it, and whatever is computed from such a value (an index
    naming one included). Hoisting (transforms/hoist.py) and the unswitched selects
    (schedule/cpp.py) both move or test only the others."""
    return _reaching(body, lambda s, names: inner in names)


def loop_dependent(body: list[Stmt]) -> set[str]:
    """The SSA values of `body` that depend on a loop variable or on memory (a load, a
    fold); the others are constants (a mean's count and its cast to float)."""
    return _reaching(body, lambda s, names: bool(names) or s.op in ("load", "reduce",
                                                                      "column_reduce"))


def reads_buffers(body: list[Stmt], buffers: set[str]) -> set[str]:
    """The SSA values of `body` computed from a load of one of `buffers` (a kernel's own
    outputs: such a value may change within a row, so it is neither hoisted nor tested
    once per row)."""
    return _reaching(body, lambda s, names: s.op == "load" and s.buffer in buffers)


def _reaching(body: list[Stmt], seed) -> set[str]:
    """The values `seed(stmt, names in its index)` picks and every value computed from
    them, through arguments or index expressions."""
    found: set[str] = set()
    for s in body:
        names = {x.name for x in sympy.sympify(s.index).free_symbols} \
            if s.index is not None else set()
        if s.out is not None and (seed(s, names) or names & found
                                  or any(a in found for a in s.args)):
            found.add(s.out)
    return found
