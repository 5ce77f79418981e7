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
from brrr_compiler.log import logger

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
            for i, o in enumerate(laid):
                _remember(o, op, args, kwargs, i)
            # a decomposition's named tuple takes its fields positionally
            return out._make(laid) if hasattr(out, "_make") else type(out)(laid)
        laid = _to_layout(out, want)
        _remember(laid, op, args, kwargs, None)
        return laid
    return run


# node.meta key: (op, args, kwargs, output index) of the op whose decomposition made the
# node, its tensor arguments as Inputs (eager_strides.follow_eager lays it out again)
DECOMPOSED_FROM = "brrr_decomposed_from"


class Input(str):
    """The name of the node a decomposed op read as an argument."""


def _remember(value, op, args, kwargs, index) -> None:
    """Note on the traced node of `value` which op it decomposes and from what: the trace
    lays it out by its inputs' fake strides, which eager_strides may correct later (a
    bfloat16 `sub` of an expanded and a transposed input is row-major to FakeTensor,
    transposed in eager), and then the node must follow, as eager's op would."""
    from torch.fx.experimental.proxy_tensor import get_proxy_mode, get_proxy_slot
    mode = get_proxy_mode()
    if mode is None or not isinstance(value, torch.Tensor):
        return

    def node(t):
        slot = get_proxy_slot(t, mode.tracer, None) if isinstance(t, torch.Tensor) else None
        return t if slot is None else slot.proxy.node

    made = node(value)
    args, kwargs = torch.utils._pytree.tree_map(
        lambda a: Input(a.name) if isinstance(a, torch.fx.Node) else a,
        torch.utils._pytree.tree_map(node, (args, kwargs)))
    leaves = torch.utils._pytree.tree_leaves((args, kwargs))
    # a decomposition that returns an input as it is made no node
    if isinstance(made, torch.fx.Node) and made.name not in leaves and not any(
            isinstance(a, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool))
            for a in leaves):
        made.meta[DECOMPOSED_FROM] = (op, args, kwargs, index)


def eager_result(n: torch.fx.Node, vals: dict):
    """The result the op that `n`'s decomposition stands for gives in eager, from the
    values `vals` (node name -> FakeTensor) of the nodes it read; None where `n` is no
    such node, or one of those nodes is gone (a partitioner's cut) or has no value. Run
    under the graph's fake mode."""
    made = n.meta.get(DECOMPOSED_FROM)
    if made is None:
        return None
    op, args, kwargs, index = made
    missing = object()
    args, kwargs = torch.utils._pytree.tree_map(
        lambda a: vals.get(a, missing) if isinstance(a, Input) else a, (args, kwargs))
    if any(a is missing for a in torch.utils._pytree.tree_leaves((args, kwargs))):
        return None
    try:
        want = _eager_kernel_layout(op, args, kwargs, op(*args, **kwargs))
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as err:
        # the trace ran it on the same shapes; on any surprise the node keeps its layout
        logger.debug("brrr: %s keeps its traced layout: %s on the corrected inputs "
                     "raised %s", n.name, op, err)
        return None
    return want if index is None else want[index]


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
