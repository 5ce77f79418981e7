"""Decompositions' results laid out as the decomposed op's own kernel lays them out.

A decomposition is written in ops that follow their inputs' strides, or ends in the
layout of torch's Python reference (`prims.copy_strided` to the reference's own stride
rule); eager's kernel may lay its result out otherwise: layer_norm of a transposed input
is contiguous, logaddexp of an expanded and a transposed input is transposed (the
reference's is contiguous), batch norm follows the input's suggested memory format. The
user must get eager's strides, so each decomposition's results are copied into the op's
layout where they differ (a clone or a strided copy, which fuses into the kernel making
the value). The layout comes from the op's fake kernel, corrected by the rules below
where that kernel is the reference itself or follows the input where eager does not.
"""
from __future__ import annotations

import torch

from brrr_compiler import ti_strides

aten = torch.ops.aten


def _same_strides(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal strides over the dims that have any (size > 1)."""
    return all(sa == sb for n, sa, sb in zip(b.shape, a.stride(), b.stride()) if n > 1)


def _to_layout(value, want):
    """`value` with the strides of `want` (the op's own result): a clone into a memory
    format where one gives them (a pointwise copy that fuses into the kernel making the
    value), else a copy into an empty tensor of those strides."""
    if not isinstance(value, torch.Tensor) or not isinstance(want, torch.Tensor) or \
            value.layout != torch.strided or value.shape != want.shape or \
            not _static(want) or _same_strides(value, want):
        # symbolic strides of the op's own kernel were made outside the trace (and
        # eager_strides keeps FakeTensor's for symbolic sizes too)
        return value
    formats = [torch.contiguous_format] + ([torch.channels_last] if want.dim() == 4 else [])
    fmt = next((f for f in formats if want.is_contiguous(memory_format=f)), None)
    if fmt is not None:
        return aten.clone.default(value, memory_format=fmt)
    empty = aten.empty_strided.default(want.shape, want.stride(), dtype=value.dtype,
                                       device=value.device)
    return aten.copy.default(empty, value)


def eager_layout(op, decomposition):
    """`decomposition`, its results laid out as `op` itself lays them out. A decomposition
    is written in ops that follow their inputs' strides, where the op may not (eager's
    layer_norm of a transposed input is contiguous): the user must get eager's strides.
    The op's fake kernel says which; it runs apart from the trace, so it adds no node."""
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    def run(*args, **kwargs):
        out = decomposition(*args, **kwargs)
        if out is NotImplemented:
            return out
        with disable_proxy_modes_tracing():
            want = _eager_kernel_layout(op, args, kwargs, op(*args, **kwargs))
        if isinstance(out, (tuple, list)):
            laid = [_to_layout(o, w) for o, w in zip(out, want)]
            # a decomposition's named tuple takes its fields positionally
            return out._make(laid) if hasattr(out, "_make") else type(out)(laid)
        return _to_layout(out, want)
    return run


# losses with reduction="none" whose eager kernels lay the loss out by a rule of their
# own: one TensorIterator over (input, target), or a copy of input's layout (empty_like)
_LOSS_LAYOUTS = {aten.mse_loss.default: "iterator", aten.smooth_l1_loss.default: "iterator",
                 aten.huber_loss.default: "input"}
# ops whose CPU kernels make contiguous results whatever the input's layout (their fake
# kernels follow the input)
_CONTIGUOUS = {aten.log_sigmoid_forward.default}
# ops whose CPU kernels clone self laid out as empty_like(self) (keeping a non-dense
# self's stride order), where their fake kernels make a contiguous result (the trace-time
# half of this fix is decompositions._index_fill_aten, for what the where does not take)
_LIKE_SELF = {aten.index_fill.int_Scalar, aten.index_fill.int_Tensor}
# batch norms: eager's CPU kernel lays the output out in the input's suggested memory
# format (channels-last stays, a transposed 2-d or 3-d input gives a contiguous output)
_SUGGESTED_FORMAT = {aten.native_batch_norm, aten._native_batch_norm_legit,
                     aten._native_batch_norm_legit_no_training,
                     aten._native_batch_norm_legit_functional, aten._batch_norm_with_update,
                     aten._batch_norm_with_update_functional, aten._batch_norm_no_update}


def _eager_kernel_layout(op, args, kwargs, want):
    """`want` (the op's fake result) with the strides eager's own kernel gives it, where
    a rule says so: TensorIterator's for a pointwise op that runs one (the fake kernel of
    some is torch's Python reference, whose rule differs: logaddexp of an expanded and a
    transposed input is transposed in eager, contiguous to the reference), the losses'
    above, and the contiguous or suggested-format results of the ops above."""
    if op in _LIKE_SELF and isinstance(want, torch.Tensor) and _static(args[0]):
        stride = torch._prims_common.compute_elementwise_output_strides(args[0])
        return torch.empty_strided(want.shape, stride, dtype=want.dtype, device=want.device)
    if op in _CONTIGUOUS and want[0].device.type == "cpu":
        return type(want)(_in_format(w, torch.contiguous_format) for w in want)
    if op.overloadpacket in _SUGGESTED_FORMAT and want[0].device.type == "cpu" \
            and _static(args[0]):
        fmt = torch._prims_common.suggest_memory_format(args[0])
        return type(want)([_in_format(want[0], fmt), *want[1:]])
    rule = _LOSS_LAYOUTS.get(op)
    if rule is not None and (args[2] if len(args) > 2 else kwargs.get("reduction", 1)) != 0:
        return want
    found = (list(args[:2]), [True, True]) if rule is not None else ti_strides.operands(
        op, args, kwargs)
    if found is None or not isinstance(want, torch.Tensor) or want.numel() == 0 or not all(
            _static(v) for v in (want, *found[0]) if isinstance(v, torch.Tensor)):
        return want
    if rule == "input":
        x = found[0][0]
        stride = tuple(x.stride()) if ti_strides.is_dense(tuple(x.shape), tuple(x.stride())) \
            else ti_strides.contiguous_strides(tuple(x.shape))
    else:
        stride = ti_strides.output_strides(found[0], want.device, found[1])
    if tuple(want.stride()) == stride:
        return want
    return torch.empty_strided(want.shape, stride, dtype=want.dtype, device=want.device)


def _static(t) -> bool:
    return all(type(n) is int for n in (*t.shape, *t.stride()))


def _in_format(want, fmt):
    """`want` laid out in memory format `fmt`."""
    if not isinstance(want, torch.Tensor) or not _static(want):
        return want
    return torch.empty(want.shape, dtype=want.dtype, device=want.device, memory_format=fmt)
