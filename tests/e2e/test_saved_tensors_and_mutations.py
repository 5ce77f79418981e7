"""Training graphs whose saved tensors, mutated inputs and multi-output ops have other
strides or dtypes than the plain case: each checked against eager, gradients included."""
import pytest
import torch
from torch.testing import assert_close

from tests.helpers import LOW_PRECISION_TOL, check_against_eager


def _spd(n, batch=()):
    torch.manual_seed(0)
    a = torch.randn(*batch, n, n)
    return (a @ a.mT + n * torch.eye(n)).requires_grad_()


def test_cholesky_upper_gradient():
    # linalg's error check runs under an effect token; the transposed factor it saves for
    # the backward must keep its strides across the forward/backward boundary
    check_against_eager(lambda a: torch.linalg.cholesky(a, upper=True), _spd(5))


def test_cholesky_lower_gradient():
    check_against_eager(lambda a: torch.linalg.cholesky(a), _spd(5))


def test_effect_token_op_between_kernels():
    def f(a):
        u = torch.linalg.cholesky(a * 2.0 + 1.0, upper=True)
        return (u.sin() * 3.0).exp()
    check_against_eager(f, _spd(6, (2,)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_batch_norm_with_update_running_stats(dtype):
    torch.manual_seed(0)
    x = torch.randn(5, 5, 5, dtype=dtype)
    w, b, mean = (torch.randn(5, dtype=dtype) for _ in range(3))
    var = torch.rand(5, dtype=dtype)

    def f(x, w, b, mean, var):
        out = torch.ops.aten._batch_norm_with_update(x, w, b, mean, var, 0.1, 1e-5)
        return out[:3]
    check_against_eager(f, x, w, b, mean, var, grad=False)

    # the updated statistics, written back into the inputs, match eager's
    m1, v1, m2, v2 = mean.clone(), var.clone(), mean.clone(), var.clone()
    f(x, w, b, m1, v1)
    torch.compile(f, backend="brrr")(x, w, b, m2, v2)
    tol = LOW_PRECISION_TOL.get(dtype, {})
    assert_close(m2, m1, **tol)
    assert_close(v2, v1, **tol)


# An op whose fake kernel disagrees with its real one, as _batch_norm_with_update_
# functional's did for half-precision running statistics: brrr's kernels must not read
# the real tensor with the fake one's dtype or strides.
@torch.library.custom_op("brrr_test::lying_dtype", mutates_args=())
def _lying_dtype(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).to(torch.bfloat16)


@_lying_dtype.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("brrr_test::lying_strides", mutates_args=())
def _lying_strides(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).t().contiguous().t()


@_lying_strides.register_fake
def _(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@pytest.mark.parametrize("op", [_lying_dtype, _lying_strides])
def test_fallback_whose_fake_kernel_lies_feeds_a_kernel(op):
    def f(x):
        y = op(x)
        return (y.float() * 3.0 + 1.0).exp().sum(-1), y.float().sin()
    x = torch.randn(33, 17)
    # y.float() of the lying op's float result is y itself, so eager's sin follows the
    # real (transposed) strides; no compiler can know them before the op runs
    sink = check_against_eager(f, x, grad=False, atol=1e-2, rtol=1e-2,
                               strides=op is not _lying_strides)
    assert sum(len(r.kernels) for r in sink) >= 1
    compiled = torch.compile(f, backend="brrr")
    for _ in range(2):          # the second call runs the runner the first one settled on
        for a, e in zip(compiled(x), f(x)):
            assert_close(a, e, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("act", [torch.nn.functional.mish, torch.nn.functional.silu,
                                 torch.nn.functional.relu])
def test_in_place_activation_on_an_input_autograd_saved(act):
    # the forward saves the input for the backward and also writes the result into it
    def f(x):
        return act(x, inplace=True)
    results = []
    for compile_ in (False, True):
        torch._dynamo.reset()
        leaf = torch.randn(6, 7, generator=torch.Generator().manual_seed(0), requires_grad=True)
        x = leaf.clone()
        out = (torch.compile(f, backend="brrr") if compile_ else f)(x)
        (out * torch.arange(42.0).view(6, 7)).sum().backward()
        results.append((out.detach(), x.detach(), leaf.grad))
    for a, e in zip(results[1], results[0]):
        assert_close(a, e)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_norm_statistics_dtypes(dtype):
    # mean and rstd come back in the input's dtype on the CPU, as eager's kernels return
    # them (check_against_eager compares dtypes)
    x = torch.randn(4, 6, 8, dtype=dtype)
    w8, b8, w6, b6 = (torch.randn(n, dtype=dtype) for n in (8, 8, 6, 6))
    check_against_eager(lambda x, w, b: torch.ops.aten.native_layer_norm(x, [8], w, b, 1e-5),
                        x, w8, b8, grad=False)
    check_against_eager(lambda x, w, b: torch.ops.aten.native_group_norm(
        x, w, b, 4, 6, 8, 3, 1e-5), x, w6, b6, grad=False)


def test_check_strides_option_checks_every_call():
    def f(x):
        return (_lying_strides(x) * 3.0).exp()
    compiled = torch.compile(f, backend="brrr", options={"check_strides": True})
    for n in (5, 5, 9):            # a new size recompiles; every call runs the checks
        x = torch.randn(n, n + 2)
        assert_close(compiled(x), f(x))


def test_input_read_then_mutated_in_graph_keeps_its_gradient():
    # x is read by lerp, then mutated in the graph (a copy_ the graph keeps); the
    # backward recomputes lerp from the saved x, which must be x before the mutation
    def f(x, y, mask):
        v = torch.lerp(x, y, 0.25)
        x[mask] = 0.0
        return torch.rsqrt(torch.log1p(v.abs()).abs() + 1)

    g = torch.Generator().manual_seed(7882)
    x = torch.randn(3, 1, 2, generator=g)
    y = torch.randn(3, 3, 4, generator=g)[..., 1::2].requires_grad_()
    mask = torch.rand(3, 1, 2, generator=g) > 0.5
    check_against_eager(f, x, y, mask)


def test_a_mutated_input_the_loss_ignores():
    # the written input is an output of the forward, and the loss does not read it:
    # AOTAutograd hands its tangent to the backward as None (fuzz seed 37008); brrr's
    # backward takes zeros there, as eager's gradient is
    def f(buf, idx, src, w):
        before = buf.contiguous()
        buf.index_add_(0, idx, src)
        return before, w.sum().flatten()

    def inputs():
        torch.manual_seed(0)
        return (torch.randn(1, 16)[:, 1::2], torch.zeros(3, dtype=torch.long),
                torch.randn(3, 8, requires_grad=True), torch.randn(2, 8, requires_grad=True))

    got, want = inputs(), inputs()
    out = torch.compile(f, backend="brrr")(*got)
    dsrc, dw = torch.autograd.grad(out[1].sum(), got[2:], allow_unused=True)
    _, dw_eager = torch.autograd.grad(f(*want)[1].sum(), want[2:], allow_unused=True)
    assert_close(dw, dw_eager)
    assert dsrc is None or not dsrc.any()     # eager: None, the loss never reads src
    assert_close(got[0], want[0])


def test_inputs_only_aten_reads_are_taken_as_they_come():
    """A bfloat16 embedding_bag's offset2bag is empty at run time where its FakeTensor has
    one entry per index; the backward graph, all ATen, checked it as an input and raised
    MetaMismatch (op sweep, bfloat16 gradients). Only what kernels read is checked."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(10, 5, generator=g).to(torch.bfloat16).requires_grad_()
    psw = torch.randn(5, generator=g).to(torch.bfloat16).requires_grad_()
    idx, offsets = torch.tensor([1, 2, 4, 5, 4]), torch.tensor([0, 3])
    check_against_eager(lambda w, psw: (torch.nn.functional.embedding_bag(
        idx, w, offsets, mode="sum", per_sample_weights=psw) * 2).tanh(), w, psw)
