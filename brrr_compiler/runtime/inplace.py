"""Kernels that store a mutated input's new value into the input itself.

Note on why. A graph that mutates an input (`x.add_(1)`, `x.fill_(0)`, an optimizer's
`param.add_(update)`) reaches brrr functionalized: a kernel computes the new value into a
fresh tensor, and `copy_(x, new)` at the end writes it back. That is a fresh output
allocated and written, then read again and written once more: `x.add_(2)` on 1M floats
took 225 us against eager's 55 (one thread, the kernel 110 us of it, the copy 100 us). A
kernel can store the new value straight into `x`, as eager's in-place op does, and the
copy disappears, when nothing can tell the difference:

- `x` is a graph input, dense and non-overlapping, with the new value's shape, strides
  and dtype, and the new value comes out of a CPU kernel with static sizes that computes
  every element of it pointwise (no reduction, no index remapping: each element of `x`
  that the kernel reads, it reads in the iteration that stores the same element);
- inside the kernel, `x` is read only directly by pointwise ops (not through a view, a
  gather, a cat), and the kernel reads no other tensor sharing `x`'s storage;
- every other reader of `x` or of a view of it runs before the kernel: the runner orders
  them so, or, where the graph does not allow that order, the value is copied back as
  before;
- the new value is not a graph output and no view of it is one (it would alias `x`), and
  `x` is written back only once.
Then the copy_ node returns `x` and the kernel's output is `x`.
"""
from __future__ import annotations

import networkx as nx
import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false as _dense

from brrr_compiler import ops
from brrr_compiler.runtime.reinterpret import storage_key, strided_val

aten = torch.ops.aten
# pointwise in the op table but reading an input at remapped indices
_REMAPPING = frozenset({aten.gather.default, aten.embedding.default, aten.cat.default,
                        aten.slice_scatter.default})


def write_backs(graph: torch.fx.Graph) -> list[tuple]:
    """(copy_ node, input placeholder, new value node) for each input written back once."""
    copies = [n for n in graph.nodes
              if n.op == "call_function" and n.target is aten.copy_.default
              and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder"]
    targets = [c.args[0] for c in copies]
    return [(c, c.args[0], c.args[1]) for c in copies
            if targets.count(c.args[0]) == 1 and isinstance(c.args[1], torch.fx.Node)]


def may_alias(group, kernel, backs: list[tuple]) -> frozenset[str]:
    """The buffers of `kernel` (lowered from `group`) that plan() may make one tensor: an
    input x and the output whose value `backs` (write_backs) writes into x. Their
    pointers must not be `__restrict`: with them so, gcc 12 re-read an input after the
    store of the same element, as a memory operand (`x0[m] = 0; lerp(x0, x0_old + 2,
    0.25)` came out wrong: fuzz seed 177653). Without it, the kernel's `omp simd` loops
    still vectorize (each element read before it is stored, in the same iteration)."""
    names: set = set()
    for _, x, value in backs:
        if x in group.inputs and value in group.outputs:
            names |= {b.name for b in kernel.buffers if b.origin in (x.name, value.name)}
    return frozenset(names)


def _same_layout(x, v) -> bool:
    return (x.shape == v.shape and x.dtype == v.dtype and x.device == v.device
            and all(a == b for n, a, b in zip(x.shape, x.stride(), v.stride()) if n > 1)
            and _dense(x) and x.numel() > 0)


def eligible(copy_node, x, value, group, kernel) -> bool:
    """Whether `group` (built as `kernel`) may store `value` into input `x` (module note),
    as far as the group and the value's users go; the order of x's other readers is the
    caller's to arrange."""
    xv, vv = strided_val(x), strided_val(value)
    if xv is None or vv is None or not _same_layout(xv, vv) or group.reduced_dims \
            or kernel.device is not None or kernel.size_vars or kernel.tensor_args \
            or tuple(group.domain) != tuple(vv.shape) or value not in group.outputs:
        return False
    members, storage = set(group.nodes), storage_key(xv)
    for n in group.nodes:
        if x in n.all_input_nodes and (ops.kind_of(n) is not ops.Kind.POINTWISE
                                       or n.target in _REMAPPING):
            return False
    if any(storage_key(strided_val(i)) == storage for i in group.inputs
           if i is not x and strided_val(i) is not None):
        return False                 # a view of x read through another pointer
    for u in value.users:
        if u.op == "output" or (u is not copy_node and u not in members
                                and storage_key(strided_val(u)) == storage_key(vv)):
            return False             # the new value, or a view of it, leaves the graph
    return True


def other_readers(graph: torch.fx.Graph, x, copy_node, group) -> list | None:
    """The nodes outside `group` that read `x` or a tensor sharing its storage (they must
    run before the group), or None when the graph's output is one of them (other than
    through the copy_, which returns x written)."""
    storage, members = storage_key(strided_val(x)), set(group.nodes)
    aliases = {n for n in graph.nodes if n is not copy_node and strided_val(n) is not None
               and storage_key(strided_val(n)) == storage}     # copy_ returns x, written
    readers = []
    for a in aliases:
        for u in a.users:
            if u.op == "output":
                return None
            if u is not copy_node and u not in members and u not in aliases:
                readers.append(u)
    return readers


def plan(graph: torch.fx.Graph, groups: dict, compiled: dict, grouped: dict, dag) -> dict:
    """{copy_ node: (input x, group id, output index)} for the write-backs a kernel makes
    in place, with edges added to the runner's unit `dag` ((kind, key) nodes) so that
    x's other readers run before that kernel (module note)."""
    def unit(n):
        return ("group", grouped[n].id) if n in grouped else ("node", n.name)

    chosen = {}
    for copy_node, x, value in write_backs(graph):
        group = grouped.get(value)
        if group is None or group.id not in compiled \
                or not eligible(copy_node, x, value, group, compiled[group.id]):
            continue
        readers = other_readers(graph, x, copy_node, group)
        if readers is None:
            continue
        target = ("group", group.id)
        edges = [(unit(r), target) for r in readers
                 if unit(r) != target and not dag.has_edge(unit(r), target)]
        dag.add_edges_from(edges)
        if not nx.is_directed_acyclic_graph(dag):
            dag.remove_edges_from(edges)
            continue
        chosen[copy_node] = (x, group.id, groups[group.id].outputs.index(value))
    return chosen


def into_call(fn, ptr, pointers, alloc, static, nin: int, into: tuple):
    """The kernel call of runner.make_call whose outputs `into` are the tensors passed
    after its `nin` inputs, in that order; its other outputs are allocated as usual."""
    def call(*args):
        given = dict(zip(into, args[nin:]))
        outs = [given[j] if j in given else alloc(sh, st, dt)
                for j, (sh, st, dt) in enumerate(static)]
        fn(*pointers(args[:nin]), *map(ptr, outs))
        return outs
    return call
