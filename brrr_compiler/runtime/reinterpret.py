"""Views the runner computes as one reinterpretation of a root tensor instead of ATen calls.

A view node left to ATen (a `t` before a matmul, a `view` between two kernels) costs a
dispatcher trip, 2-3 us, and chains of them (`t(t(mm))`, `view(view(addmm))`) pay it
once per link. With static sizes a view's size, stride and storage offset are known from
its FakeTensor, so the runner can build it straight from the first non-view tensor up
its chain (the root) with `_reinterpret_tensor` (what inductor's `reinterpret_tensor`
is, under 1 us), and the links in between are never built.

Only views whose FakeTensor shares storage with the root's qualify (a `reshape` that had
to copy does not), and only with integer sizes, strides and offsets on both.
"""
from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from brrr_compiler import ops
from brrr_compiler.symbolic import is_static

try:
    from torch._C._dynamo.guards import _reinterpret_tensor
except ImportError:  # pragma: no cover - older torch: views stay ATen calls
    _reinterpret_tensor = None


def reinterpret(tensor, size, stride, offset):
    """`tensor`'s storage seen with `size` and `stride`, `offset` elements further on."""
    return _reinterpret_tensor(tensor, size, stride, offset)


reinterpret.__module__ = "brrr"     # the runner's code reads brrr_reinterpret(...)


def strided_val(node):
    """A node's FakeTensor value when it is a plain strided, unquantized tensor, else None."""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    plain = isinstance(val, torch.Tensor) and val.layout == torch.strided and not val.is_quantized
    return val if plain else None


def _is_view(node) -> bool:
    return (isinstance(node, torch.fx.Node) and node.op == "call_function"
            and ops.kind_of(node) is ops.Kind.VIEW and strided_val(node) is not None)


def storage_key(val):
    """What identifies `val`'s storage (equal for views of one tensor), or None where a
    FakeTensor has none to compare."""
    try:
        return StorageWeakRef(val.untyped_storage())
    except (NotImplementedError, RuntimeError, AttributeError):
        return None


def _same_storage(a, b) -> bool:
    key = storage_key(a)
    return key is not None and key == storage_key(b)


def as_reinterpret(node, through=lambda n: True) -> tuple | None:
    """(root node, size, stride, storage offset from the root's) for a static view node
    whose chain of views starts at `root`, or None if it must stay an ATen call. The
    chain is followed up through the views `through` accepts (the runner's own ATen
    calls, not a kernel's stored outputs)."""
    if _reinterpret_tensor is None or not _is_view(node) or not is_static(strided_val(node)):
        return None
    val, root = strided_val(node), node.args[0]
    while _is_view(root) and is_static(strided_val(root)) and through(root):
        root = root.args[0]
    base = strided_val(root)
    if base is None or not is_static(base) or base.dtype != val.dtype \
            or not _same_storage(base, val):
        return None
    return root, list(val.shape), list(val.stride()), val.storage_offset() - base.storage_offset()
