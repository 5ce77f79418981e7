"""What the cost policy counts: the kernel lowering would make for a candidate group, run
by the schedule its target would choose, so an estimate prices the kernel that would be
printed (its split, tiling, scratch, column folds, mixed dtypes), not a second model of
lowering.

The cost stage sits above lowering in the pipeline, so the driver hands CostPolicy this
counter (`cost_policy` builds the pair). A partition asks about the same groups many
times (each side of a merge is the group an earlier verdict made), so counts are kept by
(members, stored nodes) for the counter's life: one graph's partition.

Note on structure. A model repeats itself (twelve identical transformer layers, a ResNet
stage's blocks), so the policy lowers the same kernel, on other nodes, many times. A
count depends only on what lowering and scheduling read of the group: each member's op,
arguments (nodes as positions: members in graph order, inputs in graph order), value
(shape, strides, dtype, ...) and, of its origin, what lowering reads (whether a cast is
one the program wrote), the inputs' values, which members are stored. Counts
are also kept by that structure, so a repeat of a counted group is not lowered again;
errors are not (their messages name the group's own nodes).
"""
from __future__ import annotations

import torch

from brrr_compiler.cost import CostModelError, CostPolicy, DeviceSpec, KernelStats, kernel_stats
from brrr_compiler.cost.stats import KernelNotLowered, size_hints
from brrr_compiler.lower.group import lower_group
from brrr_compiler.lower.scalar_rules import written_cast
from brrr_compiler.partition.domains import split_domain
from brrr_compiler.partition.partitioner import group_of_members
from brrr_compiler.schedule import choose
from brrr_compiler.symbolic import shape, strides, to_sympy


class LoweredCount:
    """count(members, stored) -> KernelStats of the lowered, scheduled kernel; a group
    that does not lower raises KernelNotLowered."""

    def __init__(self, target: str = "cpp", threads: int = 1, low_precision: str = "float32",
                 prefetch: bool = False):
        self.target, self.threads, self.prefetch = target, threads, prefetch
        self.round_results = low_precision == "eager"
        self._counts: dict = {}
        self._by_structure: dict = {}
        self._graph, self._order = None, {}

    def __call__(self, members, stored) -> KernelStats:
        key = (frozenset(members), tuple(stored))
        if key not in self._counts:
            self._counts[key] = self._count(set(members), list(stored))
        found = self._counts[key]
        if isinstance(found, CostModelError):
            raise found
        return found

    def _count(self, members: set, stored: list) -> KernelStats | CostModelError:
        """The count, or the error to raise (kept, so a group is lowered at most once)."""
        domain = split_domain(members)[0]
        if isinstance(domain, str):
            return CostModelError(domain)
        group = group_of_members(0, members, stored, self._positions(members))
        form = structure(group)
        if form in self._by_structure:
            return self._by_structure[form]
        found = self._lowered(group)
        if not isinstance(found, CostModelError):
            self._by_structure[form] = found
        return found

    def _lowered(self, group) -> KernelStats | CostModelError:
        try:
            kernel = lower_group(group, "candidate", use_scratch=self.target == "cpp",
                                 round_results=self.round_results)
            schedule = choose(kernel, self.target, self.threads, prefetch=self.prefetch)
        except NotImplementedError as err:
            return KernelNotLowered(f"the kernel would not lower: {str(err).removeprefix('brrr: ')}")
        vals = [n.meta.get("val") for n in [*group.nodes, *group.inputs]]
        try:
            return kernel_stats(kernel, schedule, size_hints(vals))
        except CostModelError as err:
            return err

    def _positions(self, members) -> dict:
        """Graph order of every node of the members' graph (read again after the
        partitioner adds nodes, e.g. the copies of a shared view)."""
        graph = next(iter(members)).graph
        if graph is not self._graph or any(n not in self._order for n in members):
            self._graph, self._order = graph, {n: i for i, n in enumerate(graph.nodes)}
        return self._order


def structure(group) -> tuple:
    """What lowering and scheduling read of `group` (the note at the top), hashable."""
    ref = {n: i for i, n in enumerate(group.nodes)}
    ref.update({n: -1 - i for i, n in enumerate(group.inputs)})

    def arg(a):
        if isinstance(a, torch.fx.Node):
            return ("node", ref[a])
        if isinstance(a, (list, tuple)):
            return (type(a).__name__, tuple(arg(x) for x in a))
        return _leaf(a)
    members = tuple((n.target, arg(n.args), arg(tuple(n.kwargs.items())), _value(n),
                     written_cast(n)) for n in group.nodes)
    return members, tuple(_value(n) for n in group.inputs), tuple(ref[n] for n in group.outputs)


def _value(node) -> tuple:
    return _of_value(node.meta.get("val"))


def _of_value(val) -> tuple:
    if isinstance(val, torch.Tensor):
        return ("tensor", shape(val), strides(val), val.dtype, val.device, val.layout,
                to_sympy(val.storage_offset()))
    if isinstance(val, (list, tuple)):
        return (type(val).__name__, tuple(_of_value(v) for v in val))
    return _leaf(val)


def _leaf(x) -> tuple:
    """A constant argument, its type kept (1, 1.0 and True are equal in Python) and a
    float by its repr (0.0 and -0.0 are equal too)."""
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ("sym", str(x.node.expr))
    if x is None or isinstance(x, (bool, int, str, torch.dtype, torch.device, torch.layout,
                                   torch.memory_format, torch._ops.OpOverload)):
        return (type(x).__name__, x)
    return (type(x).__name__, repr(x))


def cost_policy(device: DeviceSpec | None = None, target: str = "cpp", threads: int | None = None,
                low_precision: str = "float32", **limits) -> CostPolicy:
    """The "cost" fusion policy on `device` (DeviceSpec; the generic CPU by default),
    counting the kernels `target` would print at `threads` threads (torch's count by
    default). `limits`: CostPolicy's max_inputs, max_live, strict."""
    count = LoweredCount(target, threads or torch.get_num_threads(), low_precision,
                         prefetch=bool(device and device.stream_prefetch))
    return CostPolicy(device, count, **limits)
