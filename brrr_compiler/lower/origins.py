"""Where a kernel's statements come from: one line per ATen node, for the comment that
ties each generated kernel to its nodes and for reports."""
from __future__ import annotations

import torch


def _fmt_arg(a) -> str:     # not a closure: a recursive one is a reference cycle
    if isinstance(a, torch.fx.Node):
        return a.name
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(_fmt_arg(x) for x in a) + "]"
    return repr(a)


def describe_node(node: torch.fx.Node) -> str:
    """`name = aten.op(args)`: a one-line origin for comments and reports."""
    args = [_fmt_arg(a) for a in node.args] + [f"{k}={_fmt_arg(v)}" for k, v in node.kwargs.items()]
    target = str(node.target).replace("aten::", "aten.")
    return f"{node.name} = {target}({', '.join(args)})"
