"""brrr's own decompositions, where torch's are not the fusion-friendly form.

torch decomposes var/var_mean into prims.var, which brrr cannot fuse; here variance is
the two-pass scheme on ATen ops, var = sum((x-mean)^2)/(n-c), with the mean taken about
the row's first element k: mean = k + sum(x-k)/n. Both sums run over the same rows, so
they share one kernel (two loop phases). The shift makes a row of equal values exact:
x-k is 0, so the mean is k and the variance 0, as eager's (Welford) statistics are; a
plain sum(x)/n of n equal values is off by an ulp or so, which a normalization
((x-mean)*rsqrt(var+eps)) or std's gradient (0/0 there) then blows up. The same holds
for the norms' statistics below.
"""
from __future__ import annotations

import torch

from brrr_compiler import batch_norm_decomposition, slice_decomposition
from brrr_compiler.decomposition_layout import eager_layout
from brrr_compiler.pool_decomposition import max_pool2d_with_indices

aten = torch.ops.aten


def _dims(x, dim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(x.dim()))
    return [dim] if isinstance(dim, int) else list(dim)


def _count(x, dims):
    n = 1
    for d in dims:
        n = n * (x.shape[d] if x.dim() else 1)    # a 0-d tensor's dim 0 (or -1) is itself
    return n


def _mean(x, dims, n):
    """The mean of `x` over `dims` (kept), about the first element of each row (module
    note); a plain sum(x)/n where a reduced dim may be empty or its size is symbolic."""
    if x.dim() == 0 or not all(isinstance(x.shape[d], int) and x.shape[d] > 0 for d in dims):
        return aten.sum.dim_IntList(x, dims, True) / n
    first = x
    for d in dims:
        first = aten.slice.Tensor(first, d, 0, 1)
    return first + aten.sum.dim_IntList(x - first, dims, True) / n


def var_mean(x, dim=None, *, correction=None, keepdim=False):
    dims = _dims(x, dim)
    correction = 1 if correction is None else correction
    n = _count(x, dims)
    acc = x if x.dtype.is_floating_point else x.to(torch.get_default_dtype())
    mean = _mean(acc, dims, n)
    centered = acc - mean
    var = aten.sum.dim_IntList(centered * centered, dims, keepdim) / max(n - correction, 0)
    if not keepdim:
        mean = aten.squeeze.dims(mean, dims)
    return var, mean


def var(x, dim=None, *, correction=None, keepdim=False):
    return var_mean(x, dim, correction=correction, keepdim=keepdim)[0]


def std(x, dim=None, *, correction=None, keepdim=False):
    return aten.sqrt(var(x, dim, correction=correction, keepdim=keepdim))


def native_layer_norm(x, normalized_shape, weight, bias, eps):
    """(out, mean, rstd) as eager's native_layer_norm, statistics in op-math dtype."""
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    acc = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    n = _count(x, dims)
    mean = _mean(acc, dims, n)
    centered = acc - mean
    rstd = aten.rsqrt(aten.sum.dim_IntList(centered * centered, dims, True) / n + eps)
    out = centered * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return (out.to(x.dtype), *_stats_dtype(x, mean, rstd))


def _stats_dtype(x, mean, rstd):
    """Eager's CPU norm kernels return half-precision statistics in the input's dtype
    (CUDA's keep float32); the backward then reads them so rounded, as eager's does."""
    if x.device.type == "cpu" and mean.dtype != x.dtype:
        return mean.to(x.dtype), rstd.to(x.dtype)
    return mean, rstd


