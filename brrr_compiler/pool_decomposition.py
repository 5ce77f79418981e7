"""max_pool2d_with_indices as pointwise ops over strided views, so it fuses.

Window position (di, dj) of every output point is one strided slice of the input,
x[..., di::sh, dj::sw] cut to the output size: a view, read in place by a kernel. The
window's value and index are a chain of selects over those views in eager's order: a
value replaces the running one when it is greater or NaN (so the first maximum wins,
and NaN wins, the last NaN in the window as in ATen's CPU kernel). An inference graph
that never reads the indices loses them to dead-code elimination; training keeps them
for max_pool2d_with_indices_backward, which stays an ATen call.

Only the plain case is decomposed (no padding, no dilation, no ceil_mode rounding up,
windows of at most 16 positions); the rest stays in ATen.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def _pair(v, default):
    v = default if v is None or (isinstance(v, (list, tuple)) and len(v) == 0) else v
    return (v, v) if isinstance(v, int) else (v[0], v[-1])


def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    kh, kw = _pair(kernel_size, None)
    sh, sw = _pair(stride, (kh, kw))
    if (_pair(padding, 0) != (0, 0) or _pair(dilation, 1) != (1, 1) or kh * kw > 16
            or x.dim() not in (3, 4) or not x.dtype.is_floating_point):
        return NotImplemented
    h, w = x.shape[-2], x.shape[-1]
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    if ceil_mode and ((h - kh) % sh or (w - kw) % sw):
        return NotImplemented
    rows = aten.arange.default(oh, dtype=torch.int64, device=x.device)
    cols = aten.arange.default(ow, dtype=torch.int64, device=x.device)
    base = aten.add.Tensor(aten.unsqueeze.default(rows * (sh * w), -1), cols * sw)  # [oh, ow]
    value = index = None
    for di in range(kh):
        for dj in range(kw):
            win = aten.slice.Tensor(x, -2, di, di + (oh - 1) * sh + 1, sh)
            win = aten.slice.Tensor(win, -1, dj, dj + (ow - 1) * sw + 1, sw)
            at = base + (di * w + dj)
            if value is None:          # broadcast by the first select, no expand node
                value, index = win, at
                continue
            take = aten.logical_or.default(aten.gt.Tensor(win, value), aten.isnan.default(win))
            value = aten.where.self(take, win, value)
            index = aten.where.self(take, at, index)
    if kh * kw == 1:               # a 1x1 window: the values are a view, copy them out
        return aten.clone.default(value), aten.clone.default(aten.expand.default(index, list(value.shape)))
    return value, index
