"""Index expressions as C++: sympy integer expressions in int64 arithmetic."""
from __future__ import annotations

import sympy


def cexpr(e: sympy.Expr) -> str:
    """A sympy integer expression as C++ (int64 arithmetic)."""
    e = sympy.sympify(e)
    if e.is_Integer:
        v = int(e)
        return f"INT64_C({v})" if abs(v) >= 2**31 else str(v)
    if e.is_Symbol:
        return e.name
    if isinstance(e, sympy.Add):
        return "(" + " + ".join(cexpr(a) for a in _ordered(e.args)) + ")"
    if isinstance(e, sympy.Mul):
        return "*".join(cexpr(a) for a in _ordered(e.args))
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
        return "(" + "*".join([cexpr(e.base)] * int(e.exp)) + ")"     # s**2: a square input
    if isinstance(e, sympy.floor):      # of a nonnegative index (transforms/period.py)
        num, den = e.args[0].as_numer_denom()
        return f"({cexpr(num)} / {cexpr(den)})"
    if isinstance(e, sympy.Mod):
        return f"({cexpr(e.args[0])} % {cexpr(e.args[1])})"
    if isinstance(e, (sympy.Min, sympy.Max)):
        fn = "brrr_min_i64" if isinstance(e, sympy.Min) else "-brrr_min_i64"
        if isinstance(e, sympy.Max):
            return f"(-brrr_min_i64(-{cexpr(e.args[0])}, -{cexpr(_max_rest(e))}))"
        return f"{fn}({cexpr(e.args[0])}, {cexpr(sympy.Min(*e.args[1:]))})"
    raise NotImplementedError(f"brrr: cannot print index expression {e}")


def _max_rest(e):
    return sympy.Max(*e.args[1:]) if len(e.args) > 2 else e.args[1]


def _ordered(args):
    return sorted(args, key=lambda a: (a.is_number, str(a)))
