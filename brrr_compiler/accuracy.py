"""Is a compiled result right? Eager is the oracle, and a float64 run of the same program
judges the cases where brrr's rounding differs from eager's: the tests' comparisons
(tests/helpers.py), the fuzzer, the model suite and `brrr demo` share this one rule.

Note on the rule. A value within eager's tolerance of eager's passes. One outside it
passes only when it is no further from the float64 result than eager is: its worst
error, in units of the dtype's tolerance at each element, is at most twice eager's plus
one. A fused chain that rounds once (low-precision values kept in float32), sums in
another order or calls another (equally accurate) libm is not eager's bits but no worse
than eager; a wrong kernel is off by far more than either.

Eager's own error can be luck. Where a result is ill-conditioned, one rounding of an
intermediate moves it by many units, and eager may happen to round the way that lands
close. So the tests and the fuzzer also run the program (and its gradients) with each op
correctly rounded (`rounded_each_op`): a float evaluation no float32 kernel can beat op
by op; and twice more with each op rounded up or down at random (`jitter`), as other
float evaluations may round. The allowance is twice the largest of their errors and
eager's. Fuzz seed 190637: sum(cos(v11 * v8) * v11 * g) over 128 terms, v11 * v8 up
to 548 (an ulp 6e-5 there), as a gradient; eager erred 1.3e-5, brrr 9.6e-5 from a v8
closer to exact, and the correctly rounded program 9.7e-5. Fuzz seed 192577: a
gradient that is 0 exactly (a constant added across a normalized dim), computed as a
sum of terms that cancel: eager 2.3e-6, brrr 2.5e-5, the correctly rounded program
6.0e-6, randomly rounded ones 5.7e-6 to 1.3e-5.

A float64 result computed through bfloat16 carries bfloat16's rounding. Where eager's
own error exceeds one unit of the output's dtype (so the value went through something
coarser), the rule is tried again in the units of the program's least precise input
(`coarsest_tol`). Fuzz seed 45845: a float64 gradient through a bfloat16 std, eager off
by 81 float64 units and brrr by 178, both a hundredth of a bfloat16 unit.

A bool or integer output computed from floats (a comparison, an argmax) has no units to
count: a value a few ulp from a tie flips it. It passes when it disagrees with the
float64 result in no more elements than eager does, or disagrees in no more elements
than that with the program run with each op correctly rounded (`rounded_each_op`).
The second oracle is for ties: in float16, a softmax value that brrr rounds correctly
and eager rounds up an ulp made two entries of a row equal, and argmax took the first
of them, where the float64 program (and, by its lucky rounding, eager) took the second.
An integer output that float rounding cannot reach is eager's own in float64, so it
must equal eager's exactly. The tests and the fuzzer run that second oracle
(tests/helpers.py); `matches`, for the demo's and the model suite's float outputs, does
not, so a discrete output there is judged by the float64 result alone.

A zero's sign is the one thing eager leaves to the order it evaluates in. min and max
(and clamp, relu, sort, ...) over equal zeros of both signs return whichever their loop
met first or last, and eager's own vector body and scalar tail disagree (`amin` over dim
0 of a (3, 1000) tensor: -0 in the last 8 columns, +0 in the others). An op that reads
the sign (atan2(0, -0) is pi, 1 / -0 is -inf) turns that into a large difference: the
generated pattern seed 5 at the last-level cache size, atan2(softmax, amin), differed
by pi where brrr's amin met its zeros in another order. So the tests and the fuzzer run
a third oracle on a float output that missed: the float64 program with every such op's
zero results made +0, and again made -0 (`zero_sign_variants`); an element may match
any of the three. Only the sign of a zero is free: an element that is off otherwise is
off against all three.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

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


def coarsest_tol(dtypes) -> dict | None:
    """The REFERENCE_TOL of the least precise of `dtypes` (None: none is judged)."""
    tols = [REFERENCE_TOL[d] for d in dtypes if d in REFERENCE_TOL]
    return max(tols, key=lambda t: t["rtol"], default=None)


def _discrete(t: torch.Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex())


def _fits(t: torch.Tensor, oracle) -> bool:
    return isinstance(oracle, torch.Tensor) and oracle.shape == t.shape


def _misses(t: torch.Tensor, oracle: torch.Tensor | None, alts=()) -> int | None:
    """How many elements of a discrete `t` disagree with `oracle` and with each of `alts`
    (None: no oracle)."""
    if oracle is None or oracle.dtype != t.dtype or oracle.shape != t.shape:
        return None
    missed = t != oracle
    for alt in alts:
        if _fits(t, alt) and alt.dtype == t.dtype:
            missed &= t != alt
    return int(missed.sum())


def within_eager_error(a: torch.Tensor, e: torch.Tensor, r: torch.Tensor | None,
                       tol: dict | None = None, rounded: torch.Tensor | None = None,
                       coarse: dict | None = None, alts=(), fair=()) -> bool:
    """`a` is as close to the float64 reference `r` as eager's `e` is (the module note);
    `alts`: `r` with zeros signed otherwise (`zero_sign_variants`), each element of `a`
    judged against the closest of `r` and these;
    `tol`: the units errors are counted in (default: REFERENCE_TOL of e's dtype);
    `rounded`: the output of the program with each op correctly rounded (a float one
    widens the allowance to twice its error where that exceeds eager's); `fair`: more
    float outputs that do the same (the program with each op rounded at random);
    `coarse`: the units of the least precise input (`coarsest_tol`), used where eager's
    own error exceeds one unit of `tol`."""
    if _discrete(e) and (r is not None or rounded is not None):
        eager_misses = _misses(e, r) or 0
        return any(m is not None and m <= eager_misses
                   for m in (_misses(a, r, alts), _misses(a, rounded)))
    tol = tol or REFERENCE_TOL.get(e.dtype)
    if r is None or tol is None or e.dtype not in REFERENCE_TOL:
        return False
    a, e, r = (t.detach().to(torch.float64) for t in (a, e, r))
    if a.numel() == 0:
        return True
    alts = [t.detach().to(torch.float64) for t in alts if _fits(a, t)]
    fair = [t.detach().to(torch.float64) for t in (rounded, *fair)
            if _fits(a, t) and t.is_floating_point()]
    worst_a, worst_e = _worst_errors(a, e, r, tol, alts, fair)
    if worst_a <= 2 * worst_e + 1:
        return True
    if coarse is None or worst_e <= 1:
        return False
    worst_a, worst_e = _worst_errors(a, e, r, coarse, alts, fair)
    return worst_a <= 2 * worst_e + 1


def _errors(a, r, tol: dict) -> torch.Tensor:
    """|a - r| in units of `tol` at each element: 0 where they are equal or both NaN."""
    agree = (a == r) | (a.isnan() & r.isnan())
    return torch.where(agree, 0.0, (a - r).abs() / (tol["atol"] + tol["rtol"] * r.abs()))


def _worst_errors(a, e, r, tol: dict, alts=(), fair=()) -> tuple[float, float]:
    """The largest errors of `a` and of eager's `e` from `r`, in units of `tol` at each
    element (where `a` equals `e`, or is NaN with it or `r`, its error is eager's: 0 for
    `a`); `a`'s error at an element is the least over `r` and `alts`. `fair`: other
    results a float evaluation may give (the correctly rounded program's): eager's error
    is the largest of theirs and its own."""
    same = (a == e) | (a.isnan() & e.isnan())
    err_a = torch.where(same, 0.0, _errors(a, r, tol))
    for alt in alts:
        err_a = torch.fmin(err_a, _errors(a, alt, tol))
    if not bool(torch.isfinite(err_a).all()):
        return float("inf"), 0.0
    return float(err_a.max()), max(_worst(t, r, tol) for t in (e, *fair))


def _worst(t, r, tol: dict) -> float:
    """The largest error of `t` from `r` in units of `tol`, NaNs in either not counted."""
    return float(torch.where(t.isnan() | r.isnan(), 0.0, _errors(t, r, tol)).max())


def matches(a: torch.Tensor, e: torch.Tensor, r: torch.Tensor | None, alts=()) -> bool:
    """The whole rule for one tensor: same dtype and shape, and within eager's tolerance
    of eager (NaN where eager has NaN), or within eager's error of the float64 `r`."""
    if a.dtype != e.dtype or a.shape != e.shape:
        return False
    try:
        torch.testing.assert_close(a.detach(), e.detach(), equal_nan=True,
                                   **LOW_PRECISION_TOL.get(e.dtype, {}))
        return True
    except AssertionError:
        return within_eager_error(a, e, r, alts=alts)


_ROUNDED = (torch.float16, torch.bfloat16, torch.float32)


class _RoundEachOp(TorchDispatchMode):
    """Each functional ATen op computed from float64 copies of its float inputs, its
    results rounded to the dtypes eager gives them. In-place ops, views and random ops
    run as eager (a float64 copy would not alias, or would draw again). `jitter` (a
    generator): each result rounded to its nearest value or a neighbour at random (moved
    by up to half a unit in the last place first), as any float evaluation may round."""

    def __init__(self, jitter: torch.Generator | None = None):
        super().__init__()
        self.jitter = jitter

    def _round(self, h: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if self.jitter is None or dtype not in _ROUNDED:
            return h.to(dtype)
        u = torch.rand(h.shape, generator=self.jitter, dtype=torch.float64) * 2 - 1
        return (h * (1 + u * torch.finfo(dtype).eps / 2)).to(dtype)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func._schema.is_mutable or func.is_view or \
                torch.Tag.nondeterministic_seeded in func.tags:
            return out
        up = lambda t: t.to(torch.float64) \
            if isinstance(t, torch.Tensor) and t.dtype in _ROUNDED else t  # noqa: E731
        try:
            hi = func(*tree_map(up, args), **tree_map(up, kwargs))
        except Exception:  # noqa: BLE001  (no float64 kernel: eager's result stands)
            return out
        flat, spec = tree_flatten(out)
        flat_hi, spec_hi = tree_flatten(hi)
        if spec != spec_hi:
            return out
        return tree_unflatten([self._round(h, o.dtype) if isinstance(o, torch.Tensor) and
                               isinstance(h, torch.Tensor) and h.shape == o.shape else o
                               for o, h in zip(flat, flat_hi)], spec)


def rounded_each_op(fn, *args, grad: bool = False, jitter: int | None = None):
    """fn's outputs with each ATen op it runs correctly rounded (the module note), or
    None where that run fails. `grad`: autograd records, so `fn` may take gradients (the
    backward's ops are rounded too). `jitter`: a seed; each op's result is rounded up or
    down at random instead (the module note)."""
    gen = None if jitter is None else torch.Generator().manual_seed(jitter)
    try:
        with (torch.enable_grad() if grad else torch.no_grad()), _RoundEachOp(gen):
            return fn(*args)
    except Exception:  # noqa: BLE001  (no second oracle; the float64 one still judges)
        return None


# ops whose zero results eager signs by its evaluation order (the module note)
_ORDERED_ZEROS = {"amin", "amax", "min", "max", "minimum", "maximum", "fmin", "fmax",
                  "clamp", "clamp_min", "clamp_max", "relu", "hardtanh", "median",
                  "nanmedian", "kthvalue", "sort", "topk", "cummax", "cummin", "mode"}


class _ZeroSigned(TorchDispatchMode):
    """Each float result of an _ORDERED_ZEROS op with its zeros given one sign (an
    in-place op's in place)."""

    def __init__(self, zero: float):
        super().__init__()
        self.zero = zero

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket.__name__.rstrip("_") not in _ORDERED_ZEROS:
            return out
        in_place = func._schema.is_mutable
        return tree_map(lambda t: self._signed(t, in_place), out)

    def _signed(self, t, in_place: bool):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return t
        zeros = t == 0
        return t.masked_fill_(zeros, self.zero) if in_place else t.masked_fill(zeros, self.zero)


def zero_sign_variants(fn, make_args) -> list:
    """fn's outputs on `make_args()` (fresh arguments for each run) with the zeros of
    order-signed ops made +0, and made -0 (the module note); runs that fail are left
    out."""
    variants = []
    for zero in (0.0, -0.0):
        try:
            with torch.no_grad(), _ZeroSigned(zero):
                variants.append(fn(*make_args()))
        except Exception:  # noqa: BLE001  (no such oracle; the others still judge)
            pass
    return variants
