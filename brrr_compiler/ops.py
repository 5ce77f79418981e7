"""The op table: one place that says what each ATen op is to brrr.

Every ATen overload maps to an OpInfo: its kind (pointwise, view, reduction, library,
fallback), the scalar rule the lowering applies to it (lower/scalar_rules.py; most are
the scalar op of that name in the scalar-op table, scalar_ops.py), and its cost per
output element in "flop-equivalents" (an add is 1; a transcendental function costs what
a vectorized libm call costs relative to an add): by default its scalar op's cost. The
partitioner, the lowering and the cost model all read this table; nobody keeps a second
list. Ops not listed are FALLBACK: they run through ATen.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Optional

import torch

from brrr_compiler import scalar_ops
from brrr_compiler.scalar_ops import ADD, DIV, EXPENSIVE, SQRT, TRANSCENDENTAL  # noqa: F401

aten = torch.ops.aten


class Kind(Enum):
    POINTWISE = "pointwise"   # elementwise on broadcast inputs: fusible
    VIEW = "view"             # a strided view of its input: free, index remapping only
    REDUCTION = "reduction"   # reduces over dims
    LIBRARY = "library"       # compute-bound, runs in a vendor library through ATen
    FALLBACK = "fallback"     # anything else: runs through ATen


@dataclass(frozen=True)
class OpInfo:
    kind: Kind
    scalar: str = ""          # the scalar rule (pointwise) or reduce kind (reduction)
    cost: float = 1.0         # flop-equivalents per output element
    # extra condition on the node for it to be fusible (e.g. float-only ops)
    accepts: Optional[Callable[[torch.fx.Node], bool]] = None


def _out_dtype(node) -> Optional[torch.dtype]:
    val = node.meta.get("val")
    return getattr(val, "dtype", None)


def _float_out(node) -> bool:
    dt = _out_dtype(node)
    return dt is not None and dt.is_floating_point


TABLE: dict = {}


def _pw(ops, scalar, cost=None, accepts=None):
    """Pointwise ops lowered by rule `scalar`; cost: by default the scalar op's."""
    cost = scalar_ops.row(scalar).cost if cost is None else cost
    for op in ops:
        TABLE[op] = OpInfo(Kind.POINTWISE, scalar, cost, accepts)


def _same_name(*names, accepts=None):
    """aten.<name>.default for each name, lowered to the scalar op of that name."""
    for name in names:
        _pw([getattr(aten, name).default], name, accepts=accepts)


def _kind(ops, kind, cost=0.0):
    for op in ops:
        TABLE[op] = OpInfo(kind, "", cost)


# --- pointwise: arithmetic ------------------------------------------------------------
_pw([aten.add.Tensor, aten.add.Scalar], "add")
_pw([aten.sub.Tensor, aten.sub.Scalar, aten.rsub.Scalar, aten.rsub.Tensor], "sub")
_pw([aten.mul.Tensor, aten.mul.Scalar], "mul")
# integer division by zero traps in C++ where ATen raises: integer division stays in ATen
_pw([aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode],
    "div", DIV, _float_out)
_same_name("neg", "abs", "maximum", "minimum", "fmax", "fmin", "floor", "ceil", "trunc",
           "round", "frac")
_same_name("reciprocal", accepts=_float_out)
_pw([aten.clamp.default, aten.clamp.Tensor], "clamp", 2 * ADD)
_pw([aten.clamp_min.default, aten.clamp_min.Tensor], "clamp_min", ADD)
_pw([aten.clamp_max.default, aten.clamp_max.Tensor], "clamp_max", ADD)
_pw([aten.relu.default], "relu", ADD)
_pw([aten.sign.default, aten.sgn.default], "sign")
_pw([aten.fmod.Tensor, aten.fmod.Scalar], "fmod", accepts=_float_out)
_pw([aten.remainder.Tensor, aten.remainder.Scalar], "remainder", accepts=_float_out)
_pw([aten.copysign.Tensor, aten.copysign.Scalar], "copysign", accepts=_float_out)

# --- pointwise: transcendental ----------------------------------------------------------
_same_name("exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan",
           "tanh", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "erf",
           "erfc", "sigmoid", "sqrt", "rsqrt", "atan2", "hypot")
_pw([aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar], "pow",
    accepts=_float_out)

# --- pointwise: comparisons, logic, selection -----------------------------------------
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    _pw([getattr(aten, _name).Tensor, getattr(aten, _name).Scalar], _name)
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    _pw([getattr(aten, _name).Tensor, getattr(aten, _name).Scalar], _name)
_same_name("logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_not",
           "isnan", "isinf", "isposinf", "isneginf", "signbit")