def native_group_norm(x, weight, bias, N, C, HxW, group, eps):
    """(out, mean, rstd): statistics over [C/G, HxW] of a free view [N, G, C/G, HxW], so
    the whole norm is one kernel over that view; the output is viewed back."""
    acc = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    xv = aten.view.default(acc, [N, group, C // group, HxW])
    n = (C // group) * HxW
    mean = _mean(xv, [2, 3], n)
    centered = xv - mean
    rstd = aten.rsqrt(aten.sum.dim_IntList(centered * centered, [2, 3], True) / n + eps)
    out = centered * rstd
    if weight is not None:
        out = out * aten.view.default(weight, [1, group, C // group, 1])
    if bias is not None:
        out = out + aten.view.default(bias, [1, group, C // group, 1])
    out = aten.view.default(out.to(x.dtype), list(x.shape))
    mean, rstd = _stats_dtype(x, mean, rstd)
    return out, aten.view.default(mean, [N, group]), aten.view.default(rstd, [N, group])


def nll_loss_backward(grad_output, x, target, weight, reduction, ignore_index, total_weight):
    """d(nll)/dx as a pointwise select over a class ramp: fuses with log_softmax's
    backward into one row kernel instead of zeros + scatter through memory."""
    if weight is not None:
        return NotImplemented
    classes = aten.arange.default(x.shape[-1], dtype=target.dtype, device=x.device)
    t = aten.unsqueeze.default(target, -1)
    hit = aten.logical_and.default(aten.eq.Tensor(classes, t), aten.ne.Scalar(t, ignore_index))
    g = grad_output
    if reduction == 1:                       # mean
        g = g / total_weight
    if reduction == 0 and g.dim() > 0:       # none: one gradient per row
        g = aten.unsqueeze.default(g, -1)
    zero = aten.scalar_tensor.default(0, dtype=x.dtype, device=x.device)
    return aten.where.self(hit, aten.neg.default(g).to(x.dtype), zero)


def _extreme_dim(value_op, index_op):
    def decomposition(x, dim, keepdim=False):
        """(values, indices) of max.dim/min.dim as amax/amin and argmax/argmin: both keep
        the first extreme (or the first NaN), as eager's max.dim does, and both fuse into
        one row kernel. (Autograd still uses max.dim's own backward.)"""
        if x.dtype is torch.bool or x.dtype.is_complex:
            return NotImplemented
        return value_op(x, [dim], keepdim), index_op(x, dim, keepdim)
    return decomposition


def _extreme_all(value_op):
    def decomposition(x):
        if x.dtype is torch.bool or x.dtype.is_complex:
            return NotImplemented
        return value_op(x, list(range(x.dim())))
    return decomposition


def _contiguous(op, where: str):
    """torch's decomposition of `op` with a clone to contiguous at `where`: "input" (softmax,
    log_softmax) or "result" (masked_fill). Each clone is always traced, because the value
    may be contiguous to FakeTensor and not to eager: a float16/bfloat16 pointwise result
    is contiguous to FakeTensor until eager_strides gives it eager's strides (transposed,
    say).
    - softmax and log_softmax: torch's decomposition begins with x.contiguous(), which
      records no node in that case, and the softmax then followed the transposed strides
      (fuzz seed 26543).
    - masked_fill: eager's kernel clones self contiguous and fills it, whatever the
      operands' layouts; torch's decomposition is a where, which followed a float16 sum's
      transposed strides (fuzz seed 308521: (1, 1024) where eager's are (13, 1)).
    The clone fuses into the kernel; one of a value eager lays out contiguous anyway is
    removed (passes/remove_noops)."""
    from torch._decomp import decomposition_table

    torch_decomposition = decomposition_table[op]

    def decomposition(x, *args):
        if where == "input":
            x = aten.clone.default(x, memory_format=torch.contiguous_format)
        out = torch_decomposition(x, *args)
        if where == "result":
            out = aten.clone.default(out, memory_format=torch.contiguous_format)
        return out
    return decomposition


def _index_fill(op):
    def decomposition(x, dim, index, value):
        """A where over a mask along `dim`, so the fill fuses with what makes and reads
        x: ATen's index_fill copies all of x and then fills (a 1 MB float64 tensor: 44 us
        of a 200 us generated pattern, seed 15 l2, where Inductor fuses it). The mask is
        the positions along `dim` that a gather of those positions at `index` returns:
        the gather wraps negative indices and raises on one out of range (brrr's bounds
        check: IndexOutOfBounds, an IndexError as eager's). Taken for a real, non-bool
        self of one dim or more and a 0-d or 1-d int64 index (a bool self was left to
        ATen's op rather than checked through the where); otherwise ATen's op, a
        non-dense self cloned first (below)."""
        if x.dim() > 0 and index.dim() <= 1 and index.dtype == torch.int64 and \
                x.dtype != torch.bool and not x.is_complex():
            return _index_fill_where(x, dim, index, value)
        return _index_fill_aten(op, x, dim, index, value)
    return decomposition


def _index_fill_where(x, dim, index, value):
    dim = dim % x.dim()
    n = x.shape[dim]
    positions = aten.arange.default(n, dtype=torch.int64, device=x.device)
    chosen = aten.index.Tensor(positions, [aten.view.default(index, [-1])])
    hit = aten.any.dim(aten.eq.Tensor(aten.unsqueeze.default(positions, 1),
                                      aten.unsqueeze.default(chosen, 0)), 1)
    mask = aten.view.default(hit, [n if d == dim else 1 for d in range(x.dim())])
    fill = aten._to_copy.default(value, dtype=x.dtype) if isinstance(value, torch.Tensor) \
        else aten.scalar_tensor.default(value, dtype=x.dtype, device=x.device)
    return aten.where.self(mask, fill, x)


def _index_fill_aten(op, x, dim, index, value):
    """A non-dense self cloned first (preserve_format): eager's index_fill clones self
    laid out as empty_like(self), keeping a permuted view's stride order, where
    FakeTensor's makes it contiguous. Traced with FakeTensor's strides, torch's lerp
    reference after an `index_fill_` on such a view skipped the copy that gives eager's
    layout (fuzz seed 72400: a permuted step-sliced input). A dense self keeps ATen's
    op. The result's own layout rule is decomposition_layout's _LIKE_SELF."""
    if torch._prims_common.is_non_overlapping_and_dense_or_false(x):
        return NotImplemented
    return op(aten.clone.default(x, memory_format=torch.preserve_format), dim, index, value)


def table() -> dict:
    return {op: eager_layout(op, fn) for op, fn in _decompositions().items()}


def _decompositions() -> dict:
    return {
        aten.var_mean.correction: var_mean,
        aten.var.correction: var,
        aten.std.correction: std,
        aten.native_layer_norm.default: native_layer_norm,
        aten.nll_loss_backward.default: nll_loss_backward,
        aten.native_group_norm.default: native_group_norm,
        aten.max.dim: _extreme_dim(aten.amax.default, aten.argmax.default),
        aten.min.dim: _extreme_dim(aten.amin.default, aten.argmin.default),
        aten.max.default: _extreme_all(aten.amax.default),
        aten.min.default: _extreme_all(aten.amin.default),
        aten.max_pool2d_with_indices.default: max_pool2d_with_indices,
        aten._softmax.default: _contiguous(aten._softmax.default, "input"),
        aten._log_softmax.default: _contiguous(aten._log_softmax.default, "input"),
        aten.masked_fill.Scalar: _contiguous(aten.masked_fill.Scalar, "result"),
        aten.masked_fill.Tensor: _contiguous(aten.masked_fill.Tensor, "result"),
        aten.index_fill.int_Scalar: _index_fill(aten.index_fill.int_Scalar),
        aten.index_fill.int_Tensor: _index_fill(aten.index_fill.int_Tensor),
        **batch_norm_decomposition.table(),
        **slice_decomposition.table(),
    }
