"""Helpers of the passes that add nodes: new nodes with their FakeTensors, and the plain
reductions such passes rewrite."""
import contextlib

import torch
from torch.fx import GraphModule


def static(val: torch.Tensor) -> bool:
    """Integer sizes and strides (the FakeTensor's, which Dynamo guards)."""
    return all(isinstance(s, int) for s in (*val.shape, *val.stride()))


def fake_call(gm: GraphModule, target, args, kwargs=None):
    """A node for `target(*args)` with its FakeTensor, computed in the graph's fake mode."""
    node = gm.graph.call_function(target, args, kwargs or {})
    fake = [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args]
    mode = torch._guards.detect_fake_mode(fake)
    with mode if mode is not None else contextlib.nullcontext():
        node.meta["val"] = target(*fake, **(kwargs or {}))
    return node


def static_reduction(node, targets):
    """(its input's FakeTensor, its result's) for a node calling one of `targets` on a
    strided, non-empty tensor with static sizes and strides to a static result; else None."""
    if node.op != "call_function" or node.target not in targets:
        return None
    x, out = node.args[0], node.meta.get("val")
    val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor) or not isinstance(out, torch.Tensor) \
            or val.layout != torch.strided or not static(val) or not static(out) \
            or val.numel() == 0:
        return None
    return val, out
