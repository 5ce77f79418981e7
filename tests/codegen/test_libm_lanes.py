"""libm functions give one value per input wherever it sits in a vectorized loop
(cpp_prelude.h: every lane, epilogue and scalar tail goes through one libmvec kernel).
libmvec's vector widths and scalar libm round differently, so before, a row of equal
inputs came out with its last elements an ulp off: its std was not 0 and std's gradient
(defined only where the std is exactly 0) was arbitrary.
"""
import ctypes
import subprocess
from dataclasses import replace

import pytest
import torch

from brrr_compiler import scalar_ops
from brrr_compiler.codegen import cpp
from brrr_compiler.lower.group import lower_group
from brrr_compiler.runtime.toolchain import NATIVE_FLAG, find_toolchain
from tests.helpers import check_against_eager, plan_of

LIBM = [r for r in scalar_ops.TABLE.values() if r.libmvec]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_std_of_a_row_of_equal_sines_and_its_gradient(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(257, 1, generator=g, dtype=dtype).requires_grad_()
    c = torch.randn(1, 257, generator=g, dtype=dtype).sum(0, keepdim=True) * 0 + 0.25

    def f(x, c):
        return torch.sin(x - c).std(-1)

    check_against_eager(f, x, c, grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_position_of_a_row_gets_the_same_value(dtype):
    """Rows of 37 equal inputs (2 AVX-512 float vectors, a half, a quarter and a scalar
    tail) through every libm function: each row constant, and eager's values."""
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(64, 1, generator=g, dtype=dtype) * 0.9 + 0.05).expand(64, 37)
    y = (torch.rand(64, 1, generator=g, dtype=dtype) + 1.0).expand(64, 37)

    def f(x, y):             # x in (0.05, 0.95), y in (1, 2): every function's domain
        outs = [r.ref(x + 0, y * 1) if r.arity == 2 else r.ref(y * 1 if r.name == "acosh" else x + 0)
                for r in LIBM]
        return torch.stack(outs)

    out = torch.compile(f, backend="brrr")(x, y)
    assert torch.equal(out, out[..., :1].expand_as(out))
    check_against_eager(f, x, y, grad=False)


def test_online_softmax_rescales_through_the_wrapper():
    """cpp_online.py's running-max rescale calls brrr_libm_exp: the unit declares it."""
    g = torch.Generator().manual_seed(0)
    x, t = torch.randn(64, 3000, generator=g), torch.randint(0, 3000, (64,), generator=g)
    check_against_eager(lambda a, b: torch.nn.functional.cross_entropy(a, b), x, t, grad=False)


UNARY = [r for r in LIBM if r.arity == 1]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 1e-30, -1e-30, 1e30, -1e30, -740.0, 709.5,
           -90.0, 88.0, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("row", UNARY, ids=lambda r: r.name)
def test_each_domain_is_where_torch_gives_a_number(row):
    """A row's domain (scalar_ops.py) is where the prelude lets libmvec compute a lane;
    outside it the clone returns the row's limits (NaN unless given) itself. So the
    function must be a number inside and those limits outside, or brrr would return
    wrong values; a row without a domain must be a number for every finite argument
    (or the slow lanes it leaves to libmvec want a domain)."""
    x = torch.cat([torch.linspace(-5, 5, 2001, dtype=torch.float64),
                   torch.tensor(SPECIAL[:-1], dtype=torch.float64)])
    y = row.ref(x)
    nan = y.isnan()
    if row.domain:
        lo, hi, inside, below, above = (*row.domain, float("nan"), float("nan"))[:5]
        assert lo <= inside <= hi and not row.ref(torch.tensor(float(inside))).isnan()
        x = torch.cat([x, torch.tensor([lo, hi, lo - 1, hi + 1, lo * 1.5, hi * 1.5],
                                       dtype=torch.float64)])
        y, inner = row.ref(x), (x >= lo) & (x <= hi)
        assert not y[inner].isnan().any(), row.name
        for part, limit in ((x < lo, below), (x > hi, above)):
            got = y[part]
            assert (got.isnan() if limit != limit else got == limit).all(), row.name
    else:                                   # sin(inf) is NaN: finite arguments only
        assert not nan[x.isfinite()].any(), f"{row.name} is NaN somewhere: give it a domain"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lanes_outside_a_domain_are_nan_and_the_rest_eager_values(dtype):
    """Arguments outside each function's domain in every position of rows that run
    full vectors, narrower clones (padded lanes) and the scalar tail."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(8, 37, generator=g, dtype=dtype) * 3)
    x.view(-1)[::7] = torch.tensor(SPECIAL, dtype=dtype).repeat(5)[:len(x.view(-1)[::7])]
    short = x[:3, :5].contiguous()
    rows = [r for r in UNARY if r.domain]

    def f(x):
        return torch.stack([r.ref(x) for r in rows])

    check_against_eager(f, x, grad=False)
    check_against_eager(f, short, grad=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_negative_zero_keeps_its_sign_in_every_lane(dtype):
    """-0.0 through each function odd at 0 (f(-0) = -0) in a tiled kernel whose inner
    loop of 5 ends in a scalar tail: the tail's lane was broadcast as 0 + x, which is +0,
    and an atan2 of it then gave pi for -pi (fuzz seed 188541: tanh, float64)."""
    a = torch.full((16, 31, 5), -0.0, dtype=dtype).transpose(-1, -2)
    b = torch.full((16, 5, 31), -0.0, dtype=dtype)
    odd = [r for r in LIBM if r.arity == 1 and r.name in (
        "sin", "tan", "tanh", "sinh", "asin", "atan", "asinh", "atanh", "expm1", "log1p",
        "erf")]
    assert len(odd) >= 10

    def f(a, b):
        return torch.stack([r.ref(a + b) for r in odd])

    out = torch.compile(f, backend="brrr")(a, b)
    assert torch.equal(torch.signbit(out), torch.signbit(f(a, b))), \
        torch.signbit(out).flatten(1).sum(1)
    check_against_eager(f, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), 0.0])
def test_one_lane_outside_the_domain_in_each_position_of_a_vector(dtype, bad):
    """The all-lanes-inside test (brrr_all_inside: mask registers on AVX-512) must see a
    lane outside log's domain in any of a full vector's positions: row i holds `bad`
    in position i of 64 otherwise ordinary arguments (0 and inf sit at the domain's
    edges: inside it, so they reach libmvec's own special-case path)."""
    x = torch.rand(64, 64, dtype=dtype) + 0.5
    x[torch.arange(64), torch.arange(64)] = bad
    check_against_eager(lambda t: torch.log(t) * 2, x, grad=False)
    check_against_eager(lambda t: torch.acos(t - 1.0), x, grad=False)


def _avx2_library(fn, x, tmp_path):
    """fn's one kernel compiled for an AVX2 target without AVX-512 (the prelude's AVX
    branch, which -march=native on an AVX-512 machine never takes), loaded."""
    tc = find_toolchain()
    try:
        avx2 = "avx2" in open("/proc/cpuinfo").read()
    except OSError:
        avx2 = False
    if tc is None or NATIVE_FLAG not in tc.flags or not avx2 or "-lmvec" not in tc.libs:
        pytest.skip("needs gcc with libmvec on an x86 CPU with AVX2")
    g = plan_of(fn, x).groups[0]
    body = cpp.kernel_source(lower_group(g, g.name), 2)
    src, so = tmp_path / f"{g.name}.cpp", tmp_path / f"{g.name}.so"   # one library a path
    src.write_text(cpp.prelude(body) + "\n" + body)
    flags = tuple("-march=haswell" if f == NATIVE_FLAG else f for f in tc.flags)
    subprocess.run(replace(tc, flags=flags).command(str(src), str(so)), check=True)
    return getattr(ctypes.CDLL(str(so)), g.name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_avx2_domain_test_keeps_lanes_outside_the_domain(dtype, tmp_path):
    """brrr_all_inside's movmsk form (AVX without AVX-512) compiles and keeps every
    special value right in every position of full vectors and the tail. (A wrong
    all-inside answer would still give right values, libmvec's own slow path: the test
    guards the branch's build and the blends, not its speed.)"""
    x = torch.randn(1037, dtype=dtype) * 2
    x[::7] = torch.tensor(SPECIAL, dtype=dtype).repeat(200)[:len(x[::7])]
    for fn in (torch.log, torch.asin):
        kernel = _avx2_library(lambda t: fn(t), x, tmp_path)
        y = torch.empty_like(x)
        kernel(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()))
        torch.testing.assert_close(y, fn(x), equal_nan=True)
