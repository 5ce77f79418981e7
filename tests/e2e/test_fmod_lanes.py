"""fmod, remainder and floor division on floats, through the prelude's vector clones
(cpp_prelude.h, brrr_fmodf_v): exact like C's fmod on every lane, whether the lane takes
the double-precision path or libm's, against the exact result (float32 operands widened
to float64, where fmod is exact and the result is a float32 value)."""
import functools

import torch

from brrr_compiler.backend import brrr_backend
from brrr_compiler.codegen import cpp
from tests.helpers import assert_no_fallback

EDGES = [0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 0.1, -0.1, 1e-45, -1e-45, 1.2e-38, 3.4e38, -3.4e38,
         float("inf"), float("-inf"), float("nan"), 2.0**29, 2.0**30, 7.0, 0.3, 5.5, 1e10, -1e10,
         1e-20, 536870911.0, 536870913.0, 16777217.0]


def _operands():
    g = torch.Generator().manual_seed(0)
    e = torch.tensor(EDGES)
    a = torch.cat([e.repeat_interleave(len(e)), torch.randn(20000, generator=g) * 100,
                   torch.randn(20000, generator=g) * 1e8,
                   torch.randint(-1000, 1000, (20000,), generator=g).float()])
    b = torch.cat([e.repeat(len(e)), torch.randn(20000, generator=g),
                   torch.randn(20000, generator=g) * 1e-3,
                   torch.randint(1, 20, (20000,), generator=g).float()])
    return a, b


def _compiled(fn, *args):
    sink = []
    torch._dynamo.reset()
    out = torch.compile(fn, backend=functools.partial(brrr_backend, _sink=sink))(*args)
    torch._dynamo.reset()
    assert_no_fallback(sink)
    return out


def _same_bits(got, want):
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int32), want[~nan].view(torch.int32))


def test_float_fmod_is_exact_on_every_lane():
    a, b = _operands()
    # eager's float32 fmod gives NaN for a finite a over a subnormal b; float64 is exact
    _same_bits(_compiled(torch.fmod, a, b), torch.fmod(a.double(), b.double()).float())


def test_float_remainder_and_floor_division_match_eager():
    a, b = _operands()
    floor_div = lambda x, y: torch.div(x, y, rounding_mode="floor")    # noqa: E731
    # eager's own NaNs: over subnormal divisors (above), and remainder where a / b
    # overflows float (it computes a - b * floor(a / b))
    keep = (b.abs() >= 1e-37) & ~(a / b).isinf()
    for fn in (torch.remainder, floor_div):
        _same_bits(_compiled(fn, a[keep], b[keep]), fn(a[keep], b[keep]))


def test_only_units_that_call_fmod_define_its_clones():
    assert "#define BRRR_FMOD_CLONES" in cpp.prelude("x = brrr_remainder(a, b);")
    assert "#define BRRR_FMOD_CLONES" not in cpp.prelude("x = brrr_libm_expf(a);")
