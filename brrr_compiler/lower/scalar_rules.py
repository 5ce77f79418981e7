"""Scalar rules: one ATen pointwise op -> scalar IR statements, with eager's dtype rules.

Each node's result dtype comes from its FakeTensor (`meta["val"]`), so type promotion is
eager's by construction. Arithmetic runs in the op-math dtype (float16/bfloat16 compute
in float32, like ATen's CPU kernels); comparisons run in the promoted dtype of their
inputs; explicit casts (`_to_copy`, `convert_element_type`) really round, so
`x.to(bfloat16).float()` loses the bits it loses in eager. With `exact` off
(Config.low_precision="float32") values stay float32 between ops: only the casts the
program wrote and the kernel's stores round (group.py rounds each op's result when exact).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import torch

from brrr_compiler import ops, scalar_ops
from brrr_compiler.kernel_ir import Stmt

aten = torch.ops.aten
LOW_PRECISION = (torch.float16, torch.bfloat16)


class V(NamedTuple):
    """An SSA value: its name and logical dtype."""
    name: str
    dtype: torch.dtype


def opmath(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in LOW_PRECISION else dtype


class Namer:
    """Hands out SSA names, unique across all the bodies of one kernel."""

    def __init__(self):
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        return f"v{self.count - 1}"


class Body:
    """Emits SSA statements into one list (a phase), sharing constants within it."""

    def __init__(self, namer: Namer | None = None, stmts: list | None = None):
        self.namer = namer or Namer()
        self.stmts: list[Stmt] = [] if stmts is None else stmts
        self._consts: dict = {}

    def emit(self, op: str, dtype: torch.dtype, args=(), **kw) -> V:
        name = self.namer()
        self.stmts.append(Stmt(name, dtype, op, tuple(a.name for a in args), **kw))
        return V(name, dtype)

    def store(self, buffer: str, index, value: V) -> None:
        self.stmts.append(Stmt(None, value.dtype, "store", (value.name,), buffer, index))

    def const(self, value, dtype: torch.dtype) -> V:
        if dtype.is_floating_point:
            value = float(value)
        elif dtype is torch.bool:
            value = bool(value)
        else:
            value = int(value)
        key = (repr(value), dtype)
        if key not in self._consts:
            self._consts[key] = self.emit("const", dtype, value=value)
        return self._consts[key]

    def cast(self, v, dtype: torch.dtype) -> V:
        if not isinstance(v, V):
            return self.const(v, dtype)
        return v if v.dtype == dtype else self.emit("cast", dtype, (v,))


class Ctx(NamedTuple):
    node: torch.fx.Node
    a: dict            # the op's arguments by schema name; tensors already lowered to V
    b: Body
    exact: bool = True   # float16/bfloat16 values round where eager rounds them

    @property
    def out(self) -> torch.dtype:
        return self.node.meta["val"].dtype

    @property
    def cdt(self) -> torch.dtype:
        return opmath(self.out)


def _first(a: dict, *names):
    for n in names:
        if n in a:
            return a[n]
    raise KeyError(names)


# ---- rule helpers ----------------------------------------------------------------------

def unary(op: str) -> Callable:
    def rule(c: Ctx) -> V:
        x = c.b.cast(_first(c.a, "self", "a", "input"), c.cdt)
        return c.b.emit(op, c.cdt, (x,))
    return rule


def binary(op: str) -> Callable:
    def rule(c: Ctx) -> V:
        x = c.b.cast(c.a["self"], c.cdt)
        y = c.b.cast(_first(c.a, "other", "exponent"), c.cdt)
        return c.b.emit(op, c.cdt, (x, y))
    return rule


def _round_scalar(c: Ctx, v, name: str):
    """eager's add/sub first converts every operand (a Python scalar, a float32 0-dim
    tensor) to a float16/bfloat16 result's dtype, then computes in float32. An operand of
    that dtype already is left alone when not exact (float32 mode holds it in float32)."""
    if c.out not in LOW_PRECISION:
        return v
    if isinstance(v, V):
        arg = ops.normalized(c.node)[name]
        held = isinstance(arg, torch.fx.Node) and arg.meta["val"].dtype == c.out
        return c.b.cast(v, c.cdt if held and not c.exact else c.out)
    return torch.tensor(v, dtype=c.out).item()


def _alpha(c: Ctx, v: V) -> V:
    alpha = c.a.get("alpha")
    if alpha is None or alpha == 1:
        return v
    return c.b.emit("mul", c.cdt, (v, c.b.const(alpha, c.cdt)))


def add_sub(op: str) -> Callable:
    def rule(c: Ctx) -> V:
        x, y = _round_scalar(c, c.a["self"], "self"), _round_scalar(c, c.a["other"], "other")
        if c.node.target in (aten.rsub.Scalar, aten.rsub.Tensor):
            x, y = y, x
        x, y = c.b.cast(x, c.cdt), _alpha(c, c.b.cast(y, c.cdt))
        return c.b.emit(op, c.cdt, (x, y))
    return rule


def div(c: Ctx) -> V:
    x, y = c.b.cast(c.a["self"], c.cdt), c.b.cast(c.a["other"], c.cdt)
    mode = c.a.get("rounding_mode")
    if mode == "floor":
        return c.b.emit("floordiv", c.cdt, (x, y))
    q = c.b.emit("truediv", c.cdt, (x, y))
    return c.b.emit("trunc", c.cdt, (q,)) if mode == "trunc" else q


def compare(op: str) -> Callable:
    def rule(c: Ctx) -> V:
        promoted = torch.result_type(*(_promo_arg(c.node, k, c.a) for k in ("self", "other")))
        dt = opmath(promoted)
        x, y = (c.b.cast(_in_promoted(c, c.a[k], promoted), dt) for k in ("self", "other"))
        return c.b.emit(op, torch.bool, (x, y))
    return rule


def _in_promoted(c: Ctx, v, promoted: torch.dtype):
    """eager compares in the promoted dtype: a float16/bfloat16 comparison rounds a Python
    number or another dtype's operand to it first (`h > 0.3` compares with float16's
    0.30005, so a float16 value of 0.30005 is not greater)."""
    if promoted not in LOW_PRECISION:
        return v
    if not isinstance(v, V):
        return torch.tensor(v, dtype=promoted).item()
    return c.b.cast(v, promoted) if v.dtype != promoted else v


def _promo_arg(node, name: str, a: dict):
    """A stand-in for argument `name` for torch.result_type (rank matters, not values)."""
    v = a[name]
    if not isinstance(v, V):
        return v
    val = ops.normalized(node)[name].meta["val"]
    return torch.empty((1,) * val.dim(), dtype=val.dtype, device="meta")


def logical(op: str) -> Callable:
    def rule(c: Ctx) -> V:
        args = [c.b.cast(c.a[k], torch.bool) for k in ("self", "other") if k in c.a]
        return c.b.emit(op, torch.bool, tuple(args))
    return rule


def predicate(op: str) -> Callable:
    def rule(c: Ctx) -> V:
        x = c.a["self"]
        return c.b.emit(op, torch.bool, (c.b.cast(x, opmath(x.dtype)),))
    return rule


def bitwise_not(c: Ctx) -> V:
    x = c.b.cast(c.a["self"], c.cdt)
    return c.b.emit("logical_not" if c.cdt is torch.bool else "bitwise_not", c.cdt, (x,))


def where(c: Ctx) -> V:
    cond = c.b.cast(c.a["condition"], torch.bool)
    x, y = c.b.cast(c.a["self"], c.cdt), c.b.cast(c.a["other"], c.cdt)
    return c.b.emit("where", c.cdt, (cond, x, y))


def fma(c: Ctx) -> V:
    a, b, z = (c.b.cast(c.a[name], c.cdt) for name in ("a", "b", "c"))
    return c.b.emit("fma", c.cdt, (a, b, z))


def clamp(c: Ctx) -> V:
    x = c.b.cast(c.a["self"], c.cdt)
    lo, hi = c.a.get("min"), c.a.get("max")
    if c.node.target in (aten.clamp_max.default, aten.clamp_max.Tensor):
        lo, hi = None, c.a["max"]
    if lo is not None:
        x = c.b.emit("maximum", c.cdt, (x, c.b.cast(lo, c.cdt)))
    if hi is not None:
        x = c.b.emit("minimum", c.cdt, (x, c.b.cast(hi, c.cdt)))
    return x


def relu(c: Ctx) -> V:
    x = c.b.cast(c.a["self"], c.cdt)
    return c.b.emit("maximum", c.cdt, (x, c.b.const(0, c.cdt)))


def copy(c: Ctx) -> V:
    """A cast. To float16/bfloat16 it rounds when exact, or when the program wrote it;
    a decomposition's own cast (silu's round trip through float32) is left to the store."""
    rounds = c.exact or written_cast(c.node)
    return c.b.cast(_first(c.a, "self", "a"), c.out if rounds else c.cdt)


def written_cast(node: torch.fx.Node) -> bool:
    """Whether a cast node is one the program wrote (or autocast added), not one that a
    decomposition put inside a composite op: AOTAutograd's `original_aten` names the op
    each node came from (another instance of the overload, so matched by name). Unknown
    origin counts as written."""
    origin = node.meta.get("original_aten")
    return origin is None or str(origin) in _cast_names()


@functools.cache
def _cast_names() -> frozenset:
    return frozenset(str(op) for op, i in ops.TABLE.items() if i.scalar == "copy")


def constant(c: Ctx) -> V:
    t = c.node.target
    if t in (aten.zeros_like.default, aten.zeros.default):
        value = 0
    elif t in (aten.ones_like.default, aten.ones.default):
        value = 1
    else:
        value = _first(c.a, "fill_value", "s")
    rounded = torch.tensor(value, dtype=c.out).item()
    return c.b.const(rounded, c.cdt)


def power(c: Ctx) -> V:
    if c.node.target is aten.pow.Scalar:
        base = c.b.cast(c.a["self"], c.cdt)
        return c.b.emit("pow", c.cdt, (base, c.b.cast(c.a["exponent"], c.cdt)))
    x, e = c.b.cast(c.a["self"], c.cdt), c.a["exponent"]
    if isinstance(e, V):
        return c.b.emit("pow", c.cdt, (x, c.b.cast(e, c.cdt)))
    return _pow_scalar(c, x, e)


MAX_SQUARING = 64     # the largest |integer exponent| multiplied out (_by_squaring)


def _pow_scalar(c: Ctx, x: V, e) -> V:
    """ATen's special cases for a scalar exponent, so results match it bit for bit."""
    b, dt = c.b, c.cdt
    if e == 0:
        return b.const(1, dt)
    if e == 1:
        return x
    if e in (2, 3, -2):
        sq = b.emit("mul", dt, (x, x))
        if e == 3:
            return b.emit("mul", dt, (sq, x))
        return b.emit("reciprocal", dt, (sq,)) if e == -2 else sq
    special = {0.5: "sqrt", -0.5: "rsqrt", -1: "reciprocal"}
    if e in special:
        return b.emit(special[e], dt, (x,))
    if dt is torch.float32 and float(e).is_integer() and 4 <= abs(e) <= MAX_SQUARING:
        return _by_squaring(b, x, int(e))
    return b.emit("pow", dt, (x, b.const(e, dt)))


