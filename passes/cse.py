"""Common-subexpression elimination over pure ATen ops.

Two pure nodes (see `passes._purity`) with the same target and the same arguments are one
value: the later one's users are handed the earlier one and the later one is erased. Nodes
are visited in order and replaced at once, so a later node's arguments already name the
survivors and chains of duplicates fold in one sweep.

Note: the key. Arguments are turned into a hashable key by type: nodes by identity, numbers
tagged with their type (True, 1 and 1.0 differ) and floats by `float.hex`, so NaN matches
NaN and -0.0 differs from 0.0; lists, tuples and slices element-wise; dtypes, devices,
layouts, memory formats, strings and None as themselves. A node with any other argument
is left alone.

Note: what is never merged. A node whose result is written to (a duplicate would not see
the write, or would see one it must not), a node returned by the graph or sharing its
storage with a returned value, such as the base of a returned view (two outputs must stay
two tensors; storages are read from the FakeTensors in `meta["val"]`), and nothing across
an op that writes memory: the table of seen values is emptied at every mutation, since a
read before it and a read after it may differ.
"""
import torch
from torch.fx import GraphModule, Node
from torch.multiprocessing.reductions import StorageWeakRef

from ._purity import feeds_mutation, is_graph_output, is_pure, mutates

_ATOMS = (str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


class _Unhashable(Exception):
    """An argument the key cannot represent faithfully."""


def _key(arg):
    """A hashable stand-in for one argument (raises _Unhashable for anything unknown)."""
    if isinstance(arg, Node):
        return arg
    if isinstance(arg, int):
        return (type(arg).__name__, arg)
    if isinstance(arg, float):
        return ("float", arg.hex())
    if isinstance(arg, complex):
        return ("complex", arg.real.hex(), arg.imag.hex())
    if isinstance(arg, (list, tuple)):
        return ("tuple" if isinstance(arg, tuple) else "list", tuple(_key(a) for a in arg))
    if isinstance(arg, slice):
        return ("slice", _key(arg.start), _key(arg.stop), _key(arg.step))
    if isinstance(arg, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in arg.items())))
    if isinstance(arg, _ATOMS):
        return (type(arg).__name__, arg)
    raise _Unhashable(type(arg).__name__)


def node_key(node: Node):
    """The node's identity as a value: target and arguments; None when not representable."""
    try:
        return (node.target, _key(node.args), _key(dict(node.kwargs)))
    except _Unhashable:
        return None


def _storage(node: Node):
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    try:
        return StorageWeakRef(val.untyped_storage())
    except NotImplementedError:
        return None


def _output_storages(gm: GraphModule) -> set:
    outputs = [n for n in gm.graph.nodes if n.op == "output"]
    storages = {_storage(a) for out in outputs for a in out.all_input_nodes}
    return storages - {None}


def cse(gm: GraphModule) -> GraphModule:
    """Merge duplicate pure nodes into their first occurrence."""
    seen: dict = {}
    returned = _output_storages(gm)
    for node in list(gm.graph.nodes):
        if mutates(node):
            seen.clear()
        if not is_pure(node) or feeds_mutation(node):
            continue
        key = node_key(node)
        if key is None:
            continue
        if key not in seen:
            seen[key] = node
        elif not is_graph_output(node) and _storage(node) not in returned:
            node.replace_all_uses_with(seen[key])
            gm.graph.erase_node(node)
    return gm
