"""Triton statements: values, their masks and their expressions, for the kernel printers.

Shared by triton.py (pointwise kernels) and triton_reduce.py (reductions). A value lives
in registers in its op-math type (float16/bfloat16 widened to float32); each SSA value is
one line whose right-hand side is its op's Triton form from the scalar-op table
(scalar_ops.py). Every load and store is masked by the masks of the index variables it
uses (x: the outer domain, y: the outer rows of a 2-D tile, r: the reduced domain), so
the ragged edges of a block never touch memory and a row-level value is loaded once per
row, not per lane.
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler import scalar_ops
from brrr_compiler.kernel_ir import Kernel, Stmt

TL = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int8: "tl.int8", torch.uint8: "tl.uint8",
    torch.int16: "tl.int16", torch.int32: "tl.int32", torch.int64: "tl.int64",
    torch.bool: "tl.int1",
}
LOW_PRECISION = (torch.float16, torch.bfloat16)
GROUPS = ("y", "x", "r")                 # mask order in printed conjunctions


def reg(dtype: torch.dtype) -> str:
    """The Triton type a value of IR dtype `dtype` has in registers."""
    return "tl.float32" if dtype in LOW_PRECISION else TL[dtype]


# ---- index expressions ---------------------------------------------------------------

def texpr(e, host: bool = False) -> str:
    """A sympy integer expression as Triton (device) or Python (host) text."""
    e = sympy.sympify(e)
    if e.is_Integer:
        return str(int(e))
    if e.is_Symbol:
        return e.name
    if isinstance(e, sympy.Add):
        return "(" + " + ".join(texpr(a, host) for a in _ordered(e.args)) + ")"
    if isinstance(e, sympy.Mul):
        return "*".join(texpr(a, host) for a in _ordered(e.args))
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
        return "(" + "*".join([texpr(e.base, host)] * int(e.exp)) + ")"
    if isinstance(e, (sympy.Min, sympy.Max)):
        fn = ("min" if isinstance(e, sympy.Min) else "max") if host else \
            ("tl.minimum" if isinstance(e, sympy.Min) else "tl.maximum")
        first, rest = e.args[0], type(e)(*e.args[1:])
        return f"{fn}({texpr(first, host)}, {texpr(rest, host)})"
    raise NotImplementedError(f"brrr: the Triton printer cannot print index expression {e}")


def _ordered(args):
    return sorted(args, key=lambda a: (a.is_number, str(a)))


# ---- scalar statements ---------------------------------------------------------------

def literal(value, dtype: torch.dtype) -> str:
    if dtype is torch.bool:
        return "1" if value else "0"
    if dtype.is_floating_point:
        if value != value:
            return 'float("nan")'
        if value in (float("inf"), float("-inf")):
            return 'float("-inf")' if value < 0 else 'float("inf")'
        return repr(float(value))
    return str(int(value))


def round_low(x: str, dst: torch.dtype) -> str:
    """float32 `x` rounded to float16/bfloat16 (ties to even, as eager), kept in float32.
    bfloat16 rounds by its bits: Triton's interpreter truncates a plain .to(tl.bfloat16)."""
    if dst is torch.bfloat16:
        return f"_brrr_round_bf16({x})"
    return f"{x}.to(tl.float16).to(tl.float32)"


def cast_expr(x: str, src: torch.dtype, dst: torch.dtype) -> str:
    if dst is torch.bool:
        return f"{x} != 0"
    if dst in LOW_PRECISION:
        return f"{round_low(x if reg(src) == 'tl.float32' else f'{x}.to(tl.float32)', dst)}"
    if reg(src) == TL[dst]:
        return x
    return f"{x}.to({TL[dst]})"


def op_expr(op: str, a: list[str], dt: torch.dtype) -> str:
    """Right-hand side of a scalar op whose operands have IR dtype `dt`: its Triton form
    from the scalar-op table (scalar_ops.py)."""
    row = scalar_ops.TABLE.get(op)
    form = row.triton.template(dt) if row and row.accepts(dt) else None
    if form is None:
        raise NotImplementedError(
            f"brrr: the Triton printer has no rule for scalar op {op!r} on {dt}")
    return form.format(*a, reg=reg(dt))