def _by_squaring(b, x: V, n: int) -> V:
    """x ** n for float32 x and an integer n, multiplied out in float64: a handful of
    float64 roundings stay far below float32's, so the one rounding at the end gives
    powf's result or its neighbour (eager's vectorized pow is within an ulp too), at a
    few multiplies where powf costs tens of cycles an element (vector_norm of order 6
    over 1M floats: 9.3 ms, eager 5.4; benchmarks/results/notes.md)."""
    power, result, k = b.cast(x, torch.float64), None, abs(n)
    while k:
        if k & 1:
            result = power if result is None else b.emit("mul", torch.float64, (result, power))
        k >>= 1
        if k:
            power = b.emit("mul", torch.float64, (power, power))
    if n < 0:
        result = b.emit("reciprocal", torch.float64, (result,))
    return b.cast(result, torch.float32)


# rules for ATen ops that are not simply the scalar op of their name; every other scalar
# op gets the default rule of its kind (default_rule)
RULES: dict[str, Callable[[Ctx], V]] = {
    "add": add_sub("add"), "sub": add_sub("sub"), "div": div, "bitwise_not": bitwise_not,
    "clamp": clamp, "clamp_min": clamp, "clamp_max": clamp, "relu": relu,
    "where": where, "fma": fma, "copy": copy, "constant": constant, "pow": power,
    "logical_and": logical("logical_and"), "logical_or": logical("logical_or"),
    "logical_xor": logical("logical_xor"), "logical_not": logical("logical_not"),
}


def default_rule(op: str) -> Callable[[Ctx], V] | None:
    """The rule for scalar op `op` (scalar_ops.py) by its arity and result rule: compute in
    the op-math dtype (unary, binary), or compare in the promoted dtype (BOOL results)."""
    row = scalar_ops.TABLE.get(op)
    if row is None or row.result == scalar_ops.SELECT:
        return None
    if row.result == scalar_ops.BOOL:
        return compare(op) if row.arity == 2 else predicate(op)
    return {1: unary, 2: binary}[row.arity](op)


def lower_node(node: torch.fx.Node, args: dict[str, Any], body: Body, scalar: str,
               exact: bool = True) -> V:
    """Emit the statements computing `node` from its (already lowered) arguments.
    `exact`: round float16/bfloat16 values where eager does (else only stores round)."""
    rule = RULES.get(scalar) or default_rule(scalar)
    if rule is None:
        raise NotImplementedError(f"brrr: no scalar rule for {scalar!r} ({node.target})")
    return rule(Ctx(node, args, body, exact))
