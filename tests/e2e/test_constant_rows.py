"""Statistics of rows whose values are all equal (an expanded input, a broadcast
difference) are exact, as eager's Welford statistics are: the mean is the value, the
variance 0. brrr takes the mean about each row's first element (decompositions.py);
sum(x)/n of n equal values is off by an ulp or so, which (x - mean) * rsqrt(var + eps)
turns into errors of 1/sqrt(eps) ulps, and std's gradient (0/0, masked to 0 where the
std is exactly 0) into arbitrary values."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import check_against_eager


def _rows_of_equal_values(rows: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, 1, generator=torch.Generator().manual_seed(seed)).expand(rows,
                                                                                      length)


@pytest.mark.parametrize("length", [8, 256, 300])
def test_layer_norm_of_equal_values_is_zero(length):
    x = _rows_of_equal_values(16, length) * 3.7
    check_against_eager(lambda x: F.layer_norm(x, (length,)), x, grad=False, strict=True)
    torch._dynamo.reset()
    out = torch.compile(lambda x: F.layer_norm(x, (length,)), backend="brrr")(x)
    torch._dynamo.reset()
    assert (out == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_variance_of_equal_values_is_zero_and_stds_gradient_too(dtype):
    """exp of a broadcast difference: every row is one value repeated 256 times."""
    g = torch.Generator().manual_seed(1995)
    a = torch.randn(1, 256, generator=g).to(dtype).sum(1, keepdim=True).expand(1, 256)
    b = torch.randn(64, 1, generator=g).to(dtype).requires_grad_()

    def fn(a, b):
        e = torch.exp(b - a)
        return e.std(-1), e.var(-1, unbiased=False)

    check_against_eager(fn, a, b, strict=True)
    torch._dynamo.reset()
    std, var = torch.compile(fn, backend="brrr")(a, b)
    torch._dynamo.reset()
    assert (std == 0).all() and (var == 0).all()


def test_batch_norm_of_a_constant_channel():
    x = torch.randn(8, 3, 5, 5, generator=torch.Generator().manual_seed(2))
    x[:, 1] = 0.3
    check_against_eager(lambda x: F.batch_norm(x, None, None, training=True), x, grad=False)


def test_group_norm_of_constant_groups():
    x = torch.randn(4, 1, 1, 1, generator=torch.Generator().manual_seed(3)).expand(4, 6, 5, 5)
    check_against_eager(lambda x: F.group_norm(x, 3), x, grad=False, strict=True)


def test_a_plain_mean_of_an_expanded_input_is_the_value():
    """x - x.mean(0) over an input expanded along dim 0, fused with a store over the full
    domain (fuzz seed 25873): the summand is the same all along the reduced dim, and
    gcc added it up one value after another in float (12 ulp over 64 rows). It now adds
    in double (codegen/cpp_accumulators.py), and the difference is exactly 0."""
    x = torch.randn(1, 16, 8, generator=torch.Generator().manual_seed(25873)).expand(64, 16, 8)

    def fn(x):
        return torch.sigmoid(x.clamp(-0.5, 0.7)), x - x.mean(0, keepdim=True)

    check_against_eager(fn, x, grad=False, strict=True)
    torch._dynamo.reset()
    _, centred = torch.compile(fn, backend="brrr")(x)
    torch._dynamo.reset()
    assert (centred == 0).all()
