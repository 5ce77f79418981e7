"""The strides eager's TensorIterator gives a pointwise op's output, in Python.

Note on the rule (aten/src/ATen/TensorIterator.cpp, for an output it allocates):
1. On the CPU, an input whose dtype is not the op's common dtype is first copied to it, a
   copy that keeps the input's strides if it is dense and else gets dense strides in the
   input's order (`infer_dense_strides`, the one-tensor case of step 3).
2. If every operand has the output's shape (no 0-dim operand among others) and they are
   all contiguous, all channels-last (4-d), or all dense with one set of strides, the
   output takes that layout (contiguous and channels-last strides are the standard ones: a
   size-1 dim's stride is not the input's).
3. Otherwise the dims are insertion-sorted, fastest first, by comparing two dims'
   strides in each operand in turn: a broadcast (zero) stride asks the next operand,
   equal strides do too unless the first dim is the longer one; the output is dense in
   that order (contiguous when the order is the identity).
FakeTensor's Python references compute strides their own way (and upcast
float16/bfloat16 inputs first), so their strides can differ in size-1 dims and, through
a later op's comparisons, in real ones too.
"""
from __future__ import annotations

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

Layout = tuple  # (shape, strides), both tuples of ints

aten = torch.ops.aten

# pointwise ops whose eager kernels are not one TensorIterator over their arguments in
# schema order (a copy keeping its input's strides; a Scalar base or dividend wrapped as
# the first operand of another op; masked_fill, a copy of self written through the mask)
NOT_TENSOR_ITERATOR = {aten.clone.default, torch.ops.prims.convert_element_type.default,
                       aten.pow.Scalar, aten.rsub.Scalar, aten.masked_fill.Scalar,
                       aten.masked_fill.Tensor}


def operands(target, args: tuple, kwargs: dict) -> tuple[list, list] | None:
    """TensorIterator's inputs for a call of `target` (FakeTensors, or numbers, which eager
    wraps as 0-dim tensors), in its order, and whether each joins the type promotion; None
    for an op that is not a TensorIterator pointwise op."""
    if target in NOT_TENSOR_ITERATOR or torch.Tag.pointwise not in target.tags:
        return None
    values, promoted = [], []
    for i, a in enumerate(target._schema.arguments):
        v = args[i] if i < len(args) else kwargs.get(a.name, a.default_value)
        tensor_slot = "Tensor" in str(a.type) and "[]" not in str(a.type)
        if (tensor_slot and v is not None) or (a.name == "other" and isinstance(v, (int, float))):
            values.append(v)
            promoted.append(not (target is aten.where.self and a.name == "condition"))
    return values, promoted


def output_strides(operands: list, device: torch.device, promoted: list) -> tuple:
    """The output strides for `operands` (tensors, or Python numbers, which eager wraps
    as 0-dim tensors), in TensorIterator's order; `promoted`: per operand, whether the op
    promotes it to the common dtype."""
    common = _common_if_mixed([o for o, p in zip(operands, promoted) if p])
    layouts = []
    for o, p in zip(operands, promoted):
        if not isinstance(o, torch.Tensor):
            layouts.append(((), ()))
            continue
        shape, stride = tuple(o.shape), tuple(o.stride())
        if p and device.type == "cpu" and common not in (None, o.dtype) \
                and not is_dense(shape, stride):
            stride = dense_strides(shape, stride)
        layouts.append((shape, stride))
    shape = _broadcast_shape([s for s, _ in layouts])
    same = all(s == shape for s, _ in layouts) and not (
        any(s == () for s, _ in layouts) and any(s != () for s, _ in layouts))
    fast = _fast_setup(layouts, shape) if same else None
    return fast if fast is not None else _sorted_strides(layouts, shape)


def _common_if_mixed(values: list) -> torch.dtype | None:
    """The dtype the inputs are promoted to; None when it is every tensor's own (one
    dtype, and a number never lifts a floating tensor)."""
    dtypes = {v.dtype for v in values if isinstance(v, torch.Tensor)}
    if len(dtypes) == 1:
        (dtype,) = dtypes
        if dtype.is_floating_point or dtype is not torch.bool and all(
                isinstance(v, torch.Tensor) or type(v) is int for v in values):
            return None
    return elementwise_dtypes(*values,
                              type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[1]


def _broadcast_shape(shapes: list) -> tuple:
    """The broadcast of shapes the op accepted (so each dim is 1 or the result's)."""
    out = [1] * max(map(len, shapes), default=0)
    for s in shapes:
        for i, n in enumerate(s, len(out) - len(s)):
            if n != 1:
                out[i] = n
    return tuple(out)


def contiguous_strides(shape: tuple) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def dense_strides(shape: tuple, stride: tuple) -> tuple:
    """Dense strides in the order of `stride` (c10's infer_dense_strides)."""
    return _dense_in_order(shape, _order([(shape, stride)], shape))


def _fast_setup(layouts: list, shape: tuple) -> tuple | None:
    if all(_contiguous(s, st) for s, st in layouts):
        return contiguous_strides(shape)
    if len(shape) == 4 and all(_channels_last(s, st) for s, st in layouts):
        return _channels_last_strides(shape)
    strides = {st for _, st in layouts}
    if len(strides) == 1 and all(is_dense(s, st) for s, st in layouts):
        return strides.pop()
    return None


def _sorted_strides(layouts: list, shape: tuple) -> tuple:
    ndim = len(shape)
    if ndim <= 1:
        return contiguous_strides(shape)
    broadcast = []
    for s, st in layouts:           # a stretched or missing dim has stride 0
        pad = ndim - len(s)
        broadcast.append(tuple([0] * pad + [0 if n == 1 and shape[pad + i] != 1 else x
                                            for i, (n, x) in enumerate(zip(s, st))]))
    perm = _order([(shape, b) for b in broadcast], shape)
    if perm == list(reversed(range(ndim))):
        return contiguous_strides(shape)
    return _dense_in_order(shape, perm)


def _order(layouts: list, shape: tuple) -> list:
    """Dims fastest first: TensorIterator's insertion sort with ambiguous comparisons."""
    ndim = len(shape)

    def should_swap(d0: int, d1: int) -> int:
        for _, st in layouts:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(reversed(range(ndim)))
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def _dense_in_order(shape: tuple, perm: list) -> tuple:
    strides, step = [0] * len(shape), 1
    for d in perm:
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def _contiguous(shape: tuple, stride: tuple) -> bool:
    if 0 in shape:
        return True
    return all(n == 1 or x == y for n, x, y in zip(shape, stride, contiguous_strides(shape)))


def _channels_last(shape: tuple, stride: tuple) -> bool:
    """4-d channels-last (TensorIterator asks ChannelsLast only, never ChannelsLast3d)."""
    expected = 1
    for d in (1, 3, 2, 0):
        if shape[d] != 1:
            if stride[d] != expected:
                return False
            expected *= shape[d]
    return True


def _channels_last_strides(shape: tuple) -> tuple:
    strides, step = [0] * len(shape), 1
    for d in (1, 3, 2, 0):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def is_dense(shape: tuple, stride: tuple) -> bool:
    """Non-overlapping and dense (c10's rule: size-0/1 dims sorted last, ignored)."""
    if len(shape) == 1:
        return shape[0] < 2 or stride[0] == 1
    dims = sorted(range(len(shape)), key=lambda d: (shape[d] < 2, stride[d]))
    expected = 1
    for d in dims:
        if shape[d] < 2:
            return True
        if stride[d] != expected:
            return False
        expected *= shape[d]
    return True
