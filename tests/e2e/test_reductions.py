"""Fused reductions: every reduction against eager, and the kernel counts of the
norms, softmaxes and losses built from them.

1. sum, mean, amax, amin, prod, var/std (correction 0 and 1), argmax/argmin, logsumexp,
   any/all over the innermost dim, dim 0, two dims and all dims, keepdim or not; with a
   pointwise prologue and an epilogue that broadcasts the result back, one kernel.
2. Forward kernel counts of softmax/log_softmax (scale and mask), layer_norm (residual),
   rms_norm, cross_entropy (ignore_index), batch_norm in inference, group_norm; backward
   kernel counts of layer_norm and softmax.
3. dtypes, non-contiguous inputs, rows of odd length, a few very long rows (split across
   threads), a long float32 sum that naive serial summation gets wrong, NaN rows.
4. A training step of a Linear/LayerNorm/GELU/Linear block.

Zero-size, 0-dim, integer and bool inputs, NaN/inf/-0.0 in short rows and >2^31 elements
are in test_edge_inputs.py; cross_entropy's one forward kernel over several shapes is in
tests/partition/test_across_rows.py.
"""
import copy

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

from tests.helpers import check_against_eager, clone_input, compute_calls

FLOAT_DTYPES = [torch.float32, torch.float64, torch.bfloat16]


def _randn(*shape, dtype=torch.float32, seed=0, grad=True):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=dtype).requires_grad_(grad)


def _graph(graphs, kind):
    found = [g for g in graphs if g.kind == kind]
    assert len(found) == 1, f"expected one {kind} graph, got {[g.kind for g in graphs]}"
    return found[0]


def _forward_graph(graphs):
    """The forward graph, or the inference graph when nothing needs grad."""
    return next(g for g in graphs if g.kind in ("forward", "inference"))


def _one_kernel(graph) -> None:
    assert len(graph.kernels) == 1 and compute_calls(graph) == [], str(graph)


def _fused(graphs) -> None:
    """The forward (or inference) graph runs in kernels only."""
    forward = _forward_graph(graphs)
    assert forward.kernels and compute_calls(forward) == [], str(forward)


def _dtype_id(d):
    return str(d)[6:]


# ---- 1. each reduction, over each kind of dim ----------------------------------------

def _dims(x, dim):
    """`dim` as the reductions take it: None is every dim."""
    return tuple(range(x.dim())) if dim is None else dim


def _prod(x, dim, keepdim):
    return x.prod() if dim is None else x.prod(dim, keepdim=keepdim)


def _arg(name):
    def reduce(x, dim, keepdim):
        return getattr(x, name)(dim=dim, keepdim=keepdim)
    return reduce


def _var_std(name, correction):
    def reduce(x, dim, keepdim):
        return getattr(x, name)(_dims(x, dim), correction=correction, keepdim=keepdim)
    return reduce


def _plain(name):
    def reduce(x, dim, keepdim):
        if dim is None and not keepdim and name != "logsumexp":
            return getattr(x, name)()             # the dim-less overload
        return getattr(x, name)(_dims(x, dim), keepdim=keepdim)
    return reduce


# name -> (reduction(x, dim, keepdim), kind of input: "float", "near_one" or "bool")
REDUCTIONS = {
    "sum": (_plain("sum"), "float"),
    "mean": (_plain("mean"), "float"),
    "amax": (_plain("amax"), "float"),
    "amin": (_plain("amin"), "float"),
    "prod": (_prod, "near_one"),
    "var0": (_var_std("var", 0), "float"),
    "var1": (_var_std("var", 1), "float"),
    "std0": (_var_std("std", 0), "float"),
    "std1": (_var_std("std", 1), "float"),
    "argmax": (_arg("argmax"), "float"),
    "argmin": (_arg("argmin"), "float"),
    "logsumexp": (_plain("logsumexp"), "float"),
    "any": (_plain("any"), "bool"),
    "all": (_plain("all"), "bool"),
}
DIFFERENTIABLE = {"sum", "mean", "amax", "amin", "prod", "var0", "var1", "std0", "std1",
                  "logsumexp"}
DIMS = {"inner": -1, "outer": 0, "dims02": (0, 2), "all": None}
UNSUPPORTED = {                      # combinations eager has no overload for
    ("prod", "dims02"), ("prod", "all", True),
    ("argmax", "dims02"), ("argmin", "dims02"),
}


def _supported(name, dim, keepdim) -> bool:
    return (name, dim) not in UNSUPPORTED and (name, dim, keepdim) not in UNSUPPORTED


def _input(kind, shape, dtype=torch.float32, seed=0):
    x = _randn(*shape, dtype=dtype, seed=seed, grad=False)
    if kind == "near_one":            # a product of many factors stays finite
        x = x * 0.1 + 1
    elif kind == "bool":              # seed 0: mostly False, 1: mostly True; both kinds
        return x > 1.2 if seed % 2 == 0 else x > -1.2   # of uniform rows occur
    return x


