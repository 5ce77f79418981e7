"""The ATen calls the runner makes through torch's Python bindings instead of OpOverloads.

Calling `torch.ops.aten.mv.default(a, b)` goes through OpOverload.__call__ and the boxed
dispatcher entry; `torch.mv(a, b)`, the generated binding of the same op, parses its
arguments in C++ and costs less per call (benchmarks/results/notes.md, "ATen
calls in the runner"). A model's runner makes dozens of such calls (its GEMMs,
attention, the ops no kernel took), paid on every step.

Only `.default` overloads whose binding takes the same arguments under the same names
are listed; the binding then resolves to that same overload (each op below has no other
overload a tensor-and-number call could select). Anything else stays an OpOverload call.
"""
from __future__ import annotations

import torch

_VF, _NN = torch._C._VariableFunctions, torch._C._nn

# op name: the module holding its binding
_BINDINGS = {
    "mm": _VF, "addmm": _VF, "bmm": _VF, "baddbmm": _VF, "mv": _VF, "addmv": _VF, "dot": _VF,
    "convolution": _VF, "embedding": _VF, "native_layer_norm": _VF,
    "native_batch_norm": _VF, "_softmax": _VF, "_log_softmax": _VF, "amax": _VF,
    "amin": _VF, "cat": _VF, "clone": _VF, "index_select": _VF, "gather": _VF,
    "cumsum": _VF, "constant_pad_nd": _VF, "_adaptive_avg_pool2d": _VF,
    "_scaled_dot_product_flash_attention_for_cpu": _VF,
    "max_pool2d_with_indices": _NN, "avg_pool2d": _NN,
}


def _table() -> dict:
    out = {}
    for name, module in _BINDINGS.items():
        packet, fn = getattr(torch.ops.aten, name, None), getattr(module, name, None)
        if packet is not None and fn is not None and "default" in packet.overloads():
            out[packet.default] = fn
    return out


FAST = _table()


def fast_target(target):
    """The callable the runner uses for an ATen node's `target`."""
    return FAST.get(target, target)
