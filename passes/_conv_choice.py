"""Which of the convolutions conv_channels_last.py may put channels-last stay so, from
their layouts timed on this machine (_conv_timing.py has the note).

A forward convolution timed faster NCHW goes NCHW only where every convolution after it
does too: a layout change reaches the other ops of the graph, which the timing of one
convolution does not see (a lone NCHW downsampling convolution inside ConvNeXt at batch
1, timed 1.25x faster alone, made the model 1.13x slower), while a run of NCHW
convolutions to the end of the network (ResNet's last stage over 2x2 pixels) pays one
copy. A backward convolution follows the forward one of its shapes.
"""
import torch
from torch.fx import Node

from ._conv_timing import clearly_faster_channels_last, faster_channels_last

aten = torch.ops.aten

# op -> positions of its tensor arguments that go channels-last
LAYOUT_ARGS = {
    aten.convolution.default: (0, 1),
    aten.convolution_backward.default: (0, 1, 2),
}


def is_channels_last(val: torch.Tensor) -> bool:
    return val.is_contiguous(memory_format=torch.channels_last)


def weight_position(node: Node) -> int:
    """Where the weight is among the arguments of a convolution or its backward."""
    return 1 if node.target is aten.convolution.default else 2


def timed_choice(convs: list, left_nchw: set = frozenset()) -> list:
    """The convolutions of `convs` (in graph order) that stay channels-last: all but the
    forward ones timed faster NCHW (each with its input channels-last where a convolution
    comes before it: _conv_timing.py) whose every convolution downstream goes NCHW too
    (or is in `left_nchw`, convolutions that stay NCHW anyway), and the backward ones of
    those (the module note)."""
    faster = {n for n in convs if n.target is aten.convolution.default and not
              faster_channels_last(*_shapes(n), _input_nhwc(n))}
    nchw: set = set()
    for n in reversed(convs):
        if n in faster and all(d in nchw or d in left_nchw for d in _convs_after(n)):
            nchw.add(n)
            _NCHW_FORWARD.add(_key(n))
    nchw |= {n for n in convs if n.target is not aten.convolution.default
             and _key(n) in _NCHW_FORWARD}
    return [n for n in convs if n not in nchw]


def timed_paying(unpaid: list) -> list:
    """The forward convolutions of `unpaid` (whose arithmetic does not obviously repay
    their copies) that timed clearly faster channels-last, copies counted, and the
    backward ones of their shapes: these are taken as paying (ResNet's last stage at batch
    1 on the AMD EPYC VM, _conv_timing.py)."""
    for n in unpaid:
        if n.target is aten.convolution.default and clearly_faster_channels_last(
                *_shapes(n), _input_nhwc(n)):
            _PAYING_FORWARD.add(_key(n))
    return [n for n in unpaid if _key(n) in _PAYING_FORWARD]


# the forward convolutions (by _key) taken channels-last by timed_paying, which their
# backward ones follow (as _NCHW_FORWARD's)
_PAYING_FORWARD: set = set()


# the forward convolutions (by _key) left NCHW, which their backward ones follow (the
# backward graph is compiled after its forward one, in the same process)
_NCHW_FORWARD: set = set()


def _shapes(node: Node) -> tuple:
    """(input, weight, stride, padding, dilation, groups, copy_weight) of the forward
    convolution `node` is or differentiates."""
    forward = node.target is aten.convolution.default
    w = node.args[weight_position(node)]
    x = node.args[weight_position(node) - 1]
    stride, padding, dilation = node.args[3:6] if forward else node.args[4:7]
    groups = node.args[8] if forward else node.args[9]
    copy_weight = w.op == "placeholder" and not is_channels_last(w.meta["val"])
    return x.meta["val"], w.meta["val"], stride, padding, dilation, groups, copy_weight


def _key(node: Node) -> tuple:
    x, w, *rest = _shapes(node)
    return (tuple(x.shape), tuple(w.shape), x.dtype, *(tuple(r) if isinstance(r, (list, tuple))
                                                        else r for r in rest[:-1]))


def _input_nhwc(conv: Node) -> bool:
    """Whether the forward convolution's input arrives channels-last: after an earlier
    convolution (the default's layout) or laid out so already."""
    return _after_a_conv(conv.args[0]) or _nhwc(conv.args[0])


def _nhwc(node: Node) -> bool:
    val = node.meta["val"]
    return is_channels_last(val) and not val.is_contiguous()


def _convs_after(node: Node) -> set:
    """The convolutions downstream of `node` nearest to it (a walk stops at each)."""
    found, seen, queue = set(), {node}, list(node.users)
    while queue:
        n = queue.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.target in LAYOUT_ARGS:
            found.add(n)
        else:
            queue.extend(n.users)
    return found


def _after_a_conv(node: Node, limit: int = 64) -> bool:
    """Whether a convolution is upstream of `node` (breadth first, `limit` nodes)."""
    seen, queue = {node}, [node]
    while queue and len(seen) <= limit:
        n = queue.pop(0)
        if n.target in LAYOUT_ARGS:
            return True
        for i in n.all_input_nodes:
            if i not in seen:
                seen.add(i)
                queue.append(i)
    return False