_pw([aten.where.self], "where")
# arange: an integer ramp over its single dim (float ramps stay in ATen: eager computes
# them in double with its own rounding)
_pw([aten.arange.default, aten.arange.start_step, aten.arange.start], "arange", ADD,
    lambda n: not _float_out(n))
# gather reads its input at an index loaded from another tensor (indirect load); a 0-dim
# input (eager treats it as 1-d) stays in ATen
def _gather_ok(n) -> bool:
    x = n.args[0].meta.get("val")
    return not n.kwargs.get("sparse_grad", False) and x is not None and x.dim() > 0


_pw([aten.gather.default], "gather", 2 * ADD, _gather_ok)      # the bounds check: IR "bounded"
# index / _unsafe_index: x read at integer index tensors (broadcast together) along some
# dims; bool and byte indices are masks whose result shape depends on their values: ATen
def _index_ok(n) -> bool:
    x, indices = n.args[0].meta.get("val"), n.args[1]
    if x is None or x.dim() == 0 or not isinstance(indices, (list, tuple)):
        return False
    given = [t.meta.get("val") for t in indices if t is not None]
    return (0 < len(given) and len(indices) <= x.dim() and n.meta.get("val") is not None
            and all(v is not None and v.dtype in (torch.int64, torch.int32) for v in given))


_pw([aten.index.Tensor, aten._unsafe_index.Tensor], "index", 2 * ADD, _index_ok)
# embedding: rows of a 2-d table at loaded indices (its backward stays ATen's
# embedding_dense_backward; padding_idx and scale_grad_by_freq only change that)
_pw([aten.embedding.default], "embedding", 2 * ADD,
    lambda n: getattr(n.args[0].meta.get("val"), "ndim", 0) == 2)


# cat: each output element is one input's element, chosen by its index along the cat
# dim (a select between loads at clamped, always in-bounds indices); inputs of one rank
# with static extents along the dim (eager's legacy empty 1-d inputs stay in ATen)
def _cat_ok(n) -> bool:
    vals = [t.meta.get("val") for t in n.args[0]] if isinstance(n.args[0], (list, tuple)) else []
    out = n.meta.get("val")
    if not vals or out is None or any(v is None or v.dim() != out.dim() for v in vals):
        return False
    dim = cat_dim(n)
    return (out.dim() > 0 and all(isinstance(v.shape[dim], int) for v in vals)
            and any(v.shape[dim] > 0 for v in vals))


def cat_dim(n) -> int:
    dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", 0)
    return dim % n.meta["val"].dim()


_pw([aten.cat.default], "cat", ADD, _cat_ok)

# --- pointwise: dtype casts and constants ---------------------------------------------
_pw([aten._to_copy.default, aten.clone.default, aten.lift_fresh_copy.default,
     torch.ops.prims.convert_element_type.default], "copy", 0.0)
# copy(self, src): src cast and broadcast into self's shape and layout (lower/index_rules.py);
# an empty tensor made only to be copied into (a layout for a result) is part of that copy
_pw([aten.copy.default], "copy_into", 0.0)


def _only_copied_into(n) -> bool:
    return bool(n.users) and all(u.target is aten.copy.default and u.args[0] is n
                                 and n not in u.args[1:] for u in n.users)


_pw([aten.empty_strided.default, aten.new_empty_strided.default, aten.empty.memory_format,
     aten.new_empty.default, aten.empty_like.default], "empty", 0.0, _only_copied_into)


