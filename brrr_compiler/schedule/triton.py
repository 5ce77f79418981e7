"""How a Triton kernel tiles its domain: block sizes, num_warps, index width.

Note on the rule. It is a pure function of the kernel's shape and the GPU's SM count:

- Pointwise, 1-D (the default): the outer domain is flattened and each program takes
  XBLOCK consecutive points. XBLOCK is as large as 1024 while the grid keeps at least two
  programs per SM, never below 128 (nor above the domain rounded up to a power of two);
  num_warps = XBLOCK / 256, clamped to [1, 4]: 8 to 32 elements per thread.
- Pointwise, 2-D: when an access walks memory along an outer variable while the output
  walks the innermost one (a transpose), programs take YBLOCK x XBLOCK = 32 x 32 tiles
  (x = innermost variable, y = the others flattened) so that both sides read whole lines.
  Only for static sizes.
- Reductions: programs take XBLOCK rows x RBLOCK reduced points.
  * persistent when the (static) reduced extent rounded up to a power of two is at most
    PERSISTENT_MAX: RBLOCK covers the whole row, each loop phase is straight-line code and
    values never round-trip through memory. XBLOCK packs rows up to 1024 elements per
    program, halved while the grid has fewer than two programs per SM.
  * looped otherwise (or when the reduced extent is symbolic): each loop phase is a
    for-loop over RBLOCK-wide chunks (RBLOCK = 1024, 2048 from 64K elements) carrying
    [XBLOCK, RBLOCK] accumulators, XBLOCK = 1.
  * a reduction over a strided dim whose innermost kept dim is contiguous (a column sum)
    takes XBLOCK = 64 adjacent columns and RBLOCK <= 16 rows per step, so loads stay
    coalesced along the columns.
  num_warps = XBLOCK * RBLOCK / 256 clamped to [2, 8].
- Indexing is int32 unless some index can reach 2**31 (sizes are known) or a size is
  symbolic; then program offsets and aranges are int64 and so is every index.

The SM count is the live GPU's (runtime/triton_launch.py asks CUDA); without one (the
interpreter, text tests) the H100/H200 preset of cost/device.py stands in.
"""
from __future__ import annotations

import sympy

from brrr_compiler.cost.device import PRESETS
from brrr_compiler.kernel_ir import Kernel
from brrr_compiler.schedule_ir import TritonSchedule as Schedule
from brrr_compiler.transforms.loops import linear_coeff, reduces_outer_dim

DEFAULT_SM_COUNT = PRESETS["h100"].threads      # SMs (132; an A100 has 108)
PERSISTENT_MAX = 4096           # widest row a persistent reduction holds in one block
INT32_LIMIT = 2**31 - 1
_BLOCK_SLACK = 1 << 16          # masked lanes past the end of a domain still compute offsets


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _static(e) -> int | None:
    e = sympy.sympify(e)
    return int(e) if e.is_number else None


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def choose_triton(k: Kernel, sm_count: int = DEFAULT_SM_COUNT) -> Schedule:
    """How the Triton printer tiles `k` on a GPU of `sm_count` SMs (the module note)."""
    int64 = needs_int64(k)
    if k.is_reduction:
        return _reduction(k, sm_count, int64)
    if _wants_2d(k):
        return _pointwise_2d(k, int64)
    numel = _static(k.numel())
    if numel is None:
        return Schedule("pointwise", 1024, num_warps=4, int64=int64)
    xblock = _clamp(next_pow2(-(-numel // (2 * sm_count))), 128, 1024)
    xblock = min(xblock, max(16, next_pow2(numel)))
    return Schedule("pointwise", xblock, num_warps=_clamp(xblock // 256, 1, 4), int64=int64)


def _pointwise_2d(k: Kernel, int64: bool) -> Schedule:
    inner = _static(k.ranges[-1])
    outer = _static(sympy.Mul(*k.ranges[:-1]))
    xblock, yblock = min(32, next_pow2(inner)), min(32, next_pow2(outer))
    warps = 4 if xblock * yblock >= 1024 else 2
    return Schedule("pointwise2d", xblock, yblock=yblock, num_warps=warps, int64=int64)


def _wants_2d(k: Kernel) -> bool:
    """A transpose: some access is contiguous along an outer variable, the output along
    the innermost one (sizes static)."""
    if len(k.loop_vars) < 2 or any(_static(r) is None for r in k.ranges):
        return False
    inner, outer = k.loop_vars[-1], k.loop_vars[:-1]
    for s in k.accesses():
        if s.op != "load":
            continue
        coeffs = [linear_coeff(s.index, v, k.all_vars()) for v in outer]
        ci = linear_coeff(s.index, inner, k.all_vars())
        if any(c == 1 for c in coeffs) and ci not in (0, 1):
            return True
    return False


def _warps(elements: int) -> int:
    return _clamp(elements // 256, 2, 8)


def _reduction(k: Kernel, sm_count: int, int64: bool) -> Schedule:
    rnumel = _static(sympy.Mul(*k.reduction_ranges))
    xnumel = _static(k.numel())
    if reduces_outer_dim(k, arg_folds=False):
        xblock = min(64, next_pow2(xnumel)) if xnumel is not None else 64
        rblock = min(16, next_pow2(rnumel)) if rnumel is not None else 16
        kind = "persistent" if rnumel is not None and rnumel <= rblock else "looped"
        return Schedule(kind, xblock, rblock=rblock, num_warps=_warps(xblock * rblock), int64=int64,
                        columns=True)
    if rnumel is not None and next_pow2(rnumel) <= PERSISTENT_MAX:
        rblock = next_pow2(rnumel)
        xblock = max(1, 1024 // rblock)
        if xnumel is not None:
            xblock = min(xblock, next_pow2(xnumel))
            while xblock > 1 and -(-xnumel // xblock) < 2 * sm_count:
                xblock //= 2
        return Schedule("persistent", xblock, rblock=rblock, num_warps=_warps(xblock * rblock),
                        int64=int64)
    rblock = 2048 if rnumel is not None and rnumel >= 65536 else 1024
    return Schedule("looped", 1, rblock=rblock, num_warps=_warps(rblock), int64=int64)


def needs_int64(k: Kernel) -> bool:
    """True when an offset or index of `k` may not fit in int32 (or sizes are symbolic)."""
    extents = list(k.ranges) + list(k.reduction_ranges)
    if any(_static(e) is None for e in extents):
        return True
    numel = 1
    for e in extents:
        numel *= max(_static(e), 1)
    if numel + _BLOCK_SLACK > INT32_LIMIT:
        return True
    top = {v: _static(r) - 1 for v, r in zip(k.all_vars(), extents)}
    for s in k.accesses():
        bound = _bound(s.index, top)
        if bound is None or bound + _BLOCK_SLACK > INT32_LIMIT:
            return True
    return False


def _bound(expr, top: dict) -> int | None:
    """An upper bound of |expr| over the domain (each variable in [0, top[v]]); None if
    the expression holds anything but integers and loop variables."""
    total = 0
    for term in sympy.Add.make_args(sympy.expand(expr)):
        value = term.xreplace({v: sympy.Integer(max(t, 0)) for v, t in top.items()})
        if not value.is_number:
            return None
        total += abs(int(value))
    return total
