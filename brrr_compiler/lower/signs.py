"""Mark the exps whose argument cannot be positive: softmax's and logsumexp's exp(x - max).

Note on the mark. In a row kernel, `x - m` with m the row's max over the same values x
is never positive: float subtraction is monotone, so x <= m gives x - m <= 0 (or NaN,
when a NaN reached the max or x and m are both infinite). Such an exp cannot overflow,
and 2^n for its n = round(arg / ln2) needs one power of two, not two; the C++ printer
then calls the prelude's cheaper `brrr_expf_nonpos` (about 25% fewer vector ops, the
same accuracy). The exp's statement carries `value="nonpositive"`; readers that do not
care (Triton, the evaluator, the cost counter) see a plain exp.

"The same values" is checked structurally: the minuend and the max's operand must be the
same expression tree (loads of the same buffer at the same index, the same ops on them,
the same constants), evaluated at the same point of the row, so the minuend is one of
the values the max folded. A rounding cast of such a difference keeps its sign.
"""
from __future__ import annotations

import dataclasses

from brrr_compiler.kernel_ir import Kernel, Phase, Stmt

NONPOSITIVE = "nonpositive"


def mark_nonpositive_exps(k: Kernel) -> Kernel:
    """`k` with every exp of a provably non-positive argument marked (see the module note)."""
    defs = {s.out: s for s in k.body if s.out is not None}
    keys: dict[str, object] = {}

    def key(name: str):
        if name not in keys:
            s = defs[name]
            if s.op in ("load", "index"):
                keys[name] = (s.op, s.buffer, s.index)
            elif s.op == "const":
                keys[name] = ("const", repr(s.value), s.dtype)
            elif s.op == "reduce":
                keys[name] = ("reduce", name)        # a reduction is only equal to itself
            else:
                keys[name] = (s.op, s.dtype, s.value, tuple(key(a) for a in s.args))
        return keys[name]

    loop_bodies = [p.body for p in k.phases if p.loop]
    maxima = {s.out: key(s.args[0]) for body in loop_bodies for s in body
              if s.op == "reduce" and s.value == "max" and s.dtype.is_floating_point}
    if not maxima:
        return k

    def nonpositive(name: str) -> bool:
        s = defs[name]
        if s.op == "cast" and s.dtype.is_floating_point and defs[s.args[0]].dtype.is_floating_point:
            return nonpositive(s.args[0])
        return (s.op == "sub" and s.args[1] in maxima
                and key(s.args[0]) == maxima[s.args[1]])

    def mark(s: Stmt) -> Stmt:
        if s.op == "exp" and s.dtype.is_floating_point and nonpositive(s.args[0]):
            return dataclasses.replace(s, value=NONPOSITIVE)
        return s

    phases = [Phase(p.loop, [mark(s) for s in p.body], p.once) if p.loop else p
              for p in k.phases]
    return dataclasses.replace(k, phases=phases)
