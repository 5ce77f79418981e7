"""Fused reductions: every reduction against eager, over each kind of dim, with a pointwise
prologue and an epilogue in one kernel.

sum, mean, amax, amin, prod, var/std (correction 0 and 1), argmax/argmin, logsumexp,
any/all over the innermost dim, dim 0, two dims and all dims, keepdim or not; with a
pointwise prologue and an epilogue that broadcasts the result back, one kernel.

The kernel counts of norms, softmaxes and losses and a training step are in
test_norm_kernels.py; dtypes, layouts, row lengths, long rows and NaN in
test_reduction_inputs.py. Zero-size, 0-dim, integer and bool inputs, NaN/inf/-0.0 in short
rows and >2^31 elements are in test_edge_inputs.py; cross_entropy's one forward kernel
over several shapes is in tests/partition/test_across_rows.py.
"""
import pytest
import torch

from tests.e2e.graph_checks import fused, graph_of, one_kernel, randn
from tests.helpers import check_against_eager, compute_calls

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
    x = randn(*shape, dtype=dtype, seed=seed, grad=False)
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
        fused(check_against_eager(fn, x.requires_grad_(grad), grad=grad))


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

    graphs = check_against_eager(fn, randn(5, 6, 7, grad=False), grad=False)
    one_kernel(graph_of(graphs, "inference"))


@pytest.mark.parametrize("name", [n for n in REDUCTIONS if _supported(n, "all", False)])
def test_prologue_then_reduction_of_all_dims_is_one_kernel(name):
    """The dim-less overloads (x.sum(), x.prod(), x.argmax(), x.all(), ...)."""
    reduce, kind = REDUCTIONS[name]
    pre = _prologue(kind)
    graphs = check_against_eager(lambda x: reduce(pre(x), None, False) * 2,
                                 randn(5, 6, 7, grad=False), grad=False)
    one_kernel(graph_of(graphs, "inference"))


def test_centering_epilogue_matches_eager_with_grad():
    def fn(x):
        return x - x.mean(-1, keepdim=True), x / x.abs().sum(0, keepdim=True), \
            (x * 2 + 1).exp().sum(-1)

    graphs = check_against_eager(fn, randn(9, 17))
    fused(graphs)
    assert compute_calls(graph_of(graphs, "backward")) == [], str(graphs[1])


@pytest.mark.parametrize("dim", [0, -1, None])
def test_variance_of_a_zero_dim_tensor(dim):
    """A 0-d tensor's dim 0 (or -1) is the tensor itself; brrr's var/std decomposition
    once indexed its (empty) shape there and raised IndexError (found by the fuzzer)."""
    def fn(x):
        return x.var(dim, keepdim=True, unbiased=False) + x, x.std(dim) * x

    check_against_eager(fn, torch.tensor(1.5, requires_grad=True))
