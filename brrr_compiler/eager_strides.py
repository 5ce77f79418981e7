"""The strides of pointwise ops on float16/bfloat16 values, made those of float32.

Note on the layouts. brrr allocates each value a kernel computes with the strides of the
node's FakeTensor and builds views from them (runtime/reinterpret.py), so those strides
must be the ones eager's kernels give. FakeTensor runs an op's meta function, and for
pointwise ops those are torch's Python references, which upcast each float16/bfloat16
input to float32 before computing. The upcast copy of an expanded input (zero strides) or
of a strided one (a step slice) is a new dense tensor, and its strides, not the input's,
then decide the output's layout: `a.expand(5, 17, 17) + b.transpose(1, 2)` is transposed
in eager, contiguous to FakeTensor in bfloat16, transposed to FakeTensor in float32. The
copy's size-1 dims get strides of their own too, and a later op breaks ties between dims
by them (eager's TensorIterator compares the strides of every dim), so a layout can go
wrong a few ops further on. Eager lays float16/bfloat16 out exactly as float32: its
kernels upcast nothing before the strides are chosen. So for a pointwise node whose
inputs share one low-precision dtype, one of them laid out anew by the upcast, the
strides are asked of the same op on float32 stand-ins of those inputs; where they
differ, the node gets a FakeTensor with them, and every node that reads a value whose
strides changed is traced again. An input of another dtype is upcast by eager's CPU
kernels too (a copy, as in the references), so it keeps its own dtype.
"""
from __future__ import annotations

import functools
import operator

import torch
from torch._prims_common import compute_elementwise_output_strides
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.fx.node import map_arg

LOW_PRECISION = (torch.float16, torch.bfloat16)


def follow_eager(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`gm` with its pointwise nodes' FakeTensors restrided as eager lays them out, and
    the nodes reading them traced again (module note); unchanged when none differs."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    if not any(_common_low_dtype(n) for n in nodes):
        return gm
    from torch._guards import detect_fake_mode
    mode = detect_fake_mode([n.meta.get("val") for n in gm.graph.nodes])
    if mode is None:
        return gm
    changed: set = set()
    with mode:
        for n in nodes:
            moved = [a for a in n.all_input_nodes if a in changed]
            if moved and _retrace(n, view_of_moved=_is_view(n)):
                changed.add(n)
            if _restride(n):
                changed.add(n)
    return gm


def _common_low_dtype(n: torch.fx.Node) -> torch.dtype | None:
    """The dtype a pointwise node computes in, when it is float16/bfloat16 and the upcast
    copy of one of its inputs would be laid out anew."""
    val = n.meta.get("val")
    if not (isinstance(n.target, torch._ops.OpOverload) and torch.Tag.pointwise in n.target.tags
            and isinstance(val, torch.Tensor)):
        return None
    ins = [a.meta.get("val") for a in n.all_input_nodes]
    ins = [t for t in ins if isinstance(t, torch.Tensor)]
    ranked = [t for t in ins if t.dim() > 0] or ins
    if not ranked:
        return None
    common = functools.reduce(torch.promote_types, [t.dtype for t in ranked])
    if common not in LOW_PRECISION or not any(_laid_out_anew(t) for t in ins):
        return None
    return common


def _laid_out_anew(t: torch.Tensor) -> bool:
    """Whether the references' float32 copy of `t` has other strides than `t` (a dense
    copy of an expanded or step-sliced tensor, or other strides in size-1 dims); True
    when sizes are symbolic. The references upcast before they broadcast, so an input
    the op itself broadcasts (a bias) keeps its strides."""
    shape, stride = t.shape, t.stride()
    if not all(isinstance(x, int) for x in (*shape, *stride)):
        return True
    expected = 1
    for n, s in zip(reversed(shape), reversed(stride)):
        if s != expected:
            return tuple(compute_elementwise_output_strides(t)) != tuple(stride)
        expected *= n
    return False


def _restride(n: torch.fx.Node) -> bool:
    """Give `n` the strides its op has on float32 stand-ins of its low-precision inputs,
    if they lay it out otherwise; True if they did."""
    common = _common_low_dtype(n)
    if common is None:
        return False
    val = n.meta["val"]

    def stand_in(a):
        t = a.meta.get("val")
        if not isinstance(t, torch.Tensor) or t.dtype != common:
            return t
        return torch.empty_strided(t.shape, t.stride(), dtype=torch.float32, device=t.device)

    args, kwargs = map_arg((n.args, n.kwargs), stand_in)
    stride = n.target(*args, **kwargs).stride()
    if _same_strides(val.stride(), stride):
        return False
    n.meta["val"] = torch.empty_strided(val.shape, stride, dtype=val.dtype, device=val.device)
    return True


def _retrace(n: torch.fx.Node, view_of_moved: bool) -> bool:
    """Trace `n` again from its inputs' FakeTensors; keep the new value (True) when its
    layout differs, or when it is a view (of storage that is new)."""
    old = n.meta.get("val")
    args, kwargs = map_arg((n.args, n.kwargs), lambda a: a.meta.get("val"))
    new = n.target(*args, **kwargs)
    if not view_of_moved and _same_values(old, new):
        return False
    n.meta["val"] = new
    return True


def _same_values(a, b) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_values(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (a.dtype == b.dtype and a.shape == b.shape
                and _same_strides(a.stride(), b.stride()))
    return not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor)


def _same_strides(a, b) -> bool:
    """Equal strides, size-1 dims' too (a later op breaks ties by them: module note)."""
    return all(statically_known_true(x == y) for x, y in zip(a, b))


def _is_view(n: torch.fx.Node) -> bool:
    return n.target is operator.getitem or (
        isinstance(n.target, torch._ops.OpOverload) and n.target.is_view)
