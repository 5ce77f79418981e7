"""What the cost policy counts: the kernel lowering would make for a candidate group, run
by the schedule its target would choose, so an estimate prices the kernel that would be
printed (its split, tiling, scratch, column folds, mixed dtypes), not a second model of
lowering.

The cost stage sits above lowering in the pipeline, so the driver hands CostPolicy this
counter (`cost_policy` builds the pair). A partition asks about the same groups many
times (each side of a merge is the group an earlier verdict made), so counts are kept by
(members, stored nodes) for the counter's life: one graph's partition.
"""
from __future__ import annotations

import torch

from brrr_compiler.cost import CostModelError, CostPolicy, DeviceSpec, KernelStats, kernel_stats
from brrr_compiler.cost.stats import KernelNotLowered, size_hints
from brrr_compiler.lower.group import lower_group
from brrr_compiler.partition.domains import split_domain
from brrr_compiler.partition.partitioner import group_of_members
from brrr_compiler.schedule import choose


class LoweredCount:
    """count(members, stored) -> KernelStats of the lowered, scheduled kernel; a group
    that does not lower raises KernelNotLowered."""

    def __init__(self, target: str = "cpp", threads: int = 1, low_precision: str = "float32"):
        self.target, self.threads = target, threads
        self.round_results = low_precision == "eager"
        self._counts: dict = {}
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
        try:
            kernel = lower_group(group, "candidate", use_scratch=self.target == "cpp",
                                 round_results=self.round_results)
            schedule = choose(kernel, self.target, self.threads)
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


def cost_policy(device: DeviceSpec | None = None, target: str = "cpp", threads: int | None = None,
                low_precision: str = "float32", **limits) -> CostPolicy:
    """The "cost" fusion policy on `device` (DeviceSpec; the generic CPU by default),
    counting the kernels `target` would print at `threads` threads (torch's count by
    default). `limits`: CostPolicy's max_inputs, max_live, strict."""
    count = LoweredCount(target, threads or torch.get_num_threads(), low_precision)
    return CostPolicy(device, count, **limits)
