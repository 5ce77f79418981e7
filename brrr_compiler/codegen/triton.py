"""Triton printer for the kernel IR: pure string production, testable without a GPU.

A sibling of cpp.py reading the same Kernel. One Python module per compiled graph: the
prelude (imports, a few @triton.jit helpers), then per kernel a comment listing the ATen
nodes it fuses and its schedule, the @triton.jit kernel (named like the C++ one), and a
host function `launch_<name>` that computes the grid and launches it.

Values live in registers in their op-math type: float16/bfloat16 are loaded, widened to
float32 and narrowed only where the IR casts or stores. Each SSA value is one line.
Every load and store is masked by the masks of the index variables it uses (x: the outer
domain, y: the outer rows of a 2-D tile, r: the reduced domain), so the ragged edges of a
block never touch memory and a row-level value is loaded once per row, not per lane.
Tiling (1-D, 2-D, persistent or looped reductions) and index width are decided in
triton_schedule.py; reduction phases are printed by triton_reduce.py.
"""
from __future__ import annotations

import sympy
import torch

from brrr_compiler.codegen import triton_schedule
from brrr_compiler.codegen.triton_prelude import PRELUDE
from brrr_compiler.codegen.triton_schedule import Schedule
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


_INFIX = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "eq": "==", "ne": "!=",
          "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "logical_and": "&",
          "logical_or": "|", "logical_xor": "^", "bitwise_and": "&", "bitwise_or": "|",
          "bitwise_xor": "^", "fmod": "%"}
_BOOL_INFIX = {"add": "|", "mul": "&"}           # bool + bool is logical or in eager
_TL_MATH = {"exp": "tl.exp", "exp2": "tl.exp2", "log": "tl.log", "log2": "tl.log2",
            "sin": "tl.sin", "cos": "tl.cos", "erf": "tl.erf", "abs": "tl.abs"}
_LIBDEVICE = {"expm1", "log1p", "log10", "tan", "tanh", "sinh", "cosh", "asin", "acos",
              "atan", "asinh", "acosh", "atanh", "erfc", "pow", "atan2", "copysign"}
_ROUNDING = {"floor": "tl.floor", "ceil": "tl.ceil", "trunc": "libdevice.trunc",
             "round": "libdevice.nearbyint"}


def op_expr(op: str, a: list[str], dt: torch.dtype) -> str:
    """Right-hand side of a scalar op whose arguments have IR dtype `dt`."""
    fl = dt.is_floating_point
    if dt is torch.bool and op in _BOOL_INFIX:
        return f"{a[0]} {_BOOL_INFIX[op]} {a[1]}"
    if op in _INFIX:
        return f"{a[0]} {_INFIX[op]} {a[1]}"
    if op in _TL_MATH:
        return f"{_TL_MATH[op]}({a[0]})"
    if op in _LIBDEVICE and fl:
        return f"libdevice.{op}({', '.join(a)})"
    if op in _ROUNDING:
        return f"{_ROUNDING[op]}({a[0]})" if fl else a[0]
    one = "1.0" if fl else "1"
    simple = {
        "neg": lambda: f"-{a[0]}",
        "sqrt": lambda: f"tl.sqrt_rn({a[0]})" if reg(dt) == "tl.float32" else f"tl.sqrt({a[0]})",
        "rsqrt": lambda: (f"1.0 / tl.sqrt_rn({a[0]})" if reg(dt) == "tl.float32"
                          else f"1.0 / tl.sqrt({a[0]})"),
        "reciprocal": lambda: f"{one} / {a[0]}",
        "sigmoid": lambda: f"1.0 / (1.0 + tl.exp(-{a[0]}))",
        "frac": lambda: f"{a[0]} - libdevice.trunc({a[0]})" if fl else f"{a[0]} * 0",
        "isnan": lambda: f"{a[0]} != {a[0]}",
        "isinf": lambda: f'tl.abs({a[0]}) == float("inf")' if fl else f"{a[0]} != {a[0]}",
        "signbit": lambda: f"libdevice.signbit({a[0]}) != 0" if fl else f"{a[0]} < 0",
        "sign": lambda: f"({a[0]} > 0).to({reg(dt)}) - ({a[0]} < 0).to({reg(dt)})",
        "logical_not": lambda: f"{a[0]} == 0",
        "bitwise_not": lambda: f"~{a[0]}",
        "where": lambda: f"tl.where({a[0]}, {a[1]}, {a[2]})",
        # NaN from either side; a tie (0.0 vs -0.0) keeps the first, as eager's clamp
        "maximum": lambda: f"tl.where(({a[0]} != {a[0]}) | ({a[0]} >= {a[1]}), {a[0]}, {a[1]})",
        "minimum": lambda: f"tl.where(({a[0]} != {a[0]}) | ({a[0]} <= {a[1]}), {a[0]}, {a[1]})",
        "floordiv": lambda: (f"_brrr_floordiv({a[0]}, {a[1]})" if fl
                             else f"_brrr_floordiv_int({a[0]}, {a[1]})"),
        "truncdiv": lambda: f"libdevice.trunc({a[0]} / {a[1]})" if fl else f"{a[0]} // {a[1]}",
        "remainder": lambda: f"_brrr_remainder({a[0]}, {a[1]})",
    }
    if op in simple:
        return simple[op]()
    raise NotImplementedError(
        f"brrr: the Triton printer has no rule for scalar op {op!r} on {dt}")


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
        arg_dt = self.dtypes[s.args[0]] if s.args else s.dtype
        if s.op == "where":
            arg_dt = self.dtypes[s.args[1]]
        return [f"{s.out} = {op_expr(s.op, list(s.args), arg_dt)}"]


# ---- kernels -------------------------------------------------------------------------

