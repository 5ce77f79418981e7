"""Fused reductions over unusual inputs: dtypes, non-contiguous layouts, rows of odd length,
a few very long rows (split across threads), a long float32 sum that naive serial
summation gets wrong, NaN rows and extreme rows for the single-walk max-and-sum, and
max/min with their indices.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from tests.e2e.graph_checks import FLOAT_DTYPES, dtype_id, forward_graph, fused, graph_of, \
    one_kernel, randn
from tests.helpers import check_against_eager, clone_input

ROW_OPS = {
    "sum": lambda x: x.sum(-1),
    "mean_outer": lambda x: x.mean(0),
    "amax": lambda x: x.amax(-1),
    "prod": lambda x: (x * 0.1 + 1).prod(-1),
    "var1": lambda x: x.var(-1),
    "std0_outer": lambda x: x.std(0, correction=0),
    "logsumexp": lambda x: x.logsumexp(-1),
    "softmax": lambda x: x.softmax(-1),
    "softmax_outer": lambda x: x.softmax(0),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
    "argmax": lambda x: x.argmax(-1),
    "argmin_outer": lambda x: x.argmin(0),
}


DTYPE_OPS = ["sum", "mean_outer", "amax", "prod", "var1", "std0_outer", "logsumexp",
             "softmax", "layer_norm", "argmin_outer"]


@pytest.mark.parametrize("name", DTYPE_OPS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_dtypes(dtype, name):
    fused(check_against_eager(ROW_OPS[name], randn(7, 37, dtype=dtype),
                               grad=not name.startswith("arg")))


def _transposed(shape):
    return clone_input(randn(*reversed(shape), grad=False).t()).requires_grad_()


def _stepped(shape):
    base = randn(shape[0], shape[1] * 3, grad=False)
    return clone_input(base[:, ::3]).requires_grad_()


def _expanded(shape):
    """[rows, 3, 7] with stride 0 along dim 1: rows repeat, no row is constant."""
    base = randn(shape[0], 1, 7, grad=False)
    return clone_input(base.expand(shape[0], 3, 7)).requires_grad_()


LAYOUTS = {"transposed": _transposed, "step3": _stepped, "expanded": _expanded}
LAYOUT_OPS = ["sum", "mean_outer", "amax", "std0_outer", "softmax", "softmax_outer",
              "layer_norm", "argmax"]


@pytest.mark.parametrize("name", LAYOUT_OPS)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_non_contiguous_inputs(layout, name):
    x = LAYOUTS[layout]((9, 21))
    assert not x.is_contiguous()
    fused(check_against_eager(ROW_OPS[name], x, grad=not name.startswith("arg")))


def test_non_contiguous_three_dims_permuted():
    x = clone_input(randn(7, 5, 6, grad=False).permute(2, 0, 1)).requires_grad_()

    def fn(x):
        return x.sum((0, 2)), x.amax(1), x.var(-1, keepdim=True), x.softmax(0)

    fused(check_against_eager(fn, x))


LENGTH_OPS = ["sum", "amax", "var1", "softmax", "argmax", "mean_outer"]


@pytest.mark.filterwarnings("ignore:var.*degrees of freedom:UserWarning")  # var of one value
@pytest.mark.parametrize("name", LENGTH_OPS)
@pytest.mark.parametrize("length", [1, 3, 17, 1023])
def test_odd_row_lengths(length, name):
    fused(check_against_eager(ROW_OPS[name], randn(6, length),
                               grad=not name.startswith("arg")))


def test_many_rows_of_length_one():
    def fn(x):
        return x.sum(-1), x.softmax(-1), x.amax(-1, keepdim=True) + x, x.logsumexp(-1)

    fused(check_against_eager(fn, randn(1000, 1)))


# a few very long rows: with fewer rows than threads each row is split across threads and
# the partial results combined in thread order (codegen/cpp_reduce.py); four threads make
# that happen on any machine
LONG_ROWS = {
    "sum": lambda x: (x * 2).sum(-1),
    "amax_amin": lambda x: (x.amax(-1), x.amin(-1)),
    "argmax_argmin": lambda x: (x.argmax(-1), x.argmin(-1)),
    "var": lambda x: (x.var(-1), x.std(-1, correction=0)),
    "logsumexp": lambda x: x.logsumexp(-1),
    "softmax": lambda x: (x * 0.5).softmax(-1),
    "centered": lambda x: x - x.mean(-1, keepdim=True),
}


@pytest.mark.parametrize("name", list(LONG_ROWS))
def test_few_very_long_rows(name):
    x = randn(3, 2_000_000, grad=False) * 3 + 1
    x[:, 17] = 50.0                   # ties for max and min: the first index wins,
    x[:, 1_500_000] = 50.0            # also when the halves go to different threads
    x[:, 23] = -50.0
    x[:, 1_999_999] = -50.0
    graphs = check_against_eager(LONG_ROWS[name], x, grad=False, options={"num_threads": 4})
    one_kernel(graph_of(graphs, "inference"))


@pytest.mark.parametrize("threads", [1, 4])
def test_long_float32_sum_is_accurate(threads):
    """10M+ float32 in [0, 1): a serial float32 running sum drifts far past rtol 1e-5;
    brrr's sum must stay within it of the float64 sum, on one thread or split."""
    x = torch.rand(12_000_003, generator=torch.Generator().manual_seed(0))
    exact = x.double().sum().float()
    naive = np.add.accumulate(x.numpy(), dtype=np.float32)[-1]
    assert abs(float(naive) - float(exact)) > 1e-5 * float(exact), "the test would not tell"

    def fn(x):
        return (x * 2).sum() * 0.5, x.mean(), x.view(3, -1).sum(-1)

    options = {"num_threads": threads}
    fused(check_against_eager(fn, x, grad=False, options=options))   # rtol 1.3e-6 of eager
    torch._dynamo.reset()
    sums = torch.compile(fn, backend="brrr", options=options)(x)
    torch._dynamo.reset()
    assert_close(sums[0], exact, rtol=1e-5, atol=0)
    assert_close(sums[1], (x.double().mean()).float(), rtol=1e-5, atol=0)
    assert_close(sums[2], x.view(3, -1).double().sum(-1).float(), rtol=1e-5, atol=0)


