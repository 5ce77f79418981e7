"""Writes into a slice of a tensor, as cats: pointwise, so they fuse.

slice_backward and select_backward (the gradients of a slice and a select: zeros around
them), slice_scatter and select_scatter (what functionalization makes of an in-place op
on a slice or a select, `x[:, 0] = v`, `x[..., :k].add_(1)`) are, along their dim, the base's leading part, the
written values and the base's trailing part. As a cat of those three, each output element
is read once from wherever it comes from (lower/index_rules.py's cat), and the kernel that
computes the written values, or the one that reads the result, fuses with it. ATen's ops
are a full copy of the base and a strided copy over it: two passes, and a kernel boundary
on each side (a generated pattern with two such in-place updates at the L1 size ran
1.6x slower than eager). A slice_scatter with a step is a pointwise op of its own
(ops.py, lower/index_rules.py), and a strided slice's gradient a scatter into zeros.
Only the written dim's size must be static (cat's inputs need static extents along it);
otherwise ATen's ops stay.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def slice_bounds(size: int, start, end) -> tuple[int, int]:
    """Python slice bounds [start, end) of a dim of `size`, as slice does: None is the
    dim's end, a negative bound counts from the end, both clamp into [0, size]."""
    start = 0 if start is None else start
    end = size if end is None else end
    start = min(max(start + size if start < 0 else start, 0), size)
    end = min(max(end + size if end < 0 else end, start), size)
    return start, end


def _static(*values) -> bool:
    return all(isinstance(v, int) for v in values)


def _between(base_shape, like, dim: int, start: int, end: int, middle):
    """cat(base[start-part], middle, base[end-part]) along dim; `like` gives the base's
    slices (a tensor) or zeros (None: slice_backward's)."""
    def piece(lo, hi):
        if like is not None:
            return aten.slice.Tensor(like, dim, lo, hi)
        shape = [hi - lo if d == dim else s for d, s in enumerate(base_shape)]
        return aten.full.default(shape, 0, dtype=middle.dtype, device=middle.device)

    size = base_shape[dim]
    parts = ([piece(0, start)] if start > 0 else []) + [middle] + \
        ([piece(end, size)] if end < size else [])
    return aten.cat.default(parts, dim) if len(parts) > 1 else aten.clone.default(middle)


def slice_backward(grad, input_sizes, dim, start, end, step):
    """The gradient of a slice: a cat of the gradient between zeros (step 1), which fuses
    with the add that usually sums several such gradients (rotary's two halves); with a
    step, the gradient scattered into zeros (ops.py's strided slice_scatter)."""
    dim = dim % len(input_sizes)
    if not _static(input_sizes[dim], start, end, step):
        return NotImplemented
    if step != 1:
        zeros = aten.full.default(list(input_sizes), 0, dtype=grad.dtype, device=grad.device)
        return aten.slice_scatter.default(zeros, grad, dim, start, end, step)
    start, _ = slice_bounds(input_sizes[dim], start, end)
    return _between(list(input_sizes), None, dim, start, start + grad.shape[dim], grad)


def select_backward(grad, input_sizes, dim, index):
    """The gradient of a select: the gradient unsqueezed between zeros."""
    if not input_sizes:
        return NotImplemented
    dim = dim % len(input_sizes)
    if not _static(input_sizes[dim], index):
        return NotImplemented
    index = index + input_sizes[dim] if index < 0 else index
    middle = aten.unsqueeze.default(grad, dim)
    return _between(list(input_sizes), None, dim, index, index + 1, middle)


def slice_scatter(base, src, dim=0, start=None, end=None, step=1):
    """base with src written over base[start:end] along dim (step 1), src cast to base's
    dtype as eager's copy into the slice does. The other dims may be symbolic; a slice
    over the whole of a symbolic dim (functionalization's x[:] around a write into
    another dim) is src itself."""
    if step != 1 or base.dim() == 0 or not all(v is None or isinstance(v, int) for v in (start, end)):
        return NotImplemented
    dim = dim % base.dim()
    if _empty(base):
        return NotImplemented
    if not _static(base.shape[dim]):
        whole = start in (None, 0) and (end is None or end >= 2**62)
        return aten.clone.default(_cast(src, base.dtype)) if whole else NotImplemented
    start, end = slice_bounds(base.shape[dim], start, end)
    if src.shape[dim] != end - start:
        return NotImplemented
    return _between(list(base.shape), base, dim, start, end, _cast(src, base.dtype))


def select_scatter(base, src, dim, index):
    """base with src written over base.select(dim, index) (the other dims may be symbolic)."""
    if base.dim() == 0 or _empty(base):
        return NotImplemented
    dim = dim % base.dim()
    size = base.shape[dim]
    if not _static(size, index):
        return NotImplemented
    index = index + size if index < 0 else index
    if not 0 <= index < size:
        return NotImplemented          # ATen's error
    middle = aten.unsqueeze.default(_cast(src, base.dtype), dim)
    return _between(list(base.shape), base, dim, index, index + 1, middle)


def _empty(x) -> bool:
    """A static zero among x's sizes (a symbolic one is at least 2 to Dynamo)."""
    return any(isinstance(n, int) and n == 0 for n in x.shape)


def _cast(x, dtype):
    return x if x.dtype == dtype else aten._to_copy.default(x, dtype=dtype)


def table() -> dict:
    return {aten.slice_backward.default: slice_backward,
            aten.select_backward.default: select_backward,
            aten.slice_scatter.default: slice_scatter,
            aten.select_scatter.default: select_scatter}
