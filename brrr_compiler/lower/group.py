"""Lowering: a fusion group (ATen nodes) -> a Kernel (loops + SSA body).

Each node is evaluated lazily at the index its consumer needs, memoized per (node,
index): a pointwise node maps the index to its inputs by broadcasting, an affine view
by its own index map, and a value from outside the group is loaded from its buffer
through the strides its FakeTensor records. The group's outputs are stored at the
loop index, so every output shares the iteration domain.
"""
from __future__ import annotations

import torch

from brrr_compiler import ops
from brrr_compiler.kernel_ir import Buffer, Kernel, loop_symbol
from brrr_compiler.lower import indexing
from brrr_compiler.lower.loops import simplify_loops
from brrr_compiler.lower.scalar_rules import Body, V, lower_node, normalized
from brrr_compiler.symbolic import free_size_symbols


def describe_node(node: torch.fx.Node) -> str:
    """`name = aten.op(args)`: a one-line origin for comments and reports."""
    def fmt(a):
        if isinstance(a, torch.fx.Node):
            return a.name
        if isinstance(a, (list, tuple)):
            return "[" + ", ".join(fmt(x) for x in a) + "]"
        return repr(a)
    args = [fmt(a) for a in node.args] + [f"{k}={fmt(v)}" for k, v in node.kwargs.items()]
    target = str(node.target).replace("aten::", "aten.")
    return f"{node.name} = {target}({', '.join(args)})"


class _GroupLowering:
    def __init__(self, group):
        self.members = set(group.nodes)
        self.body = Body()
        self.buffers: dict[torch.fx.Node, Buffer] = {}
        self.memo: dict = {}

    def buffer(self, node, is_output: bool) -> Buffer:
        if node not in self.buffers:
            prefix = "out" if is_output else "in"
            count = sum(b.is_output == is_output for b in self.buffers.values())
            dtype = node.meta["val"].dtype
            self.buffers[node] = Buffer(f"{prefix}{count}", dtype, is_output, node.name)
        return self.buffers[node]

    def value(self, node, idx: tuple) -> V:
        key = (node, idx)
        if key not in self.memo:
            self.memo[key] = self._compute(node, idx)
        return self.memo[key]

    def _compute(self, node, idx: tuple) -> V:
        val = node.meta["val"]
        if node not in self.members:
            buf = self.buffer(node, is_output=False)
            index = indexing.offset(idx, indexing.strides(val))
            return self.body.emit("load", val.dtype, buffer=buf.name, index=index)
        if ops.kind_of(node) is ops.Kind.VIEW:
            src = node.args[0]
            src_idx = indexing.view_index(node, idx, indexing.shape(src.meta["val"]),
                                          indexing.shape(val))
            return self.value(src, src_idx)
        args = {}
        for name, a in normalized(node).items():
            if isinstance(a, torch.fx.Node):
                a = self.value(a, indexing.broadcast(idx, indexing.shape(a.meta["val"])))
            args[name] = a
        return lower_node(node, args, self.body, ops.info(node.target).scalar)

    def store(self, node, idx: tuple) -> None:
        val = node.meta["val"]
        v = self.body.cast(self.value(node, idx), val.dtype)
        buf = self.buffer(node, is_output=True)
        self.body.store(buf.name, indexing.offset(idx, indexing.strides(val)), v)


def lower_group(group, name: str) -> Kernel:
    """The Kernel computing `group`'s outputs, loops ordered for its first output."""
    domain = [indexing.to_sympy(s) for s in group.domain]
    loop_vars = [loop_symbol(i) for i in range(len(domain))]
    low = _GroupLowering(group)
    for out in group.outputs:
        low.store(out, tuple(loop_vars))
    buffers = sorted(low.buffers.values(), key=lambda b: (b.is_output, int(b.name.lstrip("inout"))))
    exprs = domain + [st.index for st in low.body.stmts if st.index is not None]
    kernel = Kernel(name, [describe_node(n) for n in group.nodes], loop_vars, domain,
                    buffers, low.body.stmts, free_size_symbols(exprs))
    first_out_strides = indexing.strides(group.outputs[0].meta["val"])
    return simplify_loops(kernel, first_out_strides)
