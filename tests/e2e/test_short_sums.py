"""Short float32 sums add in double (codegen/cpp_accumulators.py): a sum of fewer than 32
values no longer adds them one after another in float. Eager's sums keep interleaved
partials, so its mean of 8 or 16 equal values is exact; brrr's was an ulp off, and
(x - mean) * rsqrt(var + 1e-5) over equal rows made that 316 ulps.

Long sums of values that may cancel add in float lanes of at most 32 values (SUM_CHUNK).

Row sums that go on into a sum across rows (a full sum of normalized rows) add in double
too, where their summand's sign is unknown: their float lanes' errors were all that was
left of a total that cancels.
"""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import check_against_eager


def _equal_rows(layout: str, n: int) -> tuple[torch.Tensor, int]:
    g = torch.Generator().manual_seed(n)
    if layout == "expanded":          # the reduced dim has stride 0
        return torch.randn(1, 7, 3, generator=g).expand(n, 7, 3), 0
    if layout == "column":            # a sum over dim 0 of a row-major tensor
        return torch.randn(1, 7, 3, generator=g).repeat(n, 1, 1), 0
    return torch.randn(7, 3, 1, generator=g).repeat(1, 1, n), -1


@pytest.mark.parametrize("n", [8, 16])
@pytest.mark.parametrize("layout", ["expanded", "column", "row"])
def test_mean_of_equal_values_is_exact(layout, n):
    """n * x is a float (n a power of 2): the sum is exact, and so is the mean."""
    x, dim = _equal_rows(layout, n)
    mean = torch.compile(lambda x: x.mean(dim), backend="brrr")(x)
    assert torch.equal(mean, x.select(dim, 0))
    check_against_eager(lambda x: x.mean(dim), x, grad=False)


@pytest.mark.parametrize("layout", ["expanded", "column"])
def test_normalising_equal_rows_gives_zero(layout):
    x, _ = _equal_rows(layout, 8)

    def f(x):
        return (x - x.mean(0, keepdim=True)) * torch.rsqrt(x.var(0, keepdim=True, unbiased=False) + 1e-5)

    assert torch.compile(f, backend="brrr")(x).abs().max().item() == 0
    check_against_eager(f, x, grad=False)


def test_column_folds_of_a_row_kernel_over_few_rows():
    """A row kernel that also sums its columns (cpp_columns.py) over 8 rows."""
    x = torch.randn(1, 64, generator=torch.Generator().manual_seed(0)).repeat(8, 1)

    def f(x):
        return F.softmax(x, -1), x.sum(0) / 8

    assert torch.equal(torch.compile(f, backend="brrr")(x)[1], x[0])
    check_against_eager(f, x, grad=False)


def test_split_row_sum_under_a_scalar_select_vectorizes():
    # one long row split over two threads; lerp's decomposition selects on a bool of its
    # scalar weight, which the threads read from outside their parallel region. The
    # threads' chunk sums must not run one add after another (gcc left that loop
    # scalar: a float sum of 1024 in sequence, off by 5e-4 where eager is 4e-5; fuzz
    # seed 8091)
    def f(y, x, s):
        return torch.lerp(y, x.to(y.dtype), 0.25).sum() / (s.abs() + 1)

    def exact(y, x, s):     # x's float16 values, the rest in float64
        return torch.lerp(y, x.to(torch.float64), 0.25).sum() / (s.abs() + 1)

    g = torch.Generator().manual_seed(8091)
    torch.randn(7, 128, 1, generator=g), torch.randn(7, 128, 2048, generator=g)
    y = torch.randn(1, 128, 1024, generator=g).requires_grad_()
    x = torch.randn(3, 128, 2048, generator=g).to(torch.float16)[..., 1::2]
    s = torch.randn((), generator=g).requires_grad_()
    check_against_eager(f, y, x, s, options={"num_threads": 2}, reference=exact)


def test_a_full_sum_of_normalized_rows_is_as_close_as_eagers():
    """Fuzz seed 51660: 832 rows of 257 normalized values, each row summing to 0. The
    row sums fed the total from float lanes, and brrr's total erred 1.6e-4 where eager's
    erred 3e-5; in double it errs less than eager's."""
    g = torch.Generator().manual_seed(51660)
    a = torch.randn((13, 64, 257), generator=g)
    b = torch.randn((13, 257, 64), generator=g).transpose(-1, -2)

    def f(a, b):
        v = a - b
        return ((v - v.mean(2, keepdim=True)) * torch.rsqrt(v.var(2, keepdim=True, unbiased=False) + 1e-5)).sum()

    exact = f(a.double(), b.double()).item()
    got = torch.compile(f, backend="brrr")(a, b).item()
    assert abs(got - exact) <= abs(f(a, b).item() - exact)
    check_against_eager(f, a, b, grad=True, strict=True, reference=f)


def test_long_sums_of_values_that_cancel_are_as_close_as_eagers():
    """Fuzz seed 79097: a scalar's gradient is a sum of 10,000 cotangents. Float lanes
    adding 128 values each before the chunk total went on in double erred 2.8x eager's
    cascade sum (median over seeds); lanes of 32 (cpp_reduce.SUM_CHUNK) do not."""
    f = torch.compile(lambda x: x.sum(), backend="brrr", dynamic=False)
    brrr, eager = [], []
    for seed in range(30):
        x = torch.randn(10_000, generator=torch.Generator().manual_seed(seed))
        exact = x.double().sum().item()
        brrr.append(abs(f(x).item() - exact))
        eager.append(abs(x.sum().item() - exact))
    assert sorted(brrr)[15] <= 1.25 * sorted(eager)[15]