SWEEP = [pytest.param(name, dim, id=f"{name}-{dim}")
         for name in REDUCTIONS for dim in DIMS if _supported(name, dim, True)
         or _supported(name, dim, False)]


@pytest.mark.parametrize("name,dim", SWEEP)
def test_reduction_matches_eager(name, dim):
    """keepdim False and True, outputs and gradients; the forward graph is all kernels."""
    reduce, kind = REDUCTIONS[name]
    keepdims = [k for k in (False, True) if _supported(name, dim, k)]

    def fn(x):
        return tuple(reduce(x, DIMS[dim], k) for k in keepdims)

    for seed in (0, 1) if kind == "bool" else (0,):
        x = _input(kind, (5, 6, 7), seed=seed)
        grad = name in DIFFERENTIABLE
        _fused(check_against_eager(fn, x.requires_grad_(grad), grad=grad))


def _prologue(kind):
    if kind == "near_one":            # factors near 1: the product of 210 stays near 1
        return lambda x: (x * 0.05).exp()
    if kind == "bool":
        return lambda x: (x * 2 + 1).exp() > 2
    return lambda x: (x * 2 + 1).exp()


FUSED = [pytest.param(name, dim, id=f"{name}-{dim}")
         for name in REDUCTIONS for dim in DIMS if _supported(name, dim, True)]


@pytest.mark.parametrize("name,dim", FUSED)
def test_prologue_reduction_epilogue_is_one_kernel(name, dim):
    """pointwise -> reduction (keepdim) -> broadcast back over the input: one kernel and
    no ATen compute in the inference graph."""
    reduce, kind = REDUCTIONS[name]
    pre = _prologue(kind)

    def fn(x):
        r = reduce(pre(x), DIMS[dim], True)
        return x - r.to(x.dtype) * 0.5

    graphs = check_against_eager(fn, _randn(5, 6, 7, grad=False), grad=False)
    _one_kernel(_graph(graphs, "inference"))


@pytest.mark.parametrize("name", [n for n in REDUCTIONS if _supported(n, "all", False)])
def test_prologue_then_reduction_of_all_dims_is_one_kernel(name):
    """The dim-less overloads (x.sum(), x.prod(), x.argmax(), x.all(), ...)."""
    reduce, kind = REDUCTIONS[name]
    pre = _prologue(kind)
    graphs = check_against_eager(lambda x: reduce(pre(x), None, False) * 2,
                                 _randn(5, 6, 7, grad=False), grad=False)
    _one_kernel(_graph(graphs, "inference"))


def test_centering_epilogue_matches_eager_with_grad():
    def fn(x):
        return x - x.mean(-1, keepdim=True), x / x.abs().sum(0, keepdim=True), \
            (x * 2 + 1).exp().sum(-1)

    graphs = check_against_eager(fn, _randn(9, 17))
    _fused(graphs)
    assert compute_calls(_graph(graphs, "backward")) == [], str(graphs[1])


@pytest.mark.parametrize("dim", [0, -1, None])
def test_variance_of_a_zero_dim_tensor(dim):
    """A 0-d tensor's dim 0 (or -1) is the tensor itself; brrr's var/std decomposition
    once indexed its (empty) shape there and raised IndexError (found by the fuzzer)."""
    def fn(x):
        return x.var(dim, keepdim=True, unbiased=False) + x, x.std(dim) * x

    check_against_eager(fn, torch.tensor(1.5, requires_grad=True))


# ---- 2. kernel counts of norms, softmaxes and losses -----------------------------------

# backward kernels now (greedy policy); at most two each are allowed
LAYER_NORM_BACKWARD_KERNELS = 1      # the input gradient's rows fold the weight/bias column sums
SOFTMAX_BACKWARD_KERNELS = 1         # one row kernel: sum of grad*out, then the input gradient
BACKWARD_LIMIT = 2

NORM_SHAPES = [(8, 33), (3, 1024), (64, 7)]


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_masked_scaled_softmax_kernels(op, shape):
    mask = torch.zeros(shape)
    mask[:, ::3] = float("-inf")
    mask[:, 0] = 0.0                  # no row is all -inf

    def fn(x, mask):
        return getattr((x * 0.125) + mask, op)(-1)

    graphs = check_against_eager(fn, _randn(*shape), mask)
    _one_kernel(_graph(graphs, "forward"))
    bw = _graph(graphs, "backward")
    assert len(bw.kernels) <= BACKWARD_LIMIT and compute_calls(bw) == [], str(bw)
    assert len(bw.kernels) == SOFTMAX_BACKWARD_KERNELS, str(bw)


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
def test_residual_layer_norm_kernels(shape):
    d = shape[-1]

    def fn(x, res, w, b):
        return F.layer_norm(x + res, (d,), w, b)

    graphs = check_against_eager(fn, _randn(*shape), _randn(*shape, seed=1),
                                 _randn(d, seed=2), _randn(d, seed=3))
    _one_kernel(_graph(graphs, "forward"))
    bw = _graph(graphs, "backward")
    assert len(bw.kernels) <= BACKWARD_LIMIT and compute_calls(bw) == [], str(bw)
    assert len(bw.kernels) == LAYER_NORM_BACKWARD_KERNELS, str(bw)


