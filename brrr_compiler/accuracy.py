"""Is a compiled result right? Eager is the oracle, and a float64 run of the same program
judges the cases where brrr's rounding differs from eager's: the tests' comparisons
(tests/helpers.py), the fuzzer, the model suite and `brrr demo` share this one rule.

Note on the rule. A value within eager's tolerance of eager's passes. One outside it
passes only when it is no further from the float64 result than eager is: its worst
error, in units of the dtype's tolerance at each element, is at most twice eager's plus
one. A fused chain that rounds once (low-precision values kept in float32), sums in
another order or calls another (equally accurate) libm is not eager's bits but no worse
than eager; a wrong kernel is off by far more than either.

A bool or integer output computed from floats (a comparison, an argmax) has no units to
count: a value a few ulp from a tie flips it. It passes when it disagrees with the
float64 result in no more elements than eager does. An integer output that float
rounding cannot reach is eager's own in float64, so it must equal eager's exactly.
"""
from __future__ import annotations

import torch

# fused kernels keep intermediates in float32 where eager rounds after every op, so a
# chain drifts by a few units in the last place of the low-precision type
LOW_PRECISION_TOL = {
    torch.float16: dict(atol=1e-2, rtol=1e-2),
    torch.bfloat16: dict(atol=5e-2, rtol=5e-2),
}
# the dtypes a float64 run of the same program can judge, with the tolerance added to
# twice eager's own error (float32's is torch.testing.assert_close's default)
REFERENCE_TOL = {**LOW_PRECISION_TOL, torch.float32: dict(atol=1e-5, rtol=1.3e-6),
                 torch.float64: dict(atol=1e-5, rtol=1.3e-6)}


def _discrete(t: torch.Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex())


def within_eager_error(a: torch.Tensor, e: torch.Tensor, r: torch.Tensor | None,
                       tol: dict | None = None) -> bool:
    """`a` is as close to the float64 reference `r` as eager's `e` is (the module note);
    `tol`: the units errors are counted in (default: REFERENCE_TOL of e's dtype)."""
    if r is not None and _discrete(e) and r.dtype == e.dtype and r.shape == e.shape:
        return int((a != r).sum()) <= int((e != r).sum())
    tol = tol or REFERENCE_TOL.get(e.dtype)
    if r is None or tol is None or e.dtype not in REFERENCE_TOL:
        return False
    a, e, r = (t.detach().to(torch.float64) for t in (a, e, r))
    unit = tol["atol"] + tol["rtol"] * r.abs()
    both_nan = a.isnan() & (e.isnan() | r.isnan())
    same = (a == e) | both_nan
    err_a = torch.where(same, 0.0, (a - r).abs() / unit)
    err_e = torch.where(e.isnan() | r.isnan(), 0.0, (e - r).abs() / unit)
    if not bool(torch.isfinite(err_a).all()) or a.numel() == 0:
        return a.numel() == 0
    return bool(err_a.max() <= 2 * err_e.max() + 1)


def matches(a: torch.Tensor, e: torch.Tensor, r: torch.Tensor | None) -> bool:
    """The whole rule for one tensor: same dtype and shape, and within eager's tolerance
    of eager (NaN where eager has NaN), or within eager's error of the float64 `r`."""
    if a.dtype != e.dtype or a.shape != e.shape:
        return False
    try:
        torch.testing.assert_close(a.detach(), e.detach(), equal_nan=True,
                                   **LOW_PRECISION_TOL.get(e.dtype, {}))
        return True
    except AssertionError:
        return within_eager_error(a, e, r)
