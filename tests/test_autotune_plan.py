"""autotune_plan.tuned (max-autotune in the driver) with a stand-in tuner: the policy's
plan is made and timed against the measured one only when a measured merge went against
the policy; the faster is kept and the choice recorded with both times. No kernel is
built or timed here (tests/e2e/test_autotune.py runs the real thing)."""
import pytest

from brrr_compiler.autotune_plan import Planned, tuned
from brrr_compiler.partition import Decision, FusionPlan, MeasuredChoice


class Tuner:
    """Answers time_plans with `seconds` and measures no thread counts."""

    def __init__(self, seconds, cached=False):
        self.seconds, self.cached, self.asked, self.closed = seconds, cached, [], False
        self.threads = 2

    def time_plans(self, plans):
        self.asked.append(sorted(plans))
        return self.seconds, self.cached

    def why_not(self):
        return "stand-in"

    def close(self):
        self.closed = True


def _planned(policy: str, *decisions) -> Planned:
    return Planned(FusionPlan(None, [], list(decisions), policy), {}, {}, {}, {}, {})


def _against():
    return Decision("exp", "mul", False, "measured: fused 2 ms vs separate 1 ms",
                    {"against_policy": True})


def _with_policy():
    return Decision("sin", "exp", True, "measured: fused 1 ms vs separate 2 ms",
                    {"against_policy": False})


def test_without_a_merge_against_the_policy_nothing_more_is_made():
    made, tuner = [], Tuner({"measured": 1.0, "policy": 2.0})
    measured = _planned("greedy", _with_policy())
    assert tuned(tuner, "graph0_forward", measured, lambda: made.append(1)).plan is measured.plan
    assert not made and not tuner.asked and tuner.closed


@pytest.mark.parametrize("measured_s, policy_s, kept", [(1e-3, 2e-3, "measured"),
                                                        (2e-3, 1e-3, "policy"),
                                                        (1e-3, 1.02e-3, "policy")])   # a tie
def test_the_faster_finished_plan_is_kept_and_says_why(measured_s, policy_s, kept):
    tuner = Tuner({"measured": measured_s, "policy": policy_s})
    measured, policy = _planned("greedy", _with_policy(), _against()), _planned("greedy")
    found = tuned(tuner, "graph0_forward", measured, lambda: policy)
    assert tuner.asked == [["measured", "policy"]] and tuner.closed
    assert found.plan is (measured if kept == "measured" else policy).plan
    choice = found.plan.decisions[-1]
    assert isinstance(choice, MeasuredChoice) and choice.kind == "plan"
    assert choice.subject == "graph0_forward"
    assert choice.choice == ("the measured merges" if kept == "measured" else "greedy's plan")
    assert choice.reason == ("measured: with the merges measured against greedy (1: exp -> "
                             f"mul) {measured_s * 1e3:.3g} ms vs greedy's plan "
                             f"{policy_s * 1e3:.3g} ms per call")
    assert str(choice).startswith(f"plan graph0_forward: {choice.choice}: measured")


def test_plans_that_cannot_be_timed_keep_the_measured_one_and_say_why():
    tuner = Tuner("the policy plan's kernels did not build")
    measured = _planned("cost", _against())
    found = tuned(tuner, "graph1_backward", measured, lambda: _planned("cost"))
    assert found.plan is measured.plan
    assert str(found.plan.decisions[-1]) == ("plan graph1_backward: the measured merges: not "
                                             "measured: the policy plan's kernels did not build")