def _rms_norm_by_hand(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _rms_norm_functional(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, 1e-6)


RMS_NORMS = [
    pytest.param(_rms_norm_by_hand, id="by_hand"),
    pytest.param(_rms_norm_functional, id="F.rms_norm", marks=pytest.mark.skipif(
        not hasattr(F, "rms_norm"), reason="F.rms_norm is not in this torch (added in 2.4)")),
]


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
@pytest.mark.parametrize("rms_norm", RMS_NORMS)
def test_rms_norm_forward_one_kernel(rms_norm, shape):
    graphs = check_against_eager(rms_norm, _randn(*shape), _randn(shape[-1], seed=1))
    _one_kernel(_graph(graphs, "forward"))


@pytest.mark.parametrize("shape", [(16, 50), (5, 1023)], ids=str)
def test_cross_entropy_ignore_index_mean_one_kernel(shape):
    n, c = shape
    gen = torch.Generator().manual_seed(0)
    t = torch.randint(0, c, (n,), generator=gen)
    t[1] = t[n - 1] = 7 if c > 7 else 0
    t[2] = -1                          # the ignored class

    def fn(x):
        return F.cross_entropy(x * 2, t, ignore_index=-1, reduction="mean")

    graphs = check_against_eager(fn, _randn(n, c))
    _one_kernel(_graph(graphs, "forward"))


def test_batch_norm_module_eval_one_kernel():
    bn = nn.BatchNorm2d(6)
    with torch.no_grad():
        bn.running_mean.copy_(_randn(6, seed=1, grad=False))
        bn.running_var.copy_(_randn(6, seed=2, grad=False).abs() + 0.5)
        bn.weight.copy_(_randn(6, seed=3, grad=False))
        bn.bias.copy_(_randn(6, seed=4, grad=False))
    bn.eval()
    graphs = check_against_eager(bn, _randn(3, 6, 5, 7))
    _one_kernel(_graph(graphs, "forward"))


def test_functional_batch_norm_inference_one_kernel():
    mean, var = _randn(6, seed=1, grad=False), _randn(6, seed=2, grad=False).abs() + 0.5

    def fn(x, w, b):
        return F.batch_norm(x * 2, mean, var, w, b, training=False, eps=1e-3) + 1

    graphs = check_against_eager(fn, _randn(3, 6, 5, 7), _randn(6, seed=3), _randn(6, seed=4))
    _one_kernel(_graph(graphs, "forward"))


@pytest.mark.parametrize("groups", [1, 3, 6])
def test_group_norm_forward_one_kernel(groups):
    def fn(x, w, b):
        return F.group_norm(x, groups, w, b)

    graphs = check_against_eager(fn, _randn(2, 6, 5, 4), _randn(6, seed=1), _randn(6, seed=2))
    _one_kernel(_graph(graphs, "forward"))


# ---- 3. dtypes, layouts, lengths, long rows, NaN --------------------------------------

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
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=_dtype_id)
def test_dtypes(dtype, name):
    _fused(check_against_eager(ROW_OPS[name], _randn(7, 37, dtype=dtype),
                               grad=not name.startswith("arg")))


def _transposed(shape):
    return clone_input(_randn(*reversed(shape), grad=False).t()).requires_grad_()


def _stepped(shape):
    base = _randn(shape[0], shape[1] * 3, grad=False)
    return clone_input(base[:, ::3]).requires_grad_()


def _expanded(shape):
    """[rows, 3, 7] with stride 0 along dim 1: rows repeat, no row is constant."""
    base = _randn(shape[0], 1, 7, grad=False)
    return clone_input(base.expand(shape[0], 3, 7)).requires_grad_()


LAYOUTS = {"transposed": _transposed, "step3": _stepped, "expanded": _expanded}
LAYOUT_OPS = ["sum", "mean_outer", "amax", "std0_outer", "softmax", "softmax_outer",
              "layer_norm", "argmax"]


@pytest.mark.parametrize("name", LAYOUT_OPS)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_non_contiguous_inputs(layout, name):
    x = LAYOUTS[layout]((9, 21))
    assert not x.is_contiguous()
    _fused(check_against_eager(ROW_OPS[name], x, grad=not name.startswith("arg")))