NAN_OPS = {
    "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: (x * 2).log_softmax(-1),
    "amax": lambda x: x.amax(-1),
    "max": lambda x: x.max(-1),
    "amin": lambda x: x.amin(-1),
    "sum": lambda x: x.sum(-1),
    "logsumexp": lambda x: x.logsumexp(-1),
    "var": lambda x: x.var(-1),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
}
NAN_AT = {1: 0, 3: 1022, 4: 511}      # row -> column of its NaN (first, last, middle)


@pytest.mark.parametrize("name", list(NAN_OPS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_nan_propagates_through_its_row(dtype, name):
    x = randn(6, 1023, dtype=dtype, grad=False)
    for row, col in NAN_AT.items():
        x[row, col] = float("nan")
    fn = NAN_OPS[name]
    expected = fn(x)                  # eager: exactly the rows with a NaN are NaN ...
    nan = (expected.values if name == "max" else expected).isnan().reshape(6, -1)
    assert nan.all(-1).tolist() == nan.any(-1).tolist() == [r in NAN_AT for r in range(6)]
    # ... and brrr's outputs have NaN exactly where eager's do (equal_nan compares masks)
    graphs = check_against_eager(fn, x, grad=False)
    if name != "max":                 # torch.max(x, dim) runs through ATen: see below
        fused(graphs)


def _online_rows() -> torch.Tensor:
    """Rows of 3000 (three chunks of the single walk in codegen/cpp_online.py) that stress
    its running max: random; -inf until the last chunk; rising every chunk; a NaN in the
    last chunk; all -inf; +inf mid-row; a huge value late; -inf in the middle chunk."""
    x = randn(8, 3000, grad=False) * 4
    x[1, :2500] = float("-inf")
    x[2] = torch.linspace(-60.0, 60.0, 3000)
    x[3, 2900] = float("nan")
    x[4] = float("-inf")
    x[5, 1500] = float("inf")
    x[6, 2999] = 1e30
    x[7, 1024:2048] = float("-inf")
    return x


ONLINE_OPS = {
    "cross_entropy": lambda x, t: F.cross_entropy(x, t, reduction="none"),
    "cross_entropy_mean": lambda x, t: F.cross_entropy(x * 0.5, t),
    "log_softmax": lambda x, t: x.log_softmax(-1),
    "logsumexp": lambda x, t: x.logsumexp(-1),
}


@pytest.mark.parametrize("name", list(ONLINE_OPS))
def test_single_walk_max_and_sum_matches_eager_on_extreme_rows(name):
    x, t = _online_rows(), torch.tensor([5, 2990, 2999, 0, 1, 7, 2999, 1500])
    graphs = check_against_eager(ONLINE_OPS[name], x, t, grad=False)
    fused(graphs)


def test_nan_propagates_through_outer_dim_reductions():
    x = randn(1023, 6, grad=False)
    x[5, 2] = float("nan")
    x[1022, 4] = float("nan")

    def fn(x):
        return x.amax(0), x.sum(0), x.softmax(0), x.argmax(0), x.amin(0), x.argmin(0)

    expected = fn(x)
    assert expected[0].isnan().tolist() == [False, False, True, False, True, False]
    fused(check_against_eager(fn, x, grad=False))


@pytest.mark.parametrize("fn", [
    pytest.param(lambda x: ((x * 2).exp().amax(-1) + 1, (x * 2).exp().argmax(-1)),
                 id="amax_argmax"),
    pytest.param(lambda x: (x * 2).exp().max(-1).values + 1, id="max_dim_values"),
    pytest.param(lambda x: (x * 2).max(-1), id="max_dim"),
    pytest.param(lambda x: (x * 2).min(0).values * x, id="min_outer_dim"),
    pytest.param(lambda x: (x * 2).max() + 1, id="max_all"),
])
def test_max_min_with_indices_is_one_kernel(fn):
    """torch.max(x, dim) is amax and argmax of the same row: one kernel, NaN included."""
    x = randn(6, 33, grad=False)
    x[2, 5] = float("nan")
    one_kernel(forward_graph(check_against_eager(fn, x, grad=False)))


def test_max_min_with_ties_nan_and_ints_match_eager():
    """max.dim/min.dim are decomposed to amax/argmax, but autograd keeps their own backward
    (the gradient goes to the selected index, not spread over ties); bool and int too."""
    nan = float("nan")
    x = torch.tensor([[1., 3., 3., 2.], [5., 5., 1., 0.], [nan, 1., 2., nan]], requires_grad=True)
    check_against_eager(lambda x: x.max(-1).values * 2, x)
    check_against_eager(lambda x: x.min(0)[0] * 2, x)
    check_against_eager(lambda x: x.max() * 2, torch.tensor([[1., 3., 3., 2.]], requires_grad=True))
    # bool max.dim stays max.dim (decompositions.py): ATen's, no kernel
    check_against_eager(lambda x: x.max(-1), torch.tensor([[True, False], [False, False]]),
                        grad=False, kernels=False)
    check_against_eager(lambda x: x.min(-1), torch.tensor([[3, 1, 1], [-4, 9, -4]]), grad=False)


@pytest.mark.parametrize("fn", [
    lambda x, d: (x / (d.abs() + 1)).narrow(-1, 1, 30).amin(-1),
    lambda x, d: (x / (d.abs() + 1) * 2).narrow(-1, 1, 30).max(-1).values,
])
def test_a_max_of_a_row_quotient_matches_the_backward_recompute(fn):
    """The backward graph recomputes x / d in its own kernel and compares it with the max
    the forward saved: the forward must divide as eager does, not multiply by 1 / d (fuzz
    seed 43932: the gradient was NaN, a zero tie count)."""
    x, d = randn(64, 33, dtype=torch.float64), randn(64, 1, dtype=torch.float64)
    check_against_eager(fn, x, d)
