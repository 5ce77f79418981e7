"""Index maps: which element of an input a consumer reads, as sympy expressions.

An index is a tuple of sympy expressions, one per dim of a value's shape. Pointwise ops
map their index to each input by broadcasting; affine views (permute, expand, slice,
select, unit-dim reshapes) map it by their own rule; a buffer turns an index into a
flat offset through its strides.
"""
from __future__ import annotations

import functools

import sympy
import torch

from brrr_compiler.symbolic import clamp, shape, strides, to_sympy  # noqa: F401 (re-exported)

aten = torch.ops.aten


def broadcast(idx: tuple, in_shape: tuple) -> tuple:
    """The index into an input of shape `in_shape` broadcast to the index's shape."""
    lead = len(idx) - len(in_shape)
    return tuple(sympy.Integer(0) if s == 1 else idx[lead + j] for j, s in enumerate(in_shape))


def offset(idx: tuple, strides_: tuple) -> sympy.Expr:
    return _offset(tuple(idx), tuple(strides_))


@functools.lru_cache(maxsize=1 << 14)
def _offset(idx: tuple, strides_: tuple) -> sympy.Expr:
    """The flat offset, built once per (index, strides): a buffer is read at the same
    index in every candidate group the cost policy lowers."""
    return sympy.Add(*[i * s for i, s in zip(idx, strides_)]) if idx else sympy.Integer(0)


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def view_index(node, idx: tuple, in_shape: tuple, out_shape: tuple) -> tuple:
    """The input index that `node` (an affine view) reads for output index `idx`."""
    t, args = node.target, node.args
    if t in (aten.alias.default, aten.detach.default):
        return idx
    if t is aten.permute.default:
        res = [None] * len(idx)
        for d, src in enumerate(args[1]):
            res[_dim(src, len(idx))] = idx[d]
        return tuple(res)
    if t is aten.t.default:
        return tuple(reversed(idx))
    if t is aten.transpose.int:
        if not idx:         # a 0-d tensor's transpose(0, -1) (its .mT, .T) is itself
            return idx
        d0, d1 = _dim(args[1], len(idx)), _dim(args[2], len(idx))
        res = list(idx)
        res[d0], res[d1] = idx[d1], idx[d0]
        return tuple(res)
    if t is aten.expand.default:
        return broadcast(idx, in_shape)
    if t is aten.slice.Tensor:
        return _slice_index(node, idx, in_shape)
    if t is aten.select.int:
        d = _dim(args[1], len(in_shape))
        i = to_sympy(args[2])
        if i.is_number and i < 0:
            i = i + in_shape[d]
        return idx[:d] + (i,) + idx[d:]
    return unit_reshape_index(idx, in_shape, out_shape)


def _slice_index(node, idx, in_shape):
    args = list(node.args) + [None] * (5 - len(node.args))
    d = _dim(args[1] or 0, len(in_shape))
    start = to_sympy(args[2] if args[2] is not None else 0)
    step = to_sympy(args[4] if args[4] is not None else 1)
    size = in_shape[d]
    if start.is_number and start < 0:
        start = start + size
    start = clamp(start, 0, size)
    res = list(idx)
    res[d] = start + step * idx[d]
    return tuple(res)


def unit_reshape_index(idx: tuple, in_shape: tuple, out_shape: tuple) -> tuple:
    """Index map of view/reshape/squeeze/unsqueeze that only add or drop size-1 dims."""
    kept = [i for i, s in zip(idx, out_shape) if s != 1]
    it = iter(kept)
    return tuple(sympy.Integer(0) if s == 1 else next(it) for s in in_shape)
