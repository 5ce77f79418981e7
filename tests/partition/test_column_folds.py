"""Reductions of another order in a row kernel (partition/domains.py): sums over the rows
(column folds: LayerNorm's weight and bias gradients) and sums of every element (a
loss) join the row group of the same tensor; nothing a row needs may depend on them."""
import torch
import torch.nn.functional as F

from brrr_compiler.partition import GreedyPolicy, partition
from tests.helpers import aten_graph, plan_of

aten = torch.ops.aten


def _r(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def _layer_norm_backward(x, mean, rstd, w, dy):
    """LayerNorm's backward as AOTAutograd decomposes it: the input gradient's two row
    sums, and the weight and bias gradients' sums over the rows."""
    xhat = (x - mean) * rstd
    wdy = dy * w
    d = x.shape[-1]
    dx = rstd / d * (wdy * d - wdy.sum(-1, keepdim=True) - xhat * (wdy * xhat).sum(-1, keepdim=True))
    rows = tuple(range(x.dim() - 1))
    return dx, (dy * xhat).sum(rows), dy.sum(rows)


def _ln_backward_args(n=37, d=129):
    return _r(n, d), _r(n, 1), _r(n, 1).abs(), _r(d), _r(n, d)


def test_layer_norm_backward_is_one_group_with_two_column_folds():
    plan = plan_of(_layer_norm_backward, *_ln_backward_args())
    assert len(plan.groups) == 1 and plan.aten_nodes() == [], str(plan)
    g = plan.groups[0]
    assert g.domain == (37, 129) and g.reduced_dims == (1,), str(plan)
    assert [n.target for n in g.columns] == [aten.sum.dim_IntList] * 2, str(plan)
    assert g.across == () and len(g.outputs) == 3


def test_without_folds_across_rows_the_column_sums_are_kernels_of_their_own():
    """The Triton target (and fold_across_rows=False) keeps them apart, as before."""
    gm = aten_graph(_layer_norm_backward, *_ln_backward_args())
    plan = partition(gm, GreedyPolicy(), allow_across=False)
    assert len(plan.groups) == 3 and all(g.columns == () for g in plan.groups), str(plan)
    assert any("different domains" in d.reason for d in plan.decisions), str(plan)


def test_three_dims_fold_the_two_outer_dims():
    x = _r(2, 3, 17)
    plan = plan_of(_layer_norm_backward, x, _r(2, 3, 1), _r(2, 3, 1).abs(), _r(17), _r(2, 3, 17))
    assert len(plan.groups) == 1, str(plan)
    g = plan.groups[0]
    assert g.domain == (2, 3, 17) and g.reduced_dims == (2,) and len(g.columns) == 2, str(plan)


def test_layer_norm_forward_and_its_loss_are_one_group():
    """The loss's sum of every element folds across rows after a row sum."""
    def fn(x, w, b, g):
        return (F.layer_norm(x, (129,), w, b) * g).sum()

    plan = plan_of(fn, _r(37, 129), _r(129), _r(129), _r(37, 129))
    assert len(plan.groups) == 1 and plan.aten_nodes() == [], str(plan)
    g = plan.groups[0]
    assert [n.target for n in g.across] == [aten.sum.default] and g.reduced_dims == (1,), str(plan)
    assert [tuple(o.meta["val"].shape) for o in g.outputs] == [()], str(plan)


def test_row_and_column_sums_of_one_matrix_fold_into_the_rows():
    """Each could be the other's column fold; the rows along the last dim win."""
    plan = plan_of(lambda x: (x.sum(1), x.sum(0)), _r(8, 16))
    assert len(plan.groups) == 1, str(plan)
    g = plan.groups[0]
    assert g.reduced_dims == (1,) and [n.name for n in g.columns] == ["sum_2"], str(plan)


def test_column_epilogue_joins_and_keepdim_is_a_column_shape():
    """What depends only on the column sums is computed once per column in the kernel."""
    def fn(x):
        return x.softmax(-1), x.mean(0, keepdim=True) * 2 + 1, (x * x).sum(0).sqrt()

    plan = plan_of(fn, _r(8, 16))
    assert len(plan.groups) == 1, str(plan)
    assert len(plan.groups[0].columns) == 2 and len(plan.groups[0].outputs) == 3, str(plan)


def test_value_needed_by_rows_is_not_folded_into_columns():
    """x.softmax(-1) * x.sum(0) needs every column sum inside every row: two kernels."""
    plan = plan_of(lambda x: x.softmax(-1) * x.sum(0), _r(8, 16))
    assert len(plan.groups) == 2 and all(g.columns == () for g in plan.groups), str(plan)
    assert any("needs column sums inside a row" in d.reason for d in plan.decisions), str(plan)


def test_max_over_rows_and_integer_sums_are_not_column_folds():
    """Over zero rows eager raises for max; integer sums stay in their own kernels."""
    plan = plan_of(lambda x: (x.softmax(-1), x.amax(0)), _r(8, 16))
    assert all(g.columns == () for g in plan.groups) and len(plan.groups) == 2, str(plan)
    plan = plan_of(lambda x, i: ((x * i).softmax(-1), (i * 2).sum(0)), _r(8, 16),
                   torch.randint(0, 5, (8, 16)))
    assert all(g.columns == () for g in plan.groups), str(plan)


def test_rows_not_along_the_last_dim_take_no_column_folds():
    """A domain reducing dim 0 (the column schedule) folds nothing of another order."""
    plan = plan_of(lambda x: (x.softmax(0), x.sum(1)), _r(8, 16))
    assert len(plan.groups) == 2 and all(g.columns == () for g in plan.groups), str(plan)
