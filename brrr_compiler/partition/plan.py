"""FusionPlan: the partitioner's output — groups of ATen nodes, and why they were formed."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.fx


@dataclass
class Decision:
    """One candidate merge and what the policy (or legality) said about it."""
    producer: str               # name of the producer group
    consumer: str               # name of the consumer group
    accepted: bool
    reason: str
    metrics: dict[str, Any] = field(default_factory=dict)   # predicted times, bytes saved, ...

    def __str__(self) -> str:
        verdict = "fuse  " if self.accepted else "refuse"
        extra = "".join(f" {k}={_fmt(v)}" for k, v in self.metrics.items())
        return f"{verdict} {self.producer} -> {self.consumer}: {self.reason}{extra}"


@dataclass
class MeasuredChoice:
    """A choice mode="max-autotune" made by measurement, recorded beside the fusion
    decisions: how one kernel runs (kind "schedule": its thread count), or which of two
    finished plans a graph keeps (kind "plan")."""
    kind: str                   # "schedule" or "plan"
    subject: str                # the kernel's or the graph's name
    choice: str                 # e.g. "1 thread"
    reason: str
    metrics: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        extra = "".join(f" {k}={_fmt(v)}" for k, v in self.metrics.items())
        return f"{self.kind} {self.subject}: {self.choice}: {self.reason}{extra}"


def _fmt(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


@dataclass
class Group:
    """Nodes that become one generated kernel.

    `outputs` are the nodes whose values leave the group (they are stored); every other
    node is computed inside the kernel, at whatever index its consumers need.
    """
    id: int
    nodes: list[torch.fx.Node]
    outputs: list[torch.fx.Node]
    inputs: list[torch.fx.Node]
    domain: tuple                  # the iteration shape (a reduction's full input shape)
    reduced_dims: tuple = ()       # dims of the domain that the group reduces
    across: tuple = ()             # reductions that fold across rows (domains.py)
    columns: tuple = ()            # reductions over the rows, one value per column (domains.py)

    @property
    def name(self) -> str:
        names = [getattr(n.target, "__name__", str(n.target)).split(".")[0]
                 for n in self.nodes]
        ops = [op for op in dict.fromkeys(names) if op not in ("view", "expand", "clone", "alias")]
        ops = ops or list(dict.fromkeys(names))     # a kernel that only copies: "clone"
        return f"k{self.id}_" + "_".join(ops[:5]) + ("_etc" if len(ops) > 5 else "")


@dataclass
class FusionPlan:
    graph: torch.fx.GraphModule
    groups: list[Group]
    decisions: list            # Decisions, then any MeasuredChoices
    policy: str

    def group_of(self) -> dict[torch.fx.Node, Group]:
        return {n: g for g in self.groups for n in g.nodes}

    def aten_nodes(self) -> list[torch.fx.Node]:
        """Nodes that run through ATen (everything not in a group)."""
        grouped = self.group_of()
        return [n for n in self.graph.graph.nodes
                if n.op == "call_function" and n not in grouped]

    def __str__(self) -> str:
        lines = [f"FusionPlan ({self.policy}): {len(self.groups)} kernels"]
        for g in self.groups:
            lines.append(f"  {g.name}: domain={list(g.domain)} nodes={[n.name for n in g.nodes]}"
                         f" outputs={[n.name for n in g.outputs]}")
        aten_nodes = self.aten_nodes()
        if aten_nodes:
            lines.append(f"  aten: {[n.name for n in aten_nodes]}")
        lines += [f"  {d}" for d in self.decisions]
        return "\n".join(lines)


def describe(members) -> str:
    """A short name for a set of nodes in a Decision: its first three names and how many
    more (two groups that share their first names still read apart)."""
    names = sorted((n.name for n in members), key=lambda name: (len(name), name))
    return "+".join(names[:3]) + (f"+{len(names) - 3} more" if len(names) > 3 else "")
