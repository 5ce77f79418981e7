"""Linear layers whose only user is an activation run as one oneDNN call, the activation
applied to the GEMM's output while it is still in cache.

A linear layer reaches brrr as `addmm(bias, x, t(w))` (or `mm(x, t(w))`), viewed back to
the input's batch dims, and its activation as the decomposition torch's table gives it:
`relu`, `tanh`, `sigmoid`, SiLU as `x * sigmoid(x)`, exact GELU as
`x * 0.5 * (erf(x * 0.7071067811865476) + 1)`. Run that way, the GEMM writes its output and
a second kernel (brrr's, or the start of one) reads it back to apply the activation. torch
ships the fused form that inductor's CPU path uses: `mkldnn::_linear_pointwise(x, w, b,
attr)`, oneDNN's inner product with the activation as a post-op on each output tile.
Not in the default pipeline: name it in the `passes` option (WITH_EPILOGUES is the
default pipeline with it, after cse). Why (benchmarks/results/notes.md, "Linear
epilogues"): oneDNN's call has a fixed cost tens of us above addmm's, so a layer whose
activation pass is cheaper than that runs slower fused, and on large layers the gain did
not stand out of the run-to-run noise.

Only where it is safe and the same values:
- float32 CPU tensors, oneDNN present and enabled; every size a positive int (oneDNN
  refuses an empty reduction dim);
- the activation is all that reads the GEMM's output (through views that have one user
  each), and every node of the activation but its last has its users inside it: a
  pre-activation value that something else reads, such as the tensor a training graph
  saves for GELU's backward, stays as it is (ReLU's backward reads its output, so a
  training graph's ReLU folds too);
- the bias is 1-D (a linear layer's), and the weight operand is the transpose of a
  contiguous 2-D tensor (nn.Linear's weight, which oneDNN reads as it is stored; any other
  layout it reorders on every call: GPT-2's Conv1D weight, (in, out), took twice as long);
- the output has at least MIN_OUTPUT elements (below, oneDNN's fixed cost per call
  exceeds the activation pass it saves).
The replacement keeps the views: `_linear_pointwise` returns the GEMM's contiguous layout,
the activation's result had it too, and the new nodes' FakeTensors are views of that
result's, so views of it downstream stay views of one root for the runner.
"""
import logging

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten
logger = logging.getLogger("brrr.passes")

_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}
MIN_OUTPUT = 1 << 19   # output elements below which oneDNN's fixed cost exceeds the pass saved
WITH_EPILOGUES = ("conv_channels_last", "scalar_reductions", "remove_noops", "fill_constants",
                  "mask_index_put", "full_reductions", "broadcast_reductions", "cse",
                  "linear_epilogues", "dce")
_SQRT1_2 = 0.7071067811865476


def linear_epilogues(gm: GraphModule) -> GraphModule:
    """Fold each activation that is a linear layer's only user into a `_linear_pointwise`."""
    if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled):
        return gm
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in (aten.addmm.default, aten.mm.default):
            _fold(gm, node)
    return gm


def _fold(gm: GraphModule, gemm: Node) -> None:
    operands = _linear_operands(gemm)
    if operands is None:
        return
    views, value = [], gemm
    while len(value.users) == 1 and next(iter(value.users)).target in _VIEWS:
        value = next(iter(value.users))
        views.append(value)
    found = _activation(value)
    if found is None:
        return
    attr, last, inner = found
    result = _val(last)
    if result is None or not result.is_contiguous() or result.shape != _val(value).shape:
        return
    x, w, b = operands
    scalars, algorithm = ([None], "none") if attr == "gelu" else ([], "")
    with gm.graph.inserting_before(last):
        fused = gm.graph.call_function(torch.ops.mkldnn._linear_pointwise.default,
                                       (x, w, b, attr, scalars, algorithm))
        # values on the activation result's storage: views of them downstream stay
        # views of one root, which the runner rebuilds without ATen calls
        fused.meta = {**gemm.meta, "val": _fake_view(result, _val(gemm).shape)}
        out = fused
        for view in views:
            out = gm.graph.call_function(view.target, (out, *view.args[1:]), dict(view.kwargs))
            out.meta = {**view.meta, "val": _fake_view(result, _val(view).shape)}
    last.replace_all_uses_with(out)
    for dead in [last, *reversed(inner), *reversed(views), gemm]:
        if not dead.users:
            gm.graph.erase_node(dead)
    logger.debug("linear_epilogues: %s + %s -> _linear_pointwise(%s)", gemm.name, last.name, attr)


