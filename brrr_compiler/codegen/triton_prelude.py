"""The head of every generated Triton module: imports and the @triton.jit helpers kernels call.

The combine functions (_brrr_sum, _brrr_max, ...) are this module's own rather than
tl.sum/tl.max, so that kernels also run in a process that set TRITON_INTERPRET=1 after
importing Triton (see triton_reduce.fold). `libdevice` is CUDA's, or under the interpreter
the scalar-op table's torch references (runtime/triton_libdevice.py).
"""

PRELUDE = '''\
# brrr: Triton kernels for one compiled graph (generated; edits are overwritten)
import triton
import triton.language as tl

from brrr_compiler.runtime.triton_libdevice import current as _current_libdevice

libdevice = _current_libdevice()


@triton.jit
def _brrr_sum(a, b):
    return a + b


@triton.jit
def _brrr_prod(a, b):
    return a * b


@triton.jit
def _brrr_max(a, b):
    return tl.maximum(a, b)


@triton.jit
def _brrr_min(a, b):
    return tl.minimum(a, b)


@triton.jit
def _brrr_argmax(a, ai, b, bi):
    # torch: the first NaN wins, else the first maximum
    a_nan = a != a
    b_nan = b != b
    pick = (a > b) | (a_nan & (b == b)) | (((a == b) | (a_nan & b_nan)) & (ai < bi))
    return tl.where(pick, a, b), tl.where(pick, ai, bi)


@triton.jit
def _brrr_argmin(a, ai, b, bi):
    a_nan = a != a
    b_nan = b != b
    pick = (a < b) | (a_nan & (b == b)) | (((a == b) | (a_nan & b_nan)) & (ai < bi))
    return tl.where(pick, a, b), tl.where(pick, ai, bi)


@triton.jit
def _brrr_round_bf16(x):
    # float32 -> the nearest bfloat16 (ties to even), still float32; NaN stays NaN
    u = x.to(tl.uint32, bitcast=True)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return tl.where(x != x, x, r.to(tl.float32, bitcast=True))


@triton.jit
def _brrr_floordiv(a, b):
    # ATen's div_floor_floating: floor of the exact quotient, sign of zero kept
    mod = a % b
    div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)
    res = tl.where(div == 0, libdevice.copysign(div * 0.0, a / b), fl)
    return tl.where(b == 0, a / b, res)


@triton.jit
def _brrr_floordiv_int(a, b):
    q = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), q - 1, q)


@triton.jit
def _brrr_remainder(a, b):
    mod = a % b
    return tl.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)
'''
