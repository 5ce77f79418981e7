"""Mark the exps whose argument cannot be positive: softmax's exp(x - max), GELU's exp(-x²/2).

Note on the mark. An exp of an argument known to be <= 0 (or NaN) cannot overflow, and
2^n for its n = round(arg / ln2) needs one power of two, not two; the C++ printer then
calls the prelude's cheaper `brrr_expf_nonpos` (about 25% fewer vector ops, the same
accuracy). The exp's statement carries `value="nonpositive"`; readers that do not care
(Triton, the evaluator, the cost counter) see a plain exp.

Signs come from one pass over the statements in order (SSA: arguments come first), each
value found non-negative, non-positive or neither. "Non-negative" and "non-positive"
always admit NaN, so no rule needs to care about it: a square and the scalar ops the
table marks `nonnegative` (abs, exp, sqrt, sigmoid) are non-negative; constants have their sign; neg flips it; a product of two known
signs has their product's sign, and a sum of two alike keeps it, as does a
floating-point cast (rounding keeps the sign); a - b is non-positive when a is and b is
non-negative, and when b is the row's max of a itself: float subtraction is monotone, so
x <= m gives x - m <= 0. "a itself" is checked structurally: the same expression tree
(loads of the same buffer at the same index, the same ops, the same constants) evaluated
at the same point of the row, so the minuend is one of the values the max folded.
"""
from __future__ import annotations

import dataclasses

from brrr_compiler import scalar_ops
from brrr_compiler.kernel_ir import Kernel, Phase, Stmt
from brrr_compiler.scalar_ops import NONPOSITIVE


def mark_nonpositive_exps(k: Kernel) -> Kernel:
    """`k` with every exp of a provably non-positive argument marked (see the module note)."""
    signs = _Signs(k)
    if not any(s.op == "exp" and s.args[0] in signs.nonpos for s in k.body):
        return k

    def mark(s: Stmt) -> Stmt:
        if s.op == "exp" and s.dtype.is_floating_point and s.args[0] in signs.nonpos:
            return dataclasses.replace(s, value=NONPOSITIVE)
        return s

    return dataclasses.replace(k, phases=[Phase(p.loop, [mark(s) for s in p.body], p.once)
                                          for p in k.phases])


def known_signs(k: Kernel) -> frozenset:
    """The float values of `k` known non-negative or known non-positive (NaN admitted)."""
    signs = _Signs(k)
    return frozenset(signs.nonneg | signs.nonpos)


class _Signs:
    def __init__(self, k: Kernel):
        self.defs = {s.out: s for s in k.body if s.out is not None}
        self.keys: dict[str, object] = {}
        self.maxima = {s.out: self.key(s.args[0]) for p in k.phases if p.per_row_loop for s in p.body
                       if s.op == "reduce" and s.value == "max" and s.dtype.is_floating_point}
        # x - max(x) is only known <= 0 where some x was folded: inside a loop phase (a
        # later phase may see the max of an empty row, -inf)
        self.in_loop = {s.out for p in k.phases if p.per_row_loop for s in p.body if s.out is not None}
        self.nonneg: set[str] = set()
        self.nonpos: set[str] = set()
        for s in k.body:
            if s.out is not None and s.dtype.is_floating_point:
                if self._nonneg(s):
                    self.nonneg.add(s.out)
                if self._nonpos(s):
                    self.nonpos.add(s.out)

    def key(self, name: str):
        """A structural key: equal keys, equal values at the same point of the row."""
        if name not in self.keys:
            s = self.defs[name]
            if s.op in ("load", "index"):
                self.keys[name] = (s.op, s.buffer, s.index)
            elif s.op == "const":
                self.keys[name] = ("const", repr(s.value), s.dtype)
            elif s.op == "reduce":
                self.keys[name] = ("reduce", name)       # a reduction is only equal to itself
            else:
                self.keys[name] = (s.op, s.dtype, s.value, tuple(self.key(a) for a in s.args))
        return self.keys[name]

    def _float_cast(self, s: Stmt) -> bool:
        return s.op == "cast" and self.defs[s.args[0]].dtype.is_floating_point

    def _nonneg(self, s: Stmt) -> bool:
        a = s.args
        if s.op == "const":
            return isinstance(s.value, (int, float)) and s.value >= 0
        if s.op in scalar_ops.TABLE and scalar_ops.TABLE[s.op].nonnegative:
            return True
        if s.op == "mul":
            return a[0] == a[1] or self._same_sign(a[0], a[1])
        if s.op == "add":
            return a[0] in self.nonneg and a[1] in self.nonneg
        if s.op == "neg":
            return a[0] in self.nonpos
        return self._float_cast(s) and a[0] in self.nonneg

    def _nonpos(self, s: Stmt) -> bool:
        a = s.args
        if s.op == "const":
            return isinstance(s.value, (int, float)) and s.value <= 0
        if s.op == "mul":
            return ((a[0] in self.nonneg and a[1] in self.nonpos)
                    or (a[0] in self.nonpos and a[1] in self.nonneg))
        if s.op == "add":
            return a[0] in self.nonpos and a[1] in self.nonpos
        if s.op == "sub":
            return ((a[0] in self.nonpos and a[1] in self.nonneg)
                    or (a[1] in self.maxima and s.out in self.in_loop
                        and self.key(a[0]) == self.maxima[a[1]]))
        if s.op == "neg":
            return a[0] in self.nonneg
        return self._float_cast(s) and a[0] in self.nonpos

    def _same_sign(self, x: str, y: str) -> bool:
        return (x in self.nonneg and y in self.nonneg) or (x in self.nonpos and y in self.nonpos)