def normalized(node) -> dict:
    """The node's arguments by schema name (`self`, `other`, ...), defaults filled in."""
    schema = node.target._schema
    out = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args) and not arg.kwarg_only:
            out[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            out[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
    return out


def _strided_scatter_ok(n) -> bool:
    """slice_scatter with a step > 1 and static sizes (step 1 is a cat:
    slice_decomposition.py); its source index, a quotient taken in double, is exact for
    extents below 2**31 and steps below 2**22 (an error under 1/step). Along the output's
    innermost dim the read at a computed index is a gather per element, in a loop gcc
    leaves scalar: slower than ATen's copy and strided copy (1024x1024, every third
    column: 4.5x eager's time, ATen's 2.0x; a float16 generated pattern, every other
    column, 3x against 1.07x), so only outer dims take it."""
    base, src, out = (t.meta.get("val") for t in (n.args[0], n.args[1], n))
    a = normalized(n)
    step, start = a["step"], a["start"]
    if base is None or src is None or out is None or base.dim() == 0 or \
            not isinstance(step, int) or not 1 < step < 2**22 or \
            not (start is None or isinstance(start, int)) or \
            not all(isinstance(s, int) and s < 2**31 for s in (*base.shape, *src.shape, *out.stride())):
        return False
    dim = a["dim"] % base.dim()
    dims = [d for d in range(out.dim()) if out.shape[d] != 1]
    innermost = min(dims, key=lambda d: out.stride()[d]) if dims else None
    return dim != innermost


_pw([aten.slice_scatter.default], "strided_slice_scatter", ADD, _strided_scatter_ok)
_pw([aten.full.default, aten.scalar_tensor.default, aten.full_like.default,
     aten.zeros_like.default, aten.ones_like.default, aten.zeros.default, aten.ones.default],
    "constant", 0.0)

# --- views: strided windows on their input --------------------------------------------
_kind([aten.view.default, aten._unsafe_view.default, aten.reshape.default,
       aten.permute.default, aten.t.default, aten.transpose.int, aten.expand.default,
       aten.unsqueeze.default, aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims,
       aten.slice.Tensor, aten.select.int, aten.alias.default, aten.detach.default,
       aten.as_strided.default,
       aten.unfold.default, aten.diagonal.default, aten.narrow.default],
      Kind.VIEW)

# --- reductions: the scalar field names the reduce kind ---------------------------------
def _red(ops_, kind, cost=ADD):
    for op in ops_:
        TABLE[op] = OpInfo(Kind.REDUCTION, kind, cost)


_red([aten.sum.dim_IntList, aten.sum.default], "sum")
_red([aten.mean.dim, aten.mean.default], "mean")
_red([aten.amax.default], "max")
_red([aten.amin.default], "min")
_red([aten.prod.dim_int, aten.prod.default], "prod")
_red([aten.any.dim, aten.any.dims, aten.any.default], "any")
_red([aten.all.dim, aten.all.dims, aten.all.default], "all")
_red([aten.argmax.default], "argmax", 2 * ADD)
_red([aten.argmin.default], "argmin", 2 * ADD)

# --- compute-bound library calls ------------------------------------------------------
_kind([aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,
       aten.convolution.default, aten.convolution_backward.default,
       aten._scaled_dot_product_flash_attention_for_cpu.default,
       aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
       aten.scaled_dot_product_attention.default, aten.matmul.default],
      Kind.LIBRARY)
# a linear layer with its activation as a oneDNN post-op (passes/linear_epilogues.py)
if hasattr(torch.ops.mkldnn, "_linear_pointwise"):
    _kind([torch.ops.mkldnn._linear_pointwise.default], Kind.LIBRARY)

FALLBACK_INFO = OpInfo(Kind.FALLBACK)

# structural kernel-IR statements that do work (kernel_ir.STRUCTURAL; the others move
# data or name values): gather's bounds check
STRUCTURAL_COST = {"bounded": 2 * ADD}


def scalar_cost(op: str, reduce: bool = False) -> float:
    """Flop-equivalents of one kernel-IR scalar op (its scalar-op table row) or, with
    `reduce`, one fold of a reduce kind (what TABLE gives the ATen reduction naming it);
    an op neither table prices raises KeyError."""
    if not reduce and op in scalar_ops.TABLE:
        return scalar_ops.TABLE[op].cost
    if not reduce and op in STRUCTURAL_COST:
        return STRUCTURAL_COST[op]
    for info_ in TABLE.values():
        if reduce and info_.kind is Kind.REDUCTION and info_.scalar == op:
            return info_.cost
    raise KeyError(f"brrr: the op table has no cost for {'reduce ' if reduce else ''}{op!r}")


# ops keyed by schema name: prims.fma is inductor's, registered when inductor_prims is
# imported (by Dynamo, which writes addcmul_/addcdiv_ with a value as fma); importing it
# here would load inductor for every compile
BY_NAME: dict = {"prims::fma": OpInfo(Kind.POINTWISE, "fma", scalar_ops.row("fma").cost,
                                      _float_out)}


def info(target) -> OpInfo:
    """The OpInfo for an FX node target; unknown targets are FALLBACK."""
    found = TABLE.get(target)
    if found is None and isinstance(target, torch._ops.OpOverload):
        found = BY_NAME.get(target.name())
    return found if found is not None else FALLBACK_INFO


def kind_of(node: torch.fx.Node) -> Kind:
    """The kind of a call_function node, taking the op's extra conditions into account."""
    if node.op != "call_function":
        return Kind.FALLBACK
    op = info(node.target)
    if op.accepts is not None and not op.accepts(node):
        return Kind.FALLBACK
    return op.kind
