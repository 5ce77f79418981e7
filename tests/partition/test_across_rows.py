"""Folds across rows (partition/domains.py): a reduction of per-row values to one value
joins the row kernel — cross-entropy's mean over the batch — and nothing a row needs
may depend on it."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import check_against_eager, compute_calls, plan_of

aten = torch.ops.aten


def _ce(x, t):
    return F.cross_entropy(x, t, ignore_index=-100)


def _targets(n, c, ignored=(3,)):
    t = torch.randint(0, c, (n,))
    t[list(ignored)] = -100
    return t


def test_cross_entropy_mean_is_one_group_with_two_folds_across():
    plan = plan_of(_ce, torch.randn(16, 50), _targets(16, 50))
    assert len(plan.groups) == 1 and plan.aten_nodes() == [], str(plan)
    across = plan.groups[0].across
    assert [n.target for n in across] == [aten.sum.default] * 2, str(plan)
    assert plan.groups[0].domain == (16, 50) and plan.groups[0].reduced_dims == (1,)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16],
                         ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("shape", [(64, 1000), (1, 7), (3, 70000), (5000, 3)], ids=str)
def test_cross_entropy_one_kernel_matches_eager(shape, dtype):
    x = torch.randn(*shape, dtype=dtype, requires_grad=True)
    t = _targets(shape[0], shape[1], ignored=(0,) if shape[0] > 1 else ())
    reports = check_against_eager(_ce, x, t)
    forward = reports[0]
    assert len(forward.kernels) == 1 and compute_calls(forward) == [], forward


def test_all_targets_ignored_gives_nan_like_eager():
    x = torch.randn(4, 9)
    t = torch.full((4,), -100)
    check_against_eager(_ce, x, t, grad=False)


@pytest.mark.parametrize("fn", [
    lambda x: x.sum(1).sum(),
    lambda x: x.softmax(-1).amax(-1).mean(),
    lambda x: (x.logsumexp(-1) * 2).sum() / x.shape[0],
    lambda x: x.var(-1, keepdim=True).mean(),
    lambda x: (x.amax(-1) > 0).all(),
], ids=["sum_of_row_sums", "mean_of_row_max", "scaled_lse_sum", "mean_var_keepdim", "all"])
def test_row_reductions_then_one_value_is_one_kernel(fn):
    x = torch.randn(33, 257, generator=torch.Generator().manual_seed(0))
    # a sum of 8481 values in another order than eager's: its rounding error scales with
    # the sum of |x| (about 6800), not with the (cancelled) result
    reports = check_against_eager(fn, x, grad=False, atol=1e-6 * x.abs().sum().item(), rtol=0)
    assert len(reports[0].kernels) == 1 and compute_calls(reports[0]) == [], reports[0]


def test_value_needed_by_rows_is_not_folded_across():
    """x - mean(row sums) needs the fold inside every row: a second kernel."""
    def fn(x):
        return x - x.sum(1, keepdim=True).mean()

    plan = plan_of(fn, torch.randn(8, 16))
    assert len(plan.groups) == 2, str(plan)
    folds, rows = plan.groups
    assert [n.target for n in folds.across] == [aten.mean.default] and rows.across == (), str(plan)
    assert any("needs a fold across all rows" in d.reason for d in plan.decisions), str(plan)
    check_against_eager(fn, torch.randn(8, 16), grad=False)


def test_max_across_rows_is_not_folded():
    """Over zero rows eager raises for max; a fused kernel could not, so it stays apart."""
    plan = plan_of(lambda x: x.sum(1).amax(), torch.randn(8, 16))
    assert len(plan.groups) == 2 and all(g.across == () for g in plan.groups), str(plan)
