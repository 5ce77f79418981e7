"""PyTorch's OpInfo database through a torch.compile backend, one sample at a time.

Shared by the CI subset (tests/coverage/test_opinfo.py) and the full sweep
(benchmarks/op_sweep.py). A sample's tensors (input, args and kwargs, flattened) become
the compiled function's arguments, so nothing is baked into the graph as a constant; its
other arguments are constants. Eager is the oracle through `check_against_eager`
(outputs, then gradients of the inputs that require grad). A sample is classified

    pass      outputs (and gradients) match eager
    mismatch  the compiled function ran but its numbers differ (AssertionError)
    crash     the compiled function raised anything else
    skip      eager itself raised on the sample, or its output is uninitialized memory
              (torch.empty and kin): nothing to compare with

and a brrr kernel that failed to build (its group ran through ATen: right answers, but
a code generation bug) is reported in "build_failed".

Python scalars in an op's output (allclose, equal, ...) are compared as 0-dim tensors.
"""
from __future__ import annotations

import traceback
import warnings

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from brrr_compiler import log as brrr_log
from tests.helpers import check_against_eager, clone_input, compute_calls

PASS, MISMATCH, CRASH, SKIP = "pass", "mismatch", "crash", "skip"

# ops whose outputs are uninitialized memory: nothing to compare
UNDEFINED_OUTPUT = frozenset({"empty", "empty_like", "empty_permuted", "empty_strided",
                              "new_empty", "new_empty_strided", "resize_", "resize_as_"})


def load_op_db() -> list:
    """torch's op_db (needs the `expecttest` package)."""
    import expecttest  # noqa: F401  (op_db's module imports it; fail clearly here)
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def op_key(op) -> str:
    """`name` or `name.variant`: unique within op_db."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def ops_by_key(op_db: list) -> dict:
    return {op_key(op): op for op in op_db}


def wants_grad(op, dtype: torch.dtype) -> bool:
    return bool(op.supports_autograd) and dtype.is_floating_point and \
        dtype in op.supported_backward_dtypes("cpu")


def samples(op, dtype: torch.dtype, grad: bool, limit: int | None = None) -> list:
    """The op's CPU sample inputs for `dtype` (reproducible: seeded); with `limit`, that
    many spread evenly over the list (first and last included)."""
    torch.manual_seed(0)
    out = list(op.sample_inputs("cpu", dtype, requires_grad=grad))
    if limit is None or len(out) <= limit:
        return out
    if limit == 1:
        return out[:1]
    return [out[round(i * (len(out) - 1) / (limit - 1))] for i in range(limit)]


def _tensorize(out):
    return tree_map(lambda x: torch.tensor(x) if isinstance(x, (bool, int, float)) else x, out)


def sample_fn(op, sample):
    """(fn, tensors): fn(*tensors) calls the op on the sample."""
    flat, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    where = [i for i, x in enumerate(flat) if isinstance(x, torch.Tensor)]
    call = op.op

    def fn(*tensors):
        leaves = list(flat)
        for i, t in zip(where, tensors):
            leaves[i] = t
        inp, args, kwargs = tree_unflatten(leaves, spec)
        return _tensorize(call(inp, *args, **kwargs))

    return fn, [flat[i] for i in where]


def _eager_runs(fn, tensors, grad: bool) -> str | None:
    """None if eager runs the sample (and its backward), else why not."""
    try:
        copies = [clone_input(t) for t in tensors]
        out = fn(*copies)
        if grad:
            flat, _ = tree_flatten(out)
            outs = [o for o in flat if isinstance(o, torch.Tensor) and o.requires_grad]
            wrt = [t for t in copies if t.requires_grad]
            if outs and wrt:
                loss = sum((o.float() * 1.0).sum() for o in outs)
                torch.autograd.grad(loss, wrt, allow_unused=True)
    except Exception as err:  # noqa: BLE001  (whatever eager raises, there is no oracle)
        return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return None


def run_sample(op, sample, backend=None, grad: bool = True) -> dict:
    """Run one sample under `backend` (None: brrr) and classify it against eager.

    Returns {"status", "detail", "kernels", "aten_calls", "build_failed"}: brrr's fused
    kernels, the ATen compute calls it left, and the first kernel build failure's
    warning (None for other backends)."""
    fn, tensors = sample_fn(op, sample)
    grad = grad and any(t.requires_grad for t in tensors)
    why = "uninitialized output" if op.name in UNDEFINED_OUTPUT else _eager_runs(fn, tensors, grad)
    if why is not None:
        return {"status": SKIP, "detail": why, "kernels": None, "aten_calls": None,
                "build_failed": None}
    result = {"status": PASS, "detail": "", "kernels": None, "aten_calls": None,
              "build_failed": None}
    brrr_log._warned.clear()          # warn_once: every sample reports its own fallbacks
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            graphs = check_against_eager(fn, *tensors, grad=grad, backend=backend,
                                         allow_fallback=True)
        if backend is None:
            result["kernels"] = sum(len(g.kernels) for g in graphs)
            result["aten_calls"] = sum(len(compute_calls(g)) for g in graphs)
            failed = [str(w.message) for w in caught if "failed to build" in str(w.message)]
            result["build_failed"] = _first_lines(failed[0], 1) if failed else None
    except AssertionError as err:
        result.update(status=MISMATCH, detail=_first_lines(str(err), 4))
    except Exception as err:  # noqa: BLE001  (any other error is the backend crashing)
        tb = traceback.extract_tb(err.__traceback__)
        where = f" at {tb[-1].filename.split('/')[-1]}:{tb[-1].lineno}" if tb else ""
        result.update(status=CRASH,
                      detail=f"{type(err).__name__}{where}: {_first_lines(str(err), 3)}")
    finally:
        torch._dynamo.reset()
    return result


def _first_lines(text: str, n: int) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[:n])[:400]


def describe(sample) -> str:
    """A short description of a sample's tensors (shape/dtype/strides) for reports."""
    def one(x):
        if isinstance(x, torch.Tensor):
            if x.layout != torch.strided:             # sparse: no strides to show
                extra = f"({str(x.layout).replace('torch.', '')})"
            else:
                extra = "" if x.is_contiguous() else f"@{tuple(x.stride())}"
            return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}{extra}"
        return repr(x)[:40]
    flat, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return ", ".join(one(x) for x in flat)[:200]
