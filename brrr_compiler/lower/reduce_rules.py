"""Reduction rules: fold a reduction node into an accumulator, and finish it.

Accumulators use the op-math dtype (float32 for float16/bfloat16 inputs, int64 for
integer sums as in eager). argmax/argmin fold the value with its flat index over the
reduced dims in eager's (logical) order, so the first extreme wins as in eager. A fold of every element of a full-shape value across rows
(a loss) is a row fold in the loop phase that computes the value, then a fold of the
row's result across rows; a column fold (partition/domains.py) adds each element into
its column's accumulator in that loop phase.
"""
from __future__ import annotations

import sympy
import torch


from brrr_compiler.kernel_ir import ARG_FOLDS
from brrr_compiler.lower.scalar_rules import LOW_PRECISION, Body, V, opmath
from brrr_compiler.reduction_spec import reduction_spec


def _acc_dtype(kind: str, node) -> torch.dtype:
    if kind in ("any", "all"):
        return torch.bool
    if kind in ARG_FOLDS:
        return opmath(node.args[0].meta["val"].dtype)
    return opmath(node.meta["val"].dtype)


def _flat_index(spec, full_idx) -> sympy.Expr:
    shape = spec.full_shape()
    flat, scale = sympy.Integer(0), sympy.Integer(1)
    for d in reversed(spec.dims):
        flat += full_idx[d] * scale
        scale *= shape[d]
    return flat


def _compared(v: V, spec, body: Body) -> V:
    """The value argmax/argmin compare: a float16/bfloat16 input's value as eager holds it,
    rounded to its dtype. brrr keeps a low-precision chain in float32 between ops
    (Config.low_precision="float32"), which is fine for values (the store rounds, and
    rounding keeps the order of a max) but not for an index: two elements that round to
    one bfloat16 value tie in eager, which takes the first, while their float32 values
    differ and brrr took the larger."""
    dtype = spec.input.meta["val"].dtype
    if spec.kind not in ARG_FOLDS or dtype not in LOW_PRECISION or v.dtype == dtype:
        return v
    return body.cast(v, dtype)


class ReductionEmitter:
    def __init__(self, lowering):
        self.low = lowering

    def fold(self, node, full_idx: tuple, body: Body | None = None) -> None:
        """Emit the reduce statement for `node`, reading its input at `full_idx`, in
        `body`: the current loop phase, or a row's last scalar phase for a fold across
        rows."""
        spec = reduction_spec(node)
        body = body or self.low.loop_body(self.low.cur_loop)
        dt = _acc_dtype(spec.kind, node)
        x = body.cast(_compared(self.low.value(spec.input, full_idx), spec, body), dt)
        args = (x,)
        if spec.kind in ARG_FOLDS:
            args += (body.emit("index", torch.int64, index=_flat_index(spec, full_idx)),)
        kind = "sum" if spec.kind == "mean" else spec.kind
        out_dt = torch.int64 if kind in ARG_FOLDS else dt
        self.low.acc[node] = body.emit("reduce", out_dt, args, value=kind)

    def _input_in_loop(self, node, full_idx: tuple):
        """(the loop body evaluating `node`'s full-shape input, the value there, the
        accumulator dtype, the fold kind): in the loop phase of the input's level."""
        spec = reduction_spec(node)
        self.low.cur_loop = self.low.level.get(spec.input, 0)
        body = self.low.loop_body(self.low.cur_loop)
        dt = _acc_dtype(spec.kind, node)
        x = body.cast(self.low.value(spec.input, full_idx), dt)
        self.low.cur_loop = None
        return body, x, dt, "sum" if spec.kind == "mean" else spec.kind

    def fold_full(self, node, full_idx: tuple) -> None:
        """Every element of a full-shape value folded across rows: a row fold, then that
        row's result folded across rows in the row's last scalar phase."""
        body, x, dt, kind = self._input_in_loop(node, full_idx)
        row = body.emit("reduce", dt, (x,), value=kind)
        self.low.acc[node] = self.low.bodies[-1].emit("reduce", dt, (row,), value=kind)

    def fold_column(self, node, full_idx: tuple) -> None:
        """A sum over the rows of a full-shape value: each element goes to its column's
        accumulator (its flat position in the reduction domain)."""
        body, x, dt, kind = self._input_in_loop(node, full_idx)
        self.low.acc[node] = body.emit("column_reduce", dt, (x,), value=kind,
                                       index=self.low.flat_reduction_index())

    def finish(self, node, body: Body) -> V:
        """The reduction's value after its loop (mean divides by the reduced count)."""
        acc = self.low.acc[node]
        spec = reduction_spec(node)
        if spec.kind != "mean":
            return acc
        count = sympy.Mul(*[spec.full_shape()[d] for d in spec.dims])
        n = body.emit("index", torch.int64, index=sympy.Integer(0) + count)
        return body.emit("truediv", acc.dtype, (acc, body.cast(n, acc.dtype)))



