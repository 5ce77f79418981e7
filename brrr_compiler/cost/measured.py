"""MeasuredPolicy: under mode="max-autotune", a merge the cost model is unsure of is
decided by timing both candidates (the kernels before and after it) on this machine.

Note on the margin. `benchmarks/results/cost_model.md` validates the model over 31
kernels: one prediction misses its measurement by a factor of 1.32 at the median (the
middle half of pred/meas lies in 0.71-1.22), and two kernels' errors differ by 1.37 at
the median (1.15 at the lower quartile). So when the predicted times before and after a
merge differ by less than about that factor (Config.autotune_margin, default 1.3), the
prediction cannot tell the two apart and the merge is measured. A verdict the model backs
beyond the margin stands unmeasured, so a chain whose fusion saves a round trip through
memory is not timed at all.

Which verdicts count as backed: the wrapped policy's own. `cost` accepts when the model
predicts a gain, so a predicted difference inside the margin, either way, is measured;
`greedy` accepts every legal merge, so every merge the model does not predict to pay by
more than the margin is measured (including those it predicts to lose: greedy's blind
spot). A merge the model cannot estimate is measured too. Refusals for size (`cost`'s
max_inputs / max_live) are limits of the C++ printer, not predictions: they stand.

A measurement goes against the wrapped policy's verdict only when the two candidates'
times differ by more than TIE (5%): repeated interleaved medians of the same pair differ
by a few percent on a shared machine, and a merge refused on noise closes the merges the
walk would have made after it. Each merge is measured as the walk meets it, between
groups that may still grow, so a refusal that pays locally can still cost the finished
plan; the driver (autotune_plan.py) therefore times the finished plan against the
policy's own whenever a measurement went against the policy, and keeps the faster.

The timing itself is the runtime's (runtime/autotune.py), handed in by the driver as
`measure(before, after)`: each side a list of (member nodes, stored nodes) kernels in the
order they run (cost.policy.kernel_sides). It returns a Measurement, or a string saying
why it could not measure (symbolic sizes, a candidate that does not lower, the Triton
target), in which case the wrapped policy's verdict stands with that reason added.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from brrr_compiler.cost.policy import CostPolicy, kernel_sides
from brrr_compiler.cost.stats import CostModelError
from brrr_compiler.partition.policy import GreedyPolicy, MergeCandidate, Verdict
from brrr_compiler.report import fmt_time

TIE = 1.05      # measured times closer than this are a tie: the policy's verdict stands


@dataclass(frozen=True)
class Measurement:
    before_s: float             # median seconds per call of the kernels before the merge
    after_s: float              # ... and after it
    cached: bool = False        # read from the measurement cache (runtime/autotune_cache.py)


Measure = Callable[[list, list], "Measurement | str"]


class MeasuredPolicy:
    """`base` (a CostPolicy or GreedyPolicy), with the merges `model` is unsure of timed
    by `measure` (the module note)."""

    def __init__(self, base, model: CostPolicy, measure: Measure, margin: float):
        self.base, self.model, self.measure, self.margin = base, model, measure, margin
        self.name = base.name
        self.recompute = getattr(base, "recompute", False)

    def decide(self, c: MergeCandidate) -> Verdict:
        verdict = self.base.decide(c)
        if isinstance(self.base, CostPolicy) and self.base.limits(c):
            return verdict
        predicted = self._predicted(c, verdict)
        if predicted is not None and self._backed(verdict.accept, *predicted):
            return verdict
        measured = self.measure(*kernel_sides(c))
        if isinstance(measured, str):
            return Verdict(verdict.accept, f"{verdict.reason}; not measured: {measured}",
                           verdict.metrics)
        return self._measured(c, verdict, predicted, measured)

    def _predicted(self, c: MergeCandidate, verdict: Verdict) -> tuple[float, float] | None:
        """(predicted seconds before, after), from the verdict's metrics when the base
        policy predicted; None when the model has no estimate."""
        if "unfused_us" in verdict.metrics and "fused_us" in verdict.metrics:
            return verdict.metrics["unfused_us"] * 1e-6, verdict.metrics["fused_us"] * 1e-6
        try:
            before, after = self.model.predict(c)
        except CostModelError:
            return None
        return (sum(k.total_s for k in before if k is not None),
                sum(k.total_s for k in after if k is not None))

    def _backed(self, accept: bool, before_s: float, after_s: float) -> bool:
        """Whether the model predicts `accept`'s side faster by more than the margin."""
        faster, slower = (after_s, before_s) if accept else (before_s, after_s)
        return slower > faster * self.margin

    def _measured(self, c, verdict: Verdict, predicted, m: Measurement) -> Verdict:
        what, other = ("recomputing", "materialized") if c.recompute else ("fused", "separate")
        tie = max(m.after_s, m.before_s) < TIE * min(m.after_s, m.before_s)
        accept = verdict.accept if tie else m.after_s < m.before_s
        model = ("the model has no estimate" if predicted is None else
                 f"model: {fmt_time(predicted[1])} vs {fmt_time(predicted[0])}, "
                 f"{self.base.name} would {'fuse' if verdict.accept else 'refuse'}")
        metrics = dict(verdict.metrics)
        if predicted is not None:
            metrics.setdefault("unfused_us", round(predicted[0] * 1e6, 3))
            metrics.setdefault("fused_us", round(predicted[1] * 1e6, 3))
        metrics.update(measured_fused_us=round(m.after_s * 1e6, 3),
                       measured_unfused_us=round(m.before_s * 1e6, 3),
                       measured_cached=m.cached, against_policy=accept != verdict.accept)
        cached = ", cached" if m.cached else ""
        tied = f", a tie within {TIE - 1:.0%}" if tie else ""
        return Verdict(accept, f"measured{cached}: {what} {fmt_time(m.after_s)} vs {other} "
                               f"{fmt_time(m.before_s)}{tied} ({model})", metrics)


def measured_where_unsure(policy, model: CostPolicy, measure: Measure, margin: float):
    """`policy` wrapped in a MeasuredPolicy when it is one of brrr's own that weighs or
    fuses (cost, greedy); "none" and the user's own policy objects stand as they are."""
    if type(policy) in (CostPolicy, GreedyPolicy):
        return MeasuredPolicy(policy, model, measure, margin)
    return policy
