"""`op_sweep.py --repro OP:DTYPE:VARIANT:fwd|grad:I`: one sample of the sweep run in the
foreground, under brrr and then aot_eager, with whatever they raise left to propagate."""
from __future__ import annotations

import torch

from tests.coverage import opinfo_harness as h
from tests.helpers import check_against_eager


def repro(key: str, limit) -> int:
    name, dtype_name, variant, mode, i = key.split(":")
    op, dtype = h.ops_by_key(h.load_op_db())[name], getattr(torch, dtype_name)
    grad = mode == "grad"
    sample = h.samples(op, dtype, grad, limit)[int(i)]
    print(f"{name} {dtype_name} {variant} {mode} sample {i}: {h.describe(sample)}")
    print(f"  input={sample.input!r}\n  args={sample.args!r}\n  kwargs={sample.kwargs!r}")
    made = h.sample_fn(op, sample, variant)
    if made is None:
        print("eager rejects this out= call")
        return 0
    fn, tensors = made
    torch._dynamo.config.suppress_errors = False
    for backend in ("aot_eager", None):       # brrr last: its error ends the run
        who = backend or "brrr"
        try:
            check_against_eager(fn, *tensors, grad=grad, backend=backend,
                                allow_fallback=True, strict=True, reference=True)
            print(f"{who}: matches eager")
        except Exception as err:  # noqa: BLE001
            if backend is None:
                raise
            print(f"{who}: {type(err).__name__}: {str(err)[:500]}")
    return 0
