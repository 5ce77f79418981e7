"""The inputs of a runnable dump (script.py): each placeholder's shape, strides, storage
offset and dtype, and for an integer tensor the range its random values are drawn from.

An integer input is often an index: random values past the dimension it indexes would
make ATen raise where the graph ran fine. So each integer placeholder is followed through
views to the ops that index with it (gather, scatter, index_select, embedding, nll_loss,
index, ...), and its values stay below the smallest dimension those index. One that
indexes nothing known is kept below the smallest dimension of any tensor in the graph.
Symbolic sizes become the sizes they were compiled for.
"""
from __future__ import annotations

import torch
import torch.fx

from brrr_compiler import ops

# op -> the argument holding the indexed tensor and the one holding the indexed dim
_DIM_OPS = {name: ("self", "dim") for name in (
    "gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index_add",
    "index_copy", "index_fill", "take_along_dim")}
_INDEX_LIST_OPS = ("index", "_unsafe_index", "index_put", "_unsafe_index_put")
# ops whose result holds (some of) the values of an input unchanged: followed like views
# (a loss's targets reach its gather through where(target != ignore_index, target, 0))
_PASS_VALUES = ("where", "clone", "_to_copy", "masked_fill", "lift_fresh_copy", "contiguous")


def hint(x) -> int:
    """`x` as the int it was compiled for (a SymInt's hint)."""
    if isinstance(x, torch.SymInt):
        value = x.node.hint
        if value is None:
            raise NotImplementedError("an input size has no value to run with (unbacked)")
        return int(value)
    return int(x)


def input_specs(graph: torch.fx.Graph) -> list:
    """Per placeholder: (shape, stride, storage offset, dtype, device[, high]) for a
    tensor (high: integer values are drawn from [0, high)), or an int for a size."""
    fallback = smallest_dim(graph)
    specs = []
    for node in graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            specs.append(tensor_spec(node, fallback))
        elif isinstance(val, (int, torch.SymInt)) and not isinstance(val, bool):
            specs.append(hint(val))
        else:
            raise NotImplementedError(f"input {node.name} is a {type(val).__name__}")
    return specs


def tensor_spec(node: torch.fx.Node, fallback: int) -> tuple:
    """(shape, stride, storage offset, dtype, device[, high]) of the tensor `node`
    computes; `fallback`: the bound of an integer tensor that indexes nothing known
    (smallest_dim)."""
    val = node.meta["val"]
    spec = (tuple(hint(s) for s in val.shape), tuple(hint(s) for s in val.stride()),
            hint(val.storage_offset()), val.dtype, str(val.device))
    integer = not (val.dtype.is_floating_point or val.dtype.is_complex or val.dtype == torch.bool)
    return spec + (_index_high(node, fallback),) if integer else spec


def smallest_dim(graph: torch.fx.Graph) -> int:
    dims = [hint(d) for n in graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)
            for d in n.meta["val"].shape]
    return max(1, min([d for d in dims if d > 0], default=1))


def _index_high(node: torch.fx.Node, fallback: int) -> int:
    """Below the smallest dimension `node` (or a view of it) indexes; else `fallback`."""
    bounds, todo = [], [node]
    while todo:
        value = todo.pop()
        for user in value.users:
            if user.op == "call_function" and (ops.kind_of(user) is ops.Kind.VIEW
                                               or _name(user) in _PASS_VALUES):
                todo.append(user)
            elif user.op == "call_function":
                bound = _bound(user, value)
                bounds += [bound] if bound else []
    return max(1, min(bounds, default=fallback))


def _by_name(node: torch.fx.Node) -> dict:
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return {}
    args = {a.name: v for a, v in zip(schema.arguments, node.args)}
    return {**args, **node.kwargs}


def _size(node, dim) -> int | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor) or not isinstance(dim, int) or val.dim() == 0:
        return None
    return hint(val.shape[dim])


def _name(node: torch.fx.Node) -> str:
    return getattr(getattr(node.target, "_overloadpacket", None), "__name__", "")


def _bound(user: torch.fx.Node, value: torch.fx.Node) -> int | None:
    """The size of the dimension `user` indexes with `value`, when `user` is known."""
    name, args = _name(user), _by_name(user)
    if name in _DIM_OPS and args.get(_DIM_OPS[name][0]) is not value:
        return _size(args.get(_DIM_OPS[name][0]), args.get(_DIM_OPS[name][1]))
    if name == "embedding" and args.get("indices") is value:
        return _size(args.get("weight"), 0)
    if name == "embedding_dense_backward" and args.get("indices") is value:
        return hint(args["num_weights"])
    if name.startswith("nll_loss") and args.get("target") is value:
        x = args.get("self")
        return _size(x, 1 if x.meta["val"].dim() > 1 else 0)
    if name in _INDEX_LIST_OPS:
        positions = [i for i, t in enumerate(args.get("indices") or []) if t is value]
        return _size(args.get("self"), positions[0]) if positions else None
    return None
