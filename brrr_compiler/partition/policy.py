"""Fusion policies: given a legal merge, does it pay?

A policy is any object with a `name` and a method
    decide(candidate: MergeCandidate) -> Verdict
The partitioner proposes only legal merges; the policy answers yes or no with a reason
(and, for the cost model, its predictions). Researchers pass their own object as
`options={"fusion": my_policy}`; the built-in ones by name through
cost.policy_from_option (the cost model's policy is a later stage's).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from brrr_compiler.partition.plan import describe


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


class PolicyError(RuntimeError):
    """A fusion policy raised, or answered something other than a Verdict."""


def ask(policy, candidate: MergeCandidate) -> Verdict:
    """policy.decide(candidate), with an error naming the policy and the merge when the
    policy raises or answers something other than a Verdict: a researcher's policy with a
    bug should say so, not be silently replaced by ATen."""
    name = getattr(policy, "name", type(policy).__name__)
    merge = f"{describe(candidate.producer)} into {describe(candidate.consumer)}"
    try:
        verdict = policy.decide(candidate)
    except Exception as err:
        raise PolicyError(f"brrr: fusion policy {name!r} raised {type(err).__name__}: {err} "
                          f"when asked about merging {merge}") from err
    if not isinstance(verdict, Verdict) or not isinstance(verdict.accept, bool):
        raise PolicyError(f"brrr: fusion policy {name!r} answered {verdict!r} when asked about "
                          f"merging {merge}; decide() must return a Verdict(accept: bool, "
                          "reason: str)")
    return verdict


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


__all__ = ["MergeCandidate", "Verdict", "FusionPolicy", "GreedyPolicy", "NoFusionPolicy",
           "PolicyError", "ask"]
