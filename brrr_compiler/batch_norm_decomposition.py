"""Inference BatchNorm as three ops per element, with one per-channel factor.

torch's decomposition computes (x - mean) * invstd * weight + bias, with invstd =
1 / sqrt(var + eps): four ops per element, and the square root and division too where the
per-channel part is fused into the elementwise kernel. Here the running variance and the
weight fold into one scale per channel first,
    alpha = weight / sqrt(var + eps),   y = (x - mean) * alpha + bias,
and on CPU the per-channel part runs once per call (the C++ printer computes values that
depend on the channel alone into small tables before its loops, codegen/cpp_invariant.py).
Eager's CPU kernel folds the mean and bias too (x * alpha + (bias - mean * alpha)); that
form gives the fusion two per-channel values, alpha read twice, which is stored by a
kernel of its own: one more kernel call per norm, more than the subtraction it saves.
Other devices keep torch's form. The statistics outputs come from torch's decomposition
unchanged (its output is then dead and dropped by dead-code elimination).
"""
from __future__ import annotations

import torch
from torch._decomp import decomposition_table

aten = torch.ops.aten


def _folded(x, weight, bias, mean, var, eps):
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    alpha = 1 / aten.sqrt.default(var.to(acc) + eps)
    if weight is not None:
        alpha = alpha * weight.to(acc)
    shape = [-1] + [1] * (x.dim() - 2)
    y = (x - aten.view.default(mean.to(acc), shape)) * aten.view.default(alpha, shape)
    if bias is not None:
        y = y + aten.view.default(bias.to(acc), shape)
    return y.to(x.dtype)


def _inference(op):
    torch_decomposition = decomposition_table[op]

    def run(x, weight, bias, running_mean, running_var, momentum, eps):
        out = torch_decomposition(x, weight, bias, running_mean, running_var, momentum, eps)
        return _with_folded(out, x, weight, bias, running_mean, running_var, eps)
    return run


def _native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """native_batch_norm (what make_fx traces F.batch_norm to): inference only."""
    out = decomposition_table[aten.native_batch_norm.default](
        x, weight, bias, running_mean, running_var, training, momentum, eps)
    if training or running_mean is None or running_var is None:
        return out
    return _with_folded(out, x, weight, bias, running_mean, running_var, eps)


def _with_folded(out, x, weight, bias, mean, var, eps):
    if x.device.type != "cpu" or x.dim() < 2 or not x.dtype.is_floating_point:
        return out
    return (_folded(x, weight, bias, mean, var, eps), *out[1:])


def table() -> dict:
    return {aten._native_batch_norm_legit_no_training.default:
            _inference(aten._native_batch_norm_legit_no_training.default),
            aten._batch_norm_no_update.default: _inference(aten._batch_norm_no_update.default),
            aten.native_batch_norm.default: _native_batch_norm}