def decode(vars_, ranges, flat: str) -> list[str]:
    """Lines splitting a flat index into variables (the last one fastest)."""
    lines, div = [], sympy.Integer(1)
    for i in reversed(range(len(vars_))):
        q = flat if div == 1 else f"({flat} // {texpr(div)})"
        lines.append(f"{vars_[i]} = {q}" if i == 0 else f"{vars_[i]} = {q} % {texpr(ranges[i])}")
        div = div * ranges[i]
    return lines


def _pid(s: Schedule) -> str:
    return "tl.program_id(0).to(tl.int64)" if s.int64 else "tl.program_id(0)"


def _pointwise(k: Kernel, s: Schedule) -> list[str]:
    lines = [f"xnumel = {texpr(k.numel())}",
             f"xoffset = {_pid(s)} * XBLOCK",
             "xindex = xoffset + tl.arange(0, XBLOCK)",
             "xmask = xindex < xnumel"]
    lines += decode(k.loop_vars, k.ranges, "xindex")
    body = Body(k, {v: "x" for v in k.loop_vars})
    return lines + [ln for st in k.body for ln in body.stmt(st)]


def _pointwise_2d(k: Kernel, s: Schedule) -> list[str]:
    *outer, inner = k.loop_vars
    *outer_n, inner_n = k.ranges
    arange = "tl.arange(0, {b}){sub}" + (".to(tl.int64)" if s.int64 else "")
    lines = [f"ynumel = {texpr(sympy.Mul(*outer_n))}",
             f"xnumel = {texpr(inner_n)}",
             "xtiles = (xnumel + XBLOCK - 1) // XBLOCK",
             f"pid = {_pid(s)}",
             "yindex = (pid // xtiles) * YBLOCK + " + arange.format(b="YBLOCK", sub="[:, None]"),
             "xindex = (pid % xtiles) * XBLOCK + " + arange.format(b="XBLOCK", sub="[None, :]"),
             "ymask = yindex < ynumel",
             "xmask = xindex < xnumel"]
    lines += decode(outer, outer_n, "yindex") + [f"{inner} = xindex"]
    groups = {**{v: "y" for v in outer}, inner: "x"}
    body = Body(k, groups)
    return lines + [ln for st in k.body for ln in body.stmt(st)]


def signature(k: Kernel, s: Schedule) -> list[str]:
    params = [b.name for b in k.buffers] + [v.name for v in k.size_vars]
    return params + (["err"] if k.checks_bounds else [])


def constexprs(s: Schedule) -> dict[str, int]:
    if s.kind == "pointwise":
        return {"XBLOCK": s.xblock}
    if s.kind == "pointwise2d":
        return {"YBLOCK": s.yblock, "XBLOCK": s.xblock}
    return {"XBLOCK": s.xblock, "RBLOCK": s.rblock}


def _grid(k: Kernel, s: Schedule) -> list[str]:
    if s.kind == "pointwise2d":
        ny = texpr(sympy.Mul(*k.ranges[:-1]), host=True)
        nx = texpr(k.ranges[-1], host=True)
        return [f"    ynumel, xnumel = {ny}, {nx}",
                "    if ynumel <= 0 or xnumel <= 0:", "        return",
                f"    grid = (triton.cdiv(ynumel, {s.yblock}) * triton.cdiv(xnumel, {s.xblock}),)"]
    return [f"    xnumel = {texpr(k.numel(), host=True)}",
            "    if xnumel <= 0:", "        return",
            f"    grid = (triton.cdiv(xnumel, {s.xblock}),)"]


def launcher(k: Kernel, s: Schedule) -> list[str]:
    params = signature(k, s)
    consts = ", ".join(f"{n}={v}" for n, v in constexprs(s).items())
    return ([f"def launch_{k.name}({', '.join(params)}):"] + _grid(k, s)
            + [f"    {k.name}[grid]({', '.join(params)}, {consts}, num_warps={s.num_warps})"])


def header(k: Kernel, s: Schedule) -> list[str]:
    head = [f"# {k.name}: fuses {len(k.origins)} ATen node(s)"]
    head += [f"#   {o}" for o in k.origins]
    head.append("#   domain: [" + ", ".join(str(r) for r in k.ranges) + "]"
                + (" reducing [" + ", ".join(str(r) for r in k.reduction_ranges) + "]"
                   if k.is_reduction else ""))
    head.append(f"#   schedule: {s.describe()}")
    return head


def kernel_source(k: Kernel, sm_count: int = triton_schedule.DEFAULT_SM_COUNT) -> str:
    """The kernel's comment, @triton.jit function and launcher, as text."""
    from brrr_compiler.codegen.triton_reduce import reduction_lines

    if k.scratch:
        raise NotImplementedError(f"brrr: the Triton printer keeps no scratch rows ({k.name})")
    if k.folds_across or k.folds_columns:
        raise NotImplementedError(f"brrr: the Triton printer does not fold across rows ({k.name})")
    s = triton_schedule.choose(k, sm_count)
    if k.is_reduction:
        lines = reduction_lines(k, s)
    elif s.kind == "pointwise2d":
        lines = _pointwise_2d(k, s)
    else:
        lines = _pointwise(k, s)
    params = signature(k, s) + [f"{n}: tl.constexpr" for n in constexprs(s)]
    fn = ["@triton.jit", f"def {k.name}({', '.join(params)}):"] + ["    " + ln for ln in lines]
    return "\n".join(header(k, s) + fn + ["", ""] + launcher(k, s)) + "\n"


def module_source(kernels: list[Kernel], sm_count: int = triton_schedule.DEFAULT_SM_COUNT) -> str:
    """One importable Python module holding every kernel of a graph."""
    return "\n\n".join([PRELUDE] + [kernel_source(k, sm_count) for k in kernels])
