"""Norms with affine gradients, and losses, in one pass against eager: the column folds
(weight and bias gradients) and the loss's full sum of a row kernel (partition/domains.py,
codegen/cpp_columns.py). Odd sizes, zero-size and size-1 dims, NaN and inf, low
precision, the split schedule (few long rows) and more rows per thread than a partial
row's block."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import check_against_eager, compute_calls

# A sum over many rows: eager adds in float, brrr's partial rows end in double; against
# float64 brrr is the closer one (4096 x 64: eager 1e-4, brrr 2e-5), so compare loosely.
SUM_TOL = dict(atol=5e-4, rtol=1e-4)


def _randn(*shape, dtype=torch.float32, seed=0, grad=True):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
    return t.requires_grad_(grad)


def _graph(graphs, kind):
    return next(g for g in graphs if g.kind == kind)


def _ln_loss(x, w, b, g):
    return (F.layer_norm(x, (x.shape[-1],), w, b) * g).sum()


def _rms_loss(x, w, g):
    return (F.rms_norm(x, (x.shape[-1],), w, 1e-6) * g).sum()


def _ln_args(*shape, dtype=torch.float32):
    d = shape[-1]
    return (_randn(*shape, dtype=dtype), _randn(d, dtype=dtype, seed=1),
            _randn(d, dtype=dtype, seed=2), _randn(*shape, dtype=dtype, seed=3, grad=False))


SHAPES = [(37, 129), (1, 7), (5, 1), (2, 3, 17), (4096, 64), (3, 70000)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_layer_norm_forward_backward_is_one_kernel_each(shape):
    graphs = check_against_eager(_ln_loss, *_ln_args(*shape), **SUM_TOL)
    for kind in ("forward", "backward"):
        g = _graph(graphs, kind)
        assert len(g.kernels) == 1 and compute_calls(g) == [], str(g)


@pytest.mark.parametrize("shape", [(37, 129), (2, 3, 17)], ids=str)
def test_rms_norm_with_weight_is_one_kernel_each(shape):
    x, w, _, g = _ln_args(*shape)
    graphs = check_against_eager(_rms_loss, x, w, g, **SUM_TOL)
    for kind in ("forward", "backward"):
        assert len(_graph(graphs, kind).kernels) == 1, str(_graph(graphs, kind))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64],
                         ids=lambda d: str(d)[6:])
def test_layer_norm_low_and_double_precision(dtype):
    tol = {} if dtype is torch.float64 else dict(atol=0.25, rtol=5e-2)  # sums of rounded terms
    graphs = check_against_eager(_ln_loss, *_ln_args(33, 70, dtype=dtype), **tol)
    assert len(_graph(graphs, "backward").kernels) == 1


def test_module_layer_norm_backward_is_one_kernel():
    """The weight and bias gradients read only the backward's inputs (siblings of the
    input gradient's kernel): they still fold into its rows."""
    m = torch.nn.LayerNorm(129)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
    graphs = check_against_eager(lambda x: m(x) * 2, _randn(37, 129), **SUM_TOL)
    bw = _graph(graphs, "backward")
    assert len(bw.kernels) == 1 and compute_calls(bw) == [], str(bw)


@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (0, 3, 5)], ids=str)
def test_zero_size_dims(shape):
    check_against_eager(_ln_loss, *_ln_args(*shape))


def test_nan_and_inf_reach_the_right_columns_and_rows():
    """NaN or inf in x poisons its row (and every weight gradient); NaN in the upstream
    gradient poisons its row of dx and its column of the bias gradient. (An inf there
    gives inf - inf in some columns of its row, where eager's fused kernel and the
    decomposition brrr runs differ in which ones.)"""
    x, w, b, g = _ln_args(9, 33)
    with torch.no_grad():
        x[2, 5] = float("nan")
        x[4, 7] = float("inf")
        g[6, 30] = float("nan")
    check_against_eager(_ln_loss, x, w, b, g)


def test_non_contiguous_input():
    _, w, b, g = _ln_args(37, 129)
    xt = _randn(129, 37, grad=False).t().requires_grad_()
    check_against_eager(_ln_loss, xt, w, b, g.t().contiguous().t(), **SUM_TOL)


def test_column_epilogue_and_keepdim_outputs():
    """Values of the column shape computed from the column sums, once per column."""
    def fn(x):
        return x.softmax(-1), x.mean(0, keepdim=True) * 2 + 1, (x * x).sum(0).sqrt().bfloat16()

    graphs = check_against_eager(fn, _randn(300, 45, grad=False), grad=False, **SUM_TOL)
    assert len(graphs[0].kernels) == 1, str(graphs[0])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_results_do_not_depend_on_timing(threads):
    """For a fixed thread count, the same inputs give the same bits every call."""
    x, w, b, g = _ln_args(1000, 96)
    fn = torch.compile(lambda x, w, b, g: torch.autograd.grad(_ln_loss(x, w, b, g), (x, w, b)),
                       backend="brrr", options={"num_threads": threads})
    first = fn(x, w, b, g)
    for _ in range(3):
        again = fn(x, w, b, g)
        assert all(torch.equal(a, f) for a, f in zip(again, first))
    torch._dynamo.reset()


def test_fold_across_rows_off_gives_separate_kernels():
    graphs = check_against_eager(_ln_loss, *_ln_args(37, 129),
                                 options={"fold_across_rows": False}, **SUM_TOL)
    assert len(_graph(graphs, "forward").kernels) == 2
    assert len(_graph(graphs, "backward").kernels) == 3