class Body:
    """Prints a kernel's statements: masks from the groups (x, y, r) each value varies in."""

    def __init__(self, k: Kernel, var_groups: dict):
        self.k = k
        self.dtypes = {s.out: s.dtype for s in k.body if s.out}
        self.var_groups = {v.name: g for v, g in var_groups.items()}
        self.groups: dict[str, frozenset] = {}

    def groups_of_expr(self, e) -> frozenset:
        out = set()
        for s in sympy.sympify(e).free_symbols:
            if s.name in self.var_groups:
                out.add(self.var_groups[s.name])
            out |= self.groups.get(s.name, frozenset())
        return frozenset(out)

    def groups_of_args(self, args) -> frozenset:
        return frozenset().union(*[self.groups.get(a, frozenset()) for a in args])

    @staticmethod
    def mask(groups) -> str | None:
        names = [f"{g}mask" for g in GROUPS if g in groups]
        return " & ".join(names) if names else None

    def load(self, s: Stmt) -> str:
        g = self.groups_of_expr(s.index)
        self.groups[s.out] = g
        m = self.mask(g)
        x = f"tl.load({s.buffer} + {texpr(s.index)}" + (f", mask={m}, other=0)" if m else ")")
        if s.dtype in LOW_PRECISION:
            x += ".to(tl.float32)"
        return f"{s.out} = {x}"

    def store(self, s: Stmt) -> str:
        v = s.args[0]
        g = self.groups_of_expr(s.index)
        index = texpr(s.index)
        for missing in sorted(self.groups.get(v, frozenset()) - g):
            index += f" + 0*{missing}index"          # a pointer as wide as the value
        g |= self.groups.get(v, frozenset())
        if s.dtype is torch.bfloat16:
            v = f"_brrr_round_bf16({v}).to(tl.bfloat16)"
        elif s.dtype is torch.float16:
            v = f"{v}.to(tl.float16)"
        m = self.mask(g)
        return f"tl.store({s.buffer} + {index}, {v}" + (f", mask={m})" if m else ")")

    def bounded(self, s: Stmt) -> list[str]:
        """Clamp an indirect index into [0, n) and flag the kernel's error word if not."""
        x, n = s.args[0], texpr(s.index)
        g = self.groups.get(x, frozenset())
        self.groups[s.out] = g
        ok = f"ok_{s.out}"
        bad = f"({ok} == 0)" + (f" & {self.mask(g)}" if g else "")
        return [f"{ok} = ({x} >= 0) & ({x} < {n})",
                f"tl.store(err + {x} * 0, 1, mask={bad})",
                f"{s.out} = tl.where({ok}, {x}, 0)"]

    def stmt(self, s: Stmt) -> list[str]:
        if s.op == "load":
            return [self.load(s)]
        if s.op == "store":
            return [self.store(s)]
        if s.op == "bounded":
            return self.bounded(s)
        if s.op == "const":
            self.groups[s.out] = frozenset()
            return [f"{s.out} = tl.full([], {literal(s.value, s.dtype)}, {reg(s.dtype)})"]
        if s.op == "index":
            self.groups[s.out] = self.groups_of_expr(s.index)
            if not self.groups[s.out]:          # sizes and constants only: a scalar
                return [f"{s.out} = tl.full([], 0, tl.int64) + {texpr(s.index)}"]
            return [f"{s.out} = ({texpr(s.index)}).to(tl.int64)"]
        self.groups[s.out] = self.groups_of_args(s.args)
        if s.op == "cast":
            return [f"{s.out} = {cast_expr(s.args[0], self.dtypes[s.args[0]], s.dtype)}"]
        arg_dts = [self.dtypes[a] for a in s.args]
        row = scalar_ops.TABLE.get(s.op)
        arg_dt = row.form_dtype(arg_dts, s.dtype) if row else s.dtype
        return [f"{s.out} = {op_expr(s.op, list(s.args), arg_dt)}"]


def decode(vars_, ranges, flat: str) -> list[str]:
    """Lines splitting a flat index into variables (the last one fastest)."""
    lines, div = [], sympy.Integer(1)
    for i in reversed(range(len(vars_))):
        q = flat if div == 1 else f"({flat} // {texpr(div)})"
        lines.append(f"{vars_[i]} = {q}" if i == 0 else f"{vars_[i]} = {q} % {texpr(ranges[i])}")
        div = div * ranges[i]
    return lines
