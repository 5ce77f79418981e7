"""Fusion policies: given a legal merge, does it pay?

A policy is any object with a `name` and a method
    decide(candidate: MergeCandidate) -> Verdict
The partitioner proposes only legal merges; the policy answers yes or no with a reason
(and, for the cost model, its predictions). Researchers pass their own object as
`options={"fusion": my_policy}`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable




@dataclass
class MergeCandidate:
    producer: frozenset            # nodes of the producer group
    consumer: frozenset            # nodes of the consumer group
    merged_outputs: list           # nodes the merged group would store
    merged_inputs: list            # external nodes the merged group would read
    graph_outputs: frozenset       # the graph's output nodes (for the policy's own checks)
    # a recompute offer (only to policies with `recompute = True`): the producer nodes each
    # reader group (`readers`; `consumer` is their union) would compute again from their
    # inputs instead of reading the stored value; producer nodes left unread are erased
    recompute: frozenset = frozenset()
    readers: tuple = ()


@dataclass
class Verdict:
    accept: bool
    reason: str
    metrics: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class FusionPolicy(Protocol):
    name: str

    def decide(self, candidate: MergeCandidate) -> Verdict: ...


class GreedyPolicy:
    """Fuse everything legal."""
    name = "greedy"

    def decide(self, candidate: MergeCandidate) -> Verdict:
        return Verdict(True, "legal; the greedy policy fuses every legal merge")


class NoFusionPolicy:
    """One kernel per op: the baseline a fusion policy has to beat."""
    name = "none"

    def decide(self, candidate: MergeCandidate) -> Verdict:
        return Verdict(False, "the 'none' policy fuses nothing")


def policy_from_option(fusion: Any, device=None) -> FusionPolicy:
    """The policy named by options["fusion"] ("cost" predicts on `device`, a DeviceSpec),
    or the user's own policy object."""
    if isinstance(fusion, str):
        from brrr_compiler.cost.policy import CostPolicy      # cost imports partition
        table = {"cost": lambda: CostPolicy(device), "greedy": GreedyPolicy, "none": NoFusionPolicy}
        if fusion not in table:
            raise ValueError(f"brrr: unknown fusion policy {fusion!r}; expected one of {sorted(table)}")
        return table[fusion]()
    if not callable(getattr(fusion, "decide", None)) or not hasattr(fusion, "name"):
        raise TypeError("brrr: a fusion policy object needs a `name` and a "
                        "`decide(candidate) -> Verdict` method")
    return fusion


__all__ = ["MergeCandidate", "Verdict", "FusionPolicy", "GreedyPolicy", "NoFusionPolicy",
           "policy_from_option"]
