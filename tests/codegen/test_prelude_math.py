"""brrr's own float32 exp and erf (cpp_prelude.h), checked through compiled kernels over a
sweep of float32 bit patterns (every 4099th one: all signs, exponents, subnormals) plus
the special values: at most `max_ulp` from the exact (float64) value, and exactly eager's
NaN, inf, zero and subnormal behaviour.
"""
import pytest
import torch

SPECIALS = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 88.72, 88.7228, 88.73,
            89.0, -87.3, -87.4, -100.0, -103.9, -103.97, -104.0, -104.5, 1e-30, -1e-30,
            3.9, -3.9, 3.92, 1e30, -1e30, 0.5, -0.5]


def _sweep() -> torch.Tensor:
    bits = torch.arange(0, 2**32, 4099, dtype=torch.int64).to(torch.int32)
    return torch.cat([bits.view(torch.float32), torch.tensor(SPECIALS)])


def _ulp(x: torch.Tensor) -> torch.Tensor:
    """Spacing of float32 at |x| (x as float32), as float64."""
    a = x.abs().float()
    return (torch.nextafter(a, torch.tensor(float("inf"))) - a).double()


@pytest.mark.parametrize("fn,max_ulp", [(torch.exp, 1.0), (torch.erf, 6.0)],
                         ids=["exp", "erf"])
def test_float32_accuracy_and_specials(fn, max_ulp):
    x = _sweep()
    got = torch.compile(fn, backend="brrr", dynamic=False)(x)
    exact = fn(x.double())
    rounded = exact.float()
    assert torch.equal(torch.isnan(got), torch.isnan(rounded))
    inf = torch.isinf(rounded)
    assert torch.equal(got[inf], rounded[inf])                  # overflow and +-inf
    zero = rounded == 0
    assert torch.equal(got[zero], rounded[zero])                # underflow to (signed) 0
    finite = torch.isfinite(rounded) & ~zero
    err = (got[finite].double() - exact[finite]).abs() / _ulp(rounded[finite])
    assert err.max().item() <= max_ulp


def test_exp_subnormal_results_are_not_flushed():
    x = torch.tensor([-87.5, -90.0, -95.0, -100.0, -103.0])
    got = torch.compile(torch.exp, backend="brrr", dynamic=False)(x)
    assert torch.equal(got, torch.exp(x))
    assert (got > 0).all()


def test_nonpositive_exp_accuracy_and_specials():
    """brrr_expf_nonpos, the exp of x - rowmax (transforms/signs.py): each row's max is 0, so
    the argument is x itself. <= 1 ulp where eager's result is normal, 0 where it is 0,
    under 1e-38 off where it is subnormal (flushed below -87.68), NaN where eager's is."""
    x = _sweep()
    x = x[x <= 0]                                  # NaN rows are checked below
    x = torch.cat([x, torch.zeros((-x.numel()) % 255)]).reshape(-1, 255)
    x = torch.cat([x, torch.zeros(x.shape[0], 1)], 1)
    x[-1, 7] = float("nan")                        # the last row: NaN everywhere
    fn = lambda t: torch.exp(t - t.amax(-1, keepdim=True))
    got = torch.compile(fn, backend="brrr", dynamic=False)(x)
    assert torch.equal(torch.isnan(got), torch.isnan(fn(x))) and got[-1].isnan().all()
    x, got = x[:-1], got[:-1]
    exact = torch.exp(x.double())
    rounded = exact.float()
    normal = rounded >= torch.finfo(torch.float32).tiny
    err = (got[normal].double() - exact[normal]).abs() / _ulp(rounded[normal])
    assert err.max().item() <= 1.0
    assert (got[rounded == 0] == 0).all()
    small = ~normal & (rounded == rounded)
    assert ((got[small].double() - exact[small]).abs() < 1e-38).all()


def test_gaussian_exp_matches_eager():
    """exp(-x²/2) (GELU's backward) takes brrr_expf_nonpos too: the square of every float32
    sweep value, inf and NaN included, within 1 ulp of eager where eager's is normal."""
    x = _sweep()
    fn = lambda t: torch.exp(t * t * -0.5)
    got, want = torch.compile(fn, backend="brrr", dynamic=False)(x), fn(x)
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    normal = want >= torch.finfo(torch.float32).tiny
    assert ((got[normal] - want[normal]).abs() <= _ulp(want[normal]).float()).all()
    assert (got[want == 0] == 0).all()
    small = ~normal & ~torch.isnan(want)
    assert ((got[small] - want[small]).abs() < 1e-38).all()
