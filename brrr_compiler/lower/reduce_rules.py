"""Reduction rules: fold a reduction node into an accumulator, and finish it.

Accumulators use the op-math dtype (float32 for float16/bfloat16 inputs, int64 for
integer sums as in eager). argmax/argmin fold the value with its flat index over the
reduced dims in eager's (logical) order, so the first extreme wins as in eager.
"""
from __future__ import annotations

import sympy
import torch


from brrr_compiler.lower.scalar_rules import Body, V, opmath
from brrr_compiler.reduction_spec import reduction_spec


def _acc_dtype(kind: str, node) -> torch.dtype:
    if kind in ("any", "all"):
        return torch.bool
    if kind in ("argmax", "argmin"):
        return opmath(node.args[0].meta["val"].dtype)
    return opmath(node.meta["val"].dtype)


def _flat_index(spec, full_idx) -> sympy.Expr:
    shape = spec.full_shape()
    flat, scale = sympy.Integer(0), sympy.Integer(1)
    for d in reversed(spec.dims):
        flat += full_idx[d] * scale
        scale *= shape[d]
    return flat


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
        x = body.cast(self.low.value(spec.input, full_idx), dt)
        args = (x,)
        if spec.kind in ("argmax", "argmin"):
            args += (body.emit("index", torch.int64, index=_flat_index(spec, full_idx)),)
        kind = "sum" if spec.kind == "mean" else spec.kind
        out_dt = torch.int64 if kind in ("argmax", "argmin") else dt
        self.low.acc[node] = body.emit("reduce", out_dt, args, value=kind)

    def finish(self, node, body: Body) -> V:
        """The reduction's value after its loop (mean divides by the reduced count)."""
        acc = self.low.acc[node]
        spec = reduction_spec(node)
        if spec.kind != "mean":
            return acc
        count = sympy.Mul(*[spec.full_shape()[d] for d in spec.dims])
        n = body.emit("index", torch.int64, index=sympy.Integer(0) + count)
        return body.emit("truediv", acc.dtype, (acc, body.cast(n, acc.dtype)))



