"""`libdevice` for generated Triton modules: CUDA's libdevice, or numpy under the interpreter.

Generated kernels call `libdevice.tanh(x)` and friends (their module binds
`libdevice = current()` when it is imported) for the math that triton.language
lacks. Compiled for a GPU that is `triton.language.extra.libdevice`; Triton's interpreter
(TRITON_INTERPRET=1) cannot run extern calls, so there the same names are numpy functions
applied to the interpreter's arrays. The interpreter runs kernels as plain Python, so a
plain function that maps tensor to tensor is all it needs.

The module imports nothing from brrr: a runnable dump of a Triton graph (script.py)
carries it verbatim beside the kernels.
"""
from __future__ import annotations

import os
import types


def interpreting() -> bool:
    """Does Triton run kernels through its CPU interpreter (TRITON_INTERPRET=1)?"""
    try:
        from triton import knobs
        return bool(knobs.runtime.interpret)
    except (ImportError, AttributeError):       # Triton < 3.4 reads the variable directly
        return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _numpy_libdevice() -> types.SimpleNamespace:
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def wrap(np_fn):
        def fn(*args):
            data = [a.handle.data for a in args]
            with np.errstate(all="ignore"):
                out = np.asarray(np_fn(*data)).astype(data[0].dtype)
            scalar = args[0].dtype
            block = any(a.type.is_block() for a in args)
            ty = tl.block_type(scalar, list(out.shape)) if block else scalar
            return tl.tensor(TensorHandle(out, scalar), ty)
        return fn

    def erfc(x):
        import math
        return np.vectorize(math.erfc, otypes=[x.dtype])(x)

    table = {
        "expm1": np.expm1, "log1p": np.log1p, "log10": np.log10, "tan": np.tan,
        "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin,
        "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh,
        "atanh": np.arctanh, "erfc": erfc, "pow": np.power, "atan2": np.arctan2,
        "copysign": np.copysign, "trunc": np.trunc, "nearbyint": np.rint,
        "signbit": np.signbit,
    }
    return types.SimpleNamespace(**{name: wrap(f) for name, f in table.items()})


_numpy: list = []


def current():
    """The libdevice for the mode Triton is in now (generated modules bind it at import)."""
    if not interpreting():
        from triton.language.extra import libdevice as real
        return real
    if not _numpy:
        _numpy.append(_numpy_libdevice())
    return _numpy[0]
