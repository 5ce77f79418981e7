"""`libdevice` for generated Triton modules: CUDA's libdevice, or torch under the interpreter.

Generated kernels call `libdevice.tanh(x)` and friends (their module binds
`libdevice = current()` when it is imported) for the math that triton.language
lacks. Compiled for a GPU that is `triton.language.extra.libdevice`; Triton's interpreter
(TRITON_INTERPRET=1) cannot run extern calls, so there each name is the reference
semantics (a torch function) of the scalar op whose Triton form calls it (scalar_ops.py:
a row's `libdevice`), applied to the interpreter's numpy arrays. The interpreter runs
kernels as plain Python, so a plain function that maps tensor to tensor is all it needs.

A runnable dump of a Triton graph (script.py) carries this module beside the kernels,
with the scalar-op table (scalar_ops.py, which imports only torch) as a module of its own
named by SCALAR_OPS there, so the dump needs torch and triton, not brrr.
"""
from __future__ import annotations

import importlib
import os
import types

SCALAR_OPS = "brrr_compiler.scalar_ops"     # the table's module (a dump names its copy)


def interpreting() -> bool:
    """Does Triton run kernels through its CPU interpreter (TRITON_INTERPRET=1)?"""
    try:
        from triton import knobs
        return bool(knobs.runtime.interpret)
    except (ImportError, AttributeError):       # Triton < 3.4 reads the variable directly
        return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _reference_libdevice() -> types.SimpleNamespace:
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def wrap(ref):
        def fn(*args):
            data = [a.handle.data for a in args]
            out = ref(*[torch.from_numpy(np.array(d)) for d in data]).numpy()
            out = np.asarray(out).astype(data[0].dtype)
            scalar = args[0].dtype
            block = any(a.type.is_block() for a in args)
            ty = tl.block_type(scalar, list(out.shape)) if block else scalar
            return tl.tensor(TensorHandle(out, scalar), ty)
        return fn

    table = importlib.import_module(SCALAR_OPS).libdevice_functions()
    return types.SimpleNamespace(**{name: wrap(row.ref) for name, row in table.items()})


_reference: list = []


def current():
    """The libdevice for the mode Triton is in now (generated modules bind it at import)."""
    if not interpreting():
        from triton.language.extra import libdevice as real
        return real
    if not _reference:
        _reference.append(_reference_libdevice())
    return _reference[0]