def test_non_contiguous_three_dims_permuted():
    x = clone_input(_randn(7, 5, 6, grad=False).permute(2, 0, 1)).requires_grad_()

    def fn(x):
        return x.sum((0, 2)), x.amax(1), x.var(-1, keepdim=True), x.softmax(0)

    _fused(check_against_eager(fn, x))


LENGTH_OPS = ["sum", "amax", "var1", "softmax", "argmax", "mean_outer"]


@pytest.mark.filterwarnings("ignore:var.*degrees of freedom:UserWarning")  # var of one value
@pytest.mark.parametrize("name", LENGTH_OPS)
@pytest.mark.parametrize("length", [1, 3, 17, 1023])
def test_odd_row_lengths(length, name):
    _fused(check_against_eager(ROW_OPS[name], _randn(6, length),
                               grad=not name.startswith("arg")))


def test_many_rows_of_length_one():
    def fn(x):
        return x.sum(-1), x.softmax(-1), x.amax(-1, keepdim=True) + x, x.logsumexp(-1)

    _fused(check_against_eager(fn, _randn(1000, 1)))


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
    x = _randn(3, 2_000_000, grad=False) * 3 + 1
    x[:, 17] = 50.0                   # ties for max and min: the first index wins,
    x[:, 1_500_000] = 50.0            # also when the halves go to different threads
    x[:, 23] = -50.0
    x[:, 1_999_999] = -50.0
    graphs = check_against_eager(LONG_ROWS[name], x, grad=False, options={"num_threads": 4})
    _one_kernel(_graph(graphs, "inference"))


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
    _fused(check_against_eager(fn, x, grad=False, options=options))   # rtol 1.3e-6 of eager
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
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=_dtype_id)
def test_nan_propagates_through_its_row(dtype, name):
    x = _randn(6, 1023, dtype=dtype, grad=False)
    for row, col in NAN_AT.items():
        x[row, col] = float("nan")
    fn = NAN_OPS[name]
    expected = fn(x)                  # eager: exactly the rows with a NaN are NaN ...
    nan = (expected.values if name == "max" else expected).isnan().reshape(6, -1)
    assert nan.all(-1).tolist() == nan.any(-1).tolist() == [r in NAN_AT for r in range(6)]
    # ... and brrr's outputs have NaN exactly where eager's do (equal_nan compares masks)
    graphs = check_against_eager(fn, x, grad=False)
    if name != "max":                 # torch.max(x, dim) runs through ATen: see below
        _fused(graphs)


def _online_rows() -> torch.Tensor:
    """Rows of 3000 (three chunks of the single walk in codegen/cpp_online.py) that stress
    its running max: random; -inf until the last chunk; rising every chunk; a NaN in the
    last chunk; all -inf; +inf mid-row; a huge value late; -inf in the middle chunk."""
    x = _randn(8, 3000, grad=False) * 4
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
    _fused(graphs)


def test_nan_propagates_through_outer_dim_reductions():
    x = _randn(1023, 6, grad=False)
    x[5, 2] = float("nan")
    x[1022, 4] = float("nan")

    def fn(x):
        return x.amax(0), x.sum(0), x.softmax(0), x.argmax(0), x.amin(0), x.argmin(0)

    expected = fn(x)
    assert expected[0].isnan().tolist() == [False, False, True, False, True, False]
    _fused(check_against_eager(fn, x, grad=False))


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
    x = _randn(6, 33, grad=False)
    x[2, 5] = float("nan")
    _one_kernel(_forward_graph(check_against_eager(fn, x, grad=False)))


# ---- 4. a training step ----------------------------------------------------------------

def _block(dtype):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(),
                         nn.Linear(64, 16)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=_dtype_id)
def test_layer_norm_gelu_block_gradients(dtype):
    graphs = check_against_eager(_block(dtype), _randn(12, 32, dtype=dtype))
    assert _graph(graphs, "forward").kernels and _graph(graphs, "backward").kernels


def test_layer_norm_gelu_block_training_steps():
    """Two SGD steps under brrr and eager leave the same parameters."""
    eager = _block(torch.float32)
    model = copy.deepcopy(eager)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="brrr")
    gen = torch.Generator().manual_seed(1)
    batches = [(torch.randn(12, 32, generator=gen), torch.randint(0, 16, (12,), generator=gen))
               for _ in range(2)]
    for net, m in ((eager, eager), (compiled, model)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for x, t in batches:
            opt.zero_grad()
            F.cross_entropy(net(x), t).backward()
            opt.step()
    torch._dynamo.reset()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert_close(p, q, msg=lambda m, name=name: f"{name} after two steps: {m}")
    assert not all(torch.equal(p, q) for p, q in zip(model.parameters(),
                                                     _block(torch.float32).parameters()))


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
