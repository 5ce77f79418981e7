"""Split a pointwise kernel's innermost loop where a select on it changes side.

Note on the split. cat lowers to every input read at a clamped index (Min/Max in the load
index) and a chain of `where(index < end, ...)` selects (index_rules.cat). Over the whole
cat dim neither the clamps nor the selects make plain contiguous loads, so the C++ loop
does not vectorize. When the innermost loop variable v has a static extent and the kernel
compares an index affine in v with another (a constant), the loop splits at each value of
v where such a comparison changes. Within one piece every comparison is a constant, each
select keeps one side, the clamps resolve to affine indices (interval arithmetic over the
piece's range of v) and the values nothing reads any more (the other inputs' loads) go.
The kernel IR stays one loop: the C++ schedule records the pieces' bounds (CppSchedule.pieces)
and the printer specializes the kernel to each (Triton masks lanes and keeps the clamped
form).
"""
from __future__ import annotations

import dataclasses
import math
import operator
from fractions import Fraction
from typing import Callable, NamedTuple

import sympy
import torch

from brrr_compiler.kernel_ir import Kernel, Stmt

MAX_PIECES = 8          # more than this: one loop (a cat of many small inputs)
_COMPARE = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge}
_KEEP = frozenset({"store", "bounded"})      # statements with an effect


def split_bounds(k: Kernel) -> list[tuple[int, int]]:
    """[(lo, hi)] covering the innermost variable's extent in order, one piece per side
    of every select on it (`specialize` gives the kernel of a piece); [] when the loop
    does not split."""
    if k.is_reduction or len(k.phases) != 1 or not k.loop_vars or not k.ranges[-1].is_Integer:
        return []
    v, n = k.loop_vars[-1], int(k.ranges[-1])
    defs = {s.out: s for s in k.body if s.out}
    cuts = sorted({c for s in k.body if (c := _cut(s, defs, v, n)) is not None})
    if not cuts or len(cuts) + 1 > MAX_PIECES:
        return []
    ends = [0, *cuts, n]
    return list(zip(ends, ends[1:]))


def _affine(e: sympy.Expr, v: sympy.Symbol) -> tuple[int, int] | None:
    """(c, d) with e == c*v + d for integers c, d; None if e is not of that form."""
    e = sympy.expand(e)
    c = e.coeff(v)
    d = e - c * v
    return (int(c), int(d)) if c.is_Integer and d.is_Integer else None


def _operand(s: Stmt | None, v: sympy.Symbol) -> tuple[int, int] | None:
    """An index statement affine in v, or an integer constant, as (c, d)."""
    if s is None or s.dtype.is_floating_point or s.dtype is torch.bool:
        return None
    if s.op == "index":
        return _affine(s.index, v)
    if s.op == "const" and isinstance(s.value, int):
        return 0, s.value
    return None


class _Compare(NamedTuple):
    """A comparison of two operands affine in v, true at v when op(c*v + d, 0): monotone
    in v, so it changes at most once along the loop."""
    c: int
    d: int
    op: Callable[[int, int], bool]

    def at(self, x: int) -> bool:
        return self.op(self.c * x + self.d, 0)

    def cut(self, n: int) -> int | None:
        """The value of v in (0, n) from which the truth changes, if any."""
        if self.c == 0:
            return None
        x = math.floor(Fraction(-self.d, self.c))
        return next((at for at in (x, x + 1) if 0 < at < n and self.at(at) != self.at(at - 1)),
                    None)


def _compare(s: Stmt, defs: dict, v: sympy.Symbol) -> _Compare | None:
    if s.op not in _COMPARE:
        return None
    a, b = (_operand(defs.get(x), v) for x in s.args)
    if a is None or b is None:
        return None
    return _Compare(a[0] - b[0], a[1] - b[1], _COMPARE[s.op])


def _cut(s: Stmt, defs: dict, v: sympy.Symbol, n: int) -> int | None:
    cmp = _compare(s, defs, v)
    return cmp.cut(n) if cmp is not None else None


def specialize(k: Kernel, v: sympy.Symbol, lo: int, hi: int) -> Kernel:
    """`k` for lo <= v < hi: comparisons folded to constants, selects resolved, clamps
    in indices resolved where the range decides them, dead statements dropped."""
    defs = {s.out: s for s in k.body if s.out}
    known, rename, body = {}, {}, []
    for s in k.body:
        s = dataclasses.replace(s, args=tuple(rename.get(a, a) for a in s.args))
        cmp = _compare(s, defs, v)
        if cmp is not None and cmp.at(lo) == cmp.at(hi - 1):
            known[s.out] = cmp.at(lo)
            s = Stmt(s.out, s.dtype, "const", value=known[s.out])
        elif s.op == "where" and s.args[0] in known:
            pick = s.args[1] if known[s.args[0]] else s.args[2]
            if defs[pick].dtype == s.dtype:
                rename[s.out] = pick
                continue
        if s.index is not None and s.index.has(sympy.Min, sympy.Max):
            s = dataclasses.replace(s, index=sympy.expand(_resolve(s.index, v, lo, hi)))
        body.append(s)
    return dataclasses.replace(k, phases=[dataclasses.replace(k.phases[0], body=_live(body))])


def _span(e: sympy.Expr, v: sympy.Symbol, lo: int, hi: int) -> tuple[int, int] | None:
    """The least and greatest value of e (affine in v alone) over lo <= v < hi."""
    cd = _affine(e, v)
    if cd is None:
        return None
    ends = (cd[0] * lo + cd[1], cd[0] * (hi - 1) + cd[1])
    return min(ends), max(ends)


def _resolve(e: sympy.Expr, v: sympy.Symbol, lo: int, hi: int) -> sympy.Expr:
    """e with every Min/Max argument that the range of v shows never to be picked dropped
    (innermost first)."""
    if not e.args:
        return e
    e = e.func(*(_resolve(a, v, lo, hi) for a in e.args))
    if not isinstance(e, (sympy.Min, sympy.Max)):
        return e
    sign = 1 if isinstance(e, sympy.Min) else -1
    kept = list(e.args)
    for a in e.args:        # a goes if another kept b is never past it (b <= a for Min)
        if any(b != a and (s := _span(sign * (b - a), v, lo, hi)) and s[1] <= 0 for b in kept):
            kept.remove(a)
    return e.func(*kept)


def _live(body: list[Stmt]) -> list[Stmt]:
    """`body` less the statements whose values nothing reads (stores and bound checks
    stay: they have effects)."""
    used, out = set(), []
    for s in reversed(body):
        if s.op in _KEEP or s.out in used:
            out.append(s)
            used.update(s.args)
            if s.index is not None:
                used.update(x.name for x in s.index.free_symbols)
    return out[::-1]