def _linear_operands(gemm: Node):
    """(x, weight, bias or None) of a float32 CPU linear layer's GEMM, else None."""
    if gemm.kwargs:                        # addmm's beta/alpha: not a plain linear layer
        return None
    bias, x, wt = (None, *gemm.args) if gemm.target is aten.mm.default else gemm.args
    if not (isinstance(wt, Node) and wt.op == "call_function" and len(wt.args) >= 1
            and (wt.target is aten.t.default or (wt.target is aten.permute.default
                                                 and list(wt.args[1]) == [1, 0]))):
        return None
    w = wt.args[0]
    vals = [_val(n) for n in (x, w, gemm)] + ([_val(bias)] if bias is not None else [])
    if any(v is None or v.dtype != torch.float32 or v.device.type != "cpu" for v in vals):
        return None
    if any(not isinstance(s, int) or s <= 0 for v in vals for s in v.shape):
        return None
    if vals[1].dim() != 2 or not vals[1].is_contiguous() or \
            (bias is not None and vals[3].shape != (vals[1].shape[0],)):
        return None
    if vals[2].numel() < MIN_OUTPUT:
        return None                        # the cost rule (module note)
    return x, w, bias


def _val(node):
    val = node.meta.get("val") if isinstance(node, Node) else None
    return val if isinstance(val, torch.Tensor) and val.layout == torch.strided else None


def _fake_view(val: torch.Tensor, shape) -> torch.Tensor:
    """`val` (a contiguous FakeTensor) viewed as `shape`, on its storage."""
    mode = getattr(val, "fake_mode", None)
    if mode is None:
        return val.view(shape)
    with mode:
        return val.view(shape)


def _only_user(node: Node):
    return next(iter(node.users)) if len(node.users) == 1 else None


def _is(node, target, *args) -> bool:
    """`node` calls `target` on exactly `args` (in either order for two of them)."""
    if not isinstance(node, Node) or node.target is not target or node.kwargs:
        return False
    return list(node.args) == list(args) or (len(args) == 2 and list(node.args) == list(args[::-1]))


def _activation(v: Node):
    """(oneDNN attr, the activation's last node, its other nodes) if `v`'s users are
    exactly one activation whose inner values nothing else reads, else None."""
    users = list(v.users)
    if len(users) == 1:
        for target, attr in ((aten.relu.default, "relu"), (aten.tanh.default, "tanh"),
                             (aten.sigmoid.default, "sigmoid")):
            if _is(users[0], target, v):
                return attr, users[0], []
        return None
    if len(users) != 2:
        return None
    for s, m in (users, users[::-1]):        # SiLU: v * sigmoid(v)
        if _is(s, aten.sigmoid.default, v) and _only_user(s) is m and _is(m, aten.mul.Tensor, v, s):
            return "swish", m, [s]
    for half, scaled in (users, users[::-1]):   # GELU: (v * 0.5) * (erf(v * sqrt(1/2)) + 1)
        if not (_is(half, aten.mul.Tensor, v, 0.5) and _is(scaled, aten.mul.Tensor, v, _SQRT1_2)):
            continue
        erf = _only_user(scaled)
        one = _only_user(erf) if _is(erf, aten.erf.default, scaled) else None
        last = _only_user(one) if _is(one, aten.add.Tensor, erf, 1) else None
        if last is not None and _only_user(half) is last and _is(last, aten.mul.Tensor, half, one):
            return "gelu", last, [half, scaled, erf, one]
    return None
