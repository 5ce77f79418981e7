"""Edge inputs: brrr gives eager's answer, or eager's error, on the inputs models meet.

0-size and 0-dim tensors through reductions and norms; channels_last and overlapping
(as_strided) inputs; integer and bool reductions; NaN, inf and -0.0 through reductions
and softmax; recompiling for a new dtype; out-of-range indices raising like eager.
Inputs that alias each other, are mutated in place or come back as views are in
test_aliased_inputs.py; streamed outputs and (opt-in, `-m slow`) more than 2^31 elements
in test_large_inputs.py. Pointwise chains over layouts, dtypes and special values are in
test_pointwise_zoo.py.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from tests.e2e.graph_checks import has_kernel, randn
from tests.helpers import check_against_eager, clone_input

aten = torch.ops.aten


# ---- 0-size and 0-dim --------------------------------------------------------------

def _reduce_mix(x):
    return x.sum(-1), x.mean(0), torch.softmax(x, -1) * 2, x.var(-1), (x * 2).amax(-1) + 1


ZERO_SIZE = {
    "rows": (0, 7),      # no rows: every kernel has nothing to do
    "cols": (5, 0),      # empty rows: sum 0, mean/var nan, amax raises (eager too)
}


@pytest.mark.parametrize("shape", list(ZERO_SIZE.values()), ids=list(ZERO_SIZE))
def test_zero_size_reductions(shape):
    x = randn(*shape)
    if shape[-1] == 0:
        fn = lambda x: (x.sum(-1), x.mean(-1), x.sum(0) + 1, torch.softmax(x, -1) * 2)  # noqa: E731
    else:
        fn = _reduce_mix
    check_against_eager(fn, x)


def test_zero_size_amax_raises_like_eager():
    _raises_like_eager(lambda x: (x * 2).amax(-1), torch.randn(5, 0))


def test_zero_size_norms_and_losses():
    x, w, b = randn(0, 8), randn(8, seed=1), randn(8, seed=2)
    check_against_eager(lambda x, w, b: F.layer_norm(x, (8,), w, b) * 2 + F.gelu(x), x, w, b)
    target = torch.zeros(0, dtype=torch.long)
    check_against_eager(lambda x: F.cross_entropy(x, target, reduction="sum"), randn(0, 8))


def test_zero_dim_inputs():
    x, y = randn(seed=3), randn(6, seed=4)

    def fn(x, y):
        return (x * y).sum(), (x.exp() + y).amax(), torch.softmax(y * x, 0), x.sum(), x.amax()

    graphs = check_against_eager(fn, x, y)
    assert has_kernel(graphs)


@pytest.mark.parametrize("dims", [(0, 0), (0, -1), (-1, 0)])
def test_transpose_of_a_zero_dim_value_inside_a_kernel(dims):
    """A 0-d tensor's transpose(0, 0) / (0, -1) is the tensor itself; lowering it read
    the index's first dim, which a 0-d value has not (generated pattern 149: the cost
    policy raised, the graph ran through ATen)."""
    x, s = randn(8, 17, seed=5), randn(seed=6)

    def fn(x, s):
        return torch.minimum(x * 2 - 1, (s * 3).transpose(*dims)), x * x.mean().transpose(*dims)

    graphs = check_against_eager(fn, x, s, strict=True)
    assert has_kernel(graphs)


# ---- layouts: channels_last, overlapping strides, expanded ---------------------------

def test_channels_last_norm_and_pointwise():
    x = randn(2, 6, 5, 4, grad=False).to(memory_format=torch.channels_last).requires_grad_()
    w, b = randn(6, seed=1), randn(6, seed=2)

    def fn(x, w, b):
        y = F.group_norm(x, 3, w, b)
        return F.silu(y) + x.mean(1, keepdim=True), torch.softmax(x, 1)

    graphs = check_against_eager(fn, x, w, b)
    assert has_kernel(graphs)


def test_overlapping_strides_input():
    """as_strided windows overlap: element (i, j) is base[i + j]."""
    base = randn(20, grad=False)
    x = base.as_strided((8, 6), (1, 1), 2).requires_grad_()   # a leaf with overlapping strides
    x = clone_input(x).requires_grad_()
    assert x.stride() == (1, 1)
    check_against_eager(lambda x: (x.sin() * 2).sum(-1) + x.amax(-1), x)


def test_overlapping_as_strided_inside_graph():
    def fn(base):
        win = base.as_strided((7, 5), (2, 1), 1)
        return torch.softmax(win * 3, -1), win.sum(0)

    check_against_eager(fn, randn(40))


def test_expanded_and_broadcast_reduction_inputs():
    x = randn(7, 1, grad=False).expand(7, 9).requires_grad_()
    x = clone_input(x).requires_grad_()
    assert x.stride() == (1, 0)
    y = randn(9, seed=5)
    check_against_eager(lambda x, y: (torch.softmax(x + y, -1), (x * y).sum(0)), x, y)


def test_reduced_value_broadcast_along_another_dim_of_a_square():
    """sum over dim 0 unsqueezed to [n, 1] and broadcast over [n, n]: the reduced value
    is needed at the row index, not at the kept column (cdist's backward does this).
    Shapes agree only because the matrix is square; brrr once read the wrong sums."""
    def fn(w, b):
        return b * w.sum(0).unsqueeze(-1) - w, torch.softmax(w, 0).t() * w.amax(0, keepdim=True)

    check_against_eager(fn, randn(5, 5), randn(5, 5, seed=1), allow_fallback=True)
    x1, x2 = randn(5, 5, seed=2), randn(5, 5, seed=3)
    check_against_eager(lambda a, b: torch.cdist(a, b, 2.0, "use_mm_for_euclid_dist"), x1, x2,
                        allow_fallback=True)


def test_kernels_linked_through_another_kernel_run_in_order():
    """A kernel that feeds an ATen call feeding a second kernel, which feeds the first
    back: index_reduce's backward (prod) made such a pair, and the runner had to drop
    both kernels. The partitioner now refuses the merge that closes the loop."""
    def fn(x, w):
        a, b = x.sin(), x.cos()
        return (a @ w) + b, a * b

    graphs = check_against_eager(fn, randn(6, 6), randn(6, 6, seed=1))
    assert has_kernel(graphs)
    index = torch.tensor([0])
    check_against_eager(lambda x, s: x.index_reduce(0, index, s, "prod", include_self=False),
                        randn(), randn(seed=1))


# ---- integer and bool ----------------------------------------------------------------

INT_DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: str(d)[6:])
def test_integer_and_bool_reductions(dtype):
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 2 if dtype is torch.bool else 100, (9, 13), generator=gen).to(dtype)

    def fn(x):
        out = (x.sum(-1), x.sum(0, dtype=torch.int32), x.amax(-1), x.amin(0), x.any(-1),
               x.all(0), (x == x.amax(-1, keepdim=True)).sum(-1))
        if x.dtype is not torch.bool:     # eager has no argmax/argmin for bool
            out += (x.argmax(-1), x.argmin(0), (x * 3).prod(-1))
        return out

    check_against_eager(fn, x, grad=False)


def test_integer_overflow_wraps_like_eager():
    x = torch.tensor([[100, 120, 7], [-128, -1, 127]], dtype=torch.int8)
    check_against_eager(lambda x: (x + x, x * 3, x.sum(-1), (x + 100).amax(-1)), x, grad=False)


def test_bool_promotion_in_pointwise_and_reduction():
    gen = torch.Generator().manual_seed(1)
    m = torch.rand(7, 11, generator=gen) > 0.5
    x = randn(7, 11)
    check_against_eager(lambda m, x: (m * x + m, (m & (x > 0)).sum(-1), m.float().mean(0)), m, x)


# ---- NaN, inf, -0.0 through reductions ---------------------------------------------

SPECIAL_ROWS = torch.tensor([
    [1.0, float("nan"), 3.0, -2.0],            # NaN in the middle
    [float("-inf"), float("-inf"), float("-inf"), float("-inf")],   # softmax: all -inf
    [float("inf"), 1.0, float("-inf"), 0.0],
    [-0.0, 0.0, -0.0, 0.0],                    # signed zeros tie
    [-0.0, -0.0, -0.0, -0.0],
    [float("nan"), float("nan"), 1.0, float("inf")],
    [2.0, 2.0, -1.0, 2.0],                     # ties: first index wins
])


def _special_reductions(x):
    return (x.amax(-1), x.amin(-1), x.argmax(-1), x.argmin(-1), x.max(-1).values,
            x.max(-1).indices, x.min(0).indices, x.sum(-1), x.mean(0), x.prod(-1),
            torch.softmax(x, -1), torch.logsumexp(x, -1), torch.nansum(x, -1),
            torch.clamp(x, -1.0, 1.0).amax(-1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=lambda d: str(d)[6:])
def test_nan_inf_negative_zero_reductions(dtype):
    x = SPECIAL_ROWS.to(dtype)
    graphs = check_against_eager(lambda x: _special_reductions(x * 1), x, grad=False)
    assert has_kernel(graphs)


def test_signed_zero_through_where_clamp_and_amin():
    """-0.0 chosen explicitly (where, clamp) keeps its sign bit, as in eager; assert_close
    cannot see the sign of a zero, so the sign bits are compared. (Which zero a max/min
    reduction returns on a -0.0/0.0 tie is unspecified in eager itself.)"""
    x = SPECIAL_ROWS[3:5].clone()

    def fn(x):
        w = torch.where(x > 0, x, -0.0)
        return torch.signbit(w), torch.signbit(w.amin(-1)), torch.signbit(torch.clamp(x, min=-0.0))

    torch._dynamo.reset()
    expected = fn(x)
    actual = torch.compile(fn, backend="brrr")(x)
    torch._dynamo.reset()
    for a, e in zip(actual, expected, strict=True):
        assert torch.equal(a, e)


# ---- recompiling for a new dtype -----------------------------------------------------

def test_recompile_for_new_dtype():
    def fn(x):
        return torch.softmax(x * 2, -1) + x.sum(-1, keepdim=True)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="brrr")
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.float32):
        x = torch.randn(6, 9, dtype=dtype)
        out = compiled(x)
        assert out.dtype == dtype
        tol = {} if dtype in (torch.float32, torch.float64) else dict(atol=2e-2, rtol=2e-2)
        assert_close(out, fn(x), **tol)
    x = torch.randint(-5, 5, (6, 9))
    assert_close(torch.compile(lambda x: (x * 3).sum(-1) - x.amax(-1), backend="brrr")(x),
                 (x * 3).sum(-1) - x.amax(-1))
    torch._dynamo.reset()


# ---- errors eager raises -------------------------------------------------------------

def _raises_like_eager(fn, *args):
    """Eager raises; compiled, brrr raises what aot_eager raises (an error found while
    tracing comes from Dynamo as a TorchRuntimeError under every backend; one found
    while running comes from the kernel, an IndexError that is also a RuntimeError)."""
    with pytest.raises(Exception):
        fn(*args)
    errors = {}
    for backend in ("aot_eager", "brrr"):
        torch._dynamo.reset()
        with pytest.raises(Exception) as err:
            torch.compile(fn, backend=backend)(*args)
        errors[backend] = err.value
    torch._dynamo.reset()
    assert isinstance(errors["brrr"], type(errors["aot_eager"])), errors
    return errors["brrr"]


def test_gather_out_of_range_raises():
    x, idx = torch.randn(4, 5), torch.tensor([[0, 1], [2, 5], [0, 0], [1, 1]])
    _raises_like_eager(lambda x, i: torch.gather(x * 2, 1, i).sum(-1), x, idx)
    _raises_like_eager(lambda x, i: torch.gather(x * 2, 1, i).sum(-1), x, -idx - 1)


def test_gather_feeding_reductions_builds():
    """A gathered index read per element of a reduction loop, and per column of an
    outer-dim (tiled) reduction: both once generated C++ that did not compile."""
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(6, 300, generator=gen), torch.randn(64, 300, generator=gen)
    rows, cols = torch.randint(0, 300, (6, 40), generator=gen), torch.randint(0, 6, (1, 300), generator=gen)
    check_against_eager(lambda x, i: torch.gather(x * 2, 1, i).sum(-1), x, rows, grad=False)
    check_against_eager(lambda w, x, i: w.sum(0, keepdim=True) * torch.gather(x * 2, 0, i),
                        w, x, cols, grad=False)


def test_cross_entropy_out_of_range_target_raises():
    x = torch.randn(4, 5)
    _raises_like_eager(lambda x, t: F.cross_entropy(x * 2, t), x, torch.tensor([0, 1, 5, 2]))
    _raises_like_eager(lambda x, t: F.nll_loss(F.log_softmax(x, -1), t), x,
                       torch.tensor([0, -3, 1, 2]))


def test_ignore_index_and_valid_targets_still_match():
    x = randn(6, 5)
    t = torch.tensor([0, -100, 4, 2, -100, 1])
    check_against_eager(lambda x: F.cross_entropy(x * 2, t), x)
    check_against_eager(lambda x: F.cross_entropy(x, t, reduction="none"), x)


def test_integer_division_by_zero_raises():
    x, y = torch.tensor([4, 5, 6]), torch.tensor([1, 0, 2])
    _raises_like_eager(lambda x, y: (x + 1) // y, x, y)


def test_shape_mismatch_raises():
    _raises_like_eager(lambda x, y: (x * 2 + y).sum(), torch.randn(3, 4), torch.randn(5))


def test_views_absorbed_still_match_eager():
    def fn(x, w):
        y = x @ w
        return y[:, ::2] * y[:, 1::2] + x.t()[:4, :4].exp()

    check_against_eager(fn, torch.randn(4, 8).requires_grad_(), torch.randn(8, 8).requires_grad_())
