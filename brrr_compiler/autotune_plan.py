"""max-autotune's steps in the driver, after the partitioner's walk measured the merges
the cost model was unsure of (cost/measured.py).

Note on the finished plan. Each merge is measured as the walk meets it, between groups
that may still grow. A refusal that pays there can cost the finished plan: a norm's row
statistics kept out of the row kernel they were about to join keep the rows' normalized
values from joining it later, and the graph ends with three kernels where the policy
made one. So when any measured merge went against the policy, the graph is partitioned
once more by the policy alone, both finished plans are built and timed as whole graphs
(runtime/autotune.py: the runner on random inputs of the graph's layouts), and the
measured plan is kept only when it is faster by more than a tie (cost/measured.py's TIE). The choice is recorded as a MeasuredChoice of kind "plan" after the kept
plan's decisions, naming the merges that went against the policy. Then each kernel of
the kept plan has its thread count measured (runtime/autotune_threads.py).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from brrr_compiler.cost.measured import TIE
from brrr_compiler.partition import FusionPlan, MeasuredChoice
from brrr_compiler.report import fmt_time
from brrr_compiler.runtime.autotune_threads import choose_threads


class Planned(NamedTuple):
    """A partitioned and lowered graph: what the driver builds."""
    plan: FusionPlan
    kernels: dict               # group id -> Kernel
    specs: dict                 # group id -> output specs
    printed: dict               # kernel name -> C++ source
    schedules: dict             # group id -> the kernel's schedule (its thread count aside)
    not_run: dict               # group id -> why it runs through ATen


def tuned(tuner, name: str, measured: Planned, by_policy: Callable[[], Planned]) -> Planned:
    """`measured` (the plan the measurements made), or the plan `by_policy()` makes
    where it runs faster as a whole (the module note), its kernels' thread counts
    measured; `tuner`: the graph's Autotuner, `name`: the graph's."""
    try:
        found = _faster_plan(tuner, name, measured, by_policy)
        outputs = {g.id: g.outputs for g in found.plan.groups}
        printed, schedules = choose_threads(tuner, found.kernels, outputs, found.printed)
        found.plan.decisions.extend(schedules)
        return found._replace(printed=printed)
    finally:
        tuner.close()


def _faster_plan(tuner, name: str, measured: Planned, by_policy) -> Planned:
    against = [d for d in measured.plan.decisions if d.metrics.get("against_policy")]
    if not against:
        return measured
    policy = by_policy()
    seconds, cached = tuner.time_plans({p: (x.plan, x.kernels, x.specs, x.printed)
                                        for p, x in (("measured", measured), ("policy", policy))})
    merges = "; ".join(f"{d.producer} -> {d.consumer}" for d in against)
    if isinstance(seconds, str):
        measured.plan.decisions.append(MeasuredChoice(
            "plan", name, "the measured merges", f"not measured: {seconds}"))
        return measured
    # as for a merge, the measurements must beat the policy by more than a tie
    keep = measured if seconds["measured"] * TIE < seconds["policy"] else policy
    which = "the measured merges" if keep is measured else f"{measured.plan.policy}'s plan"
    keep.plan.decisions.append(MeasuredChoice(
        "plan", name, which,
        f"measured{', cached' if cached else ''}: with the merges measured against "
        f"{measured.plan.policy} "
        f"({len(against)}: {merges}) {fmt_time(seconds['measured'])} vs "
        f"{measured.plan.policy}'s plan {fmt_time(seconds['policy'])} per call",
        {"measured_plan_us": round(seconds["measured"] * 1e6, 3),
         "policy_plan_us": round(seconds["policy"] * 1e6, 3), "measured_cached": cached}))
    return keep
