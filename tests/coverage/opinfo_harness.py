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

and a part brrr meant to fuse that ran through ATen instead (a group that failed to
lower or a kernel that failed to build: right answers, but a code generation gap) is
reported in "fallback", read from the compile's own record (GraphReport.fallbacks).

Each sample runs as one of three variants: "op" (the function), "inplace" (its in-place
method on the sample's input: a graph input the compiled function mutates, or, with
gradients, a clone of it) and "out" (the out= overload writing into zeroed tensors that
are extra arguments). `strict` compares strides and the arguments after the call
(mutated inputs, out= tensors) as well as values and dtypes; float16/bfloat16 values that
miss eager's tolerance are judged against a float64 run of the same sample.

Python scalars in an op's output (allclose, equal, ...) are compared as 0-dim tensors.
"""
from __future__ import annotations

import traceback
import warnings

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

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


VARIANTS = ("op", "inplace", "out")


def has_variant(op, variant: str) -> bool:
    if variant == "inplace":
        return op.inplace_variant is not None
    if variant == "out":
        return bool(op.supports_out)
    return True


def sample_fn(op, sample, variant: str = "op"):
    """(fn, tensors): fn(*tensors) calls the op's `variant` on the sample; None when the
    variant does not apply to it (an out= op whose result is not tensors, or that eager
    rejects)."""
    flat, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    where = [i for i, x in enumerate(flat) if isinstance(x, torch.Tensor)]
    tensors = [flat[i] for i in where]

    def unflatten(tensors):
        leaves = list(flat)
        for i, t in zip(where, tensors):
            leaves[i] = t
        return tree_unflatten(leaves, spec)

    if variant == "out":
        return _out_fn(op, unflatten, tensors)
    call = op.inplace_variant if variant == "inplace" else op.op

    def fn(*tensors):
        inp, args, kwargs = unflatten(tensors)
        if variant == "inplace" and isinstance(inp, torch.Tensor) and inp.requires_grad:
            inp = inp.clone()           # a leaf that requires grad cannot be mutated
        return _tensorize(call(inp, *args, **kwargs))

    return fn, tensors


def _out_fn(op, unflatten, tensors):
    """The out= call: zeroed tensors shaped like eager's result are extra arguments."""
    try:
        inp, args, kwargs = unflatten([clone_input(t).detach() for t in tensors])
        want = op.op(inp, *args, **kwargs)
    except Exception:  # noqa: BLE001  (eager rejects it: no out= call to make)
        return None
    flat = want if isinstance(want, (tuple, list)) else (want,)
    if not flat or not all(isinstance(t, torch.Tensor) and t.layout == torch.strided
                           for t in flat):
        return None
    outs = [torch.zeros_like(t, memory_format=torch.contiguous_format) for t in flat]
    single = not isinstance(want, (tuple, list))

    def fn(*tensors):
        given, outs = tensors[:len(tensors) - len(flat)], tensors[len(tensors) - len(flat):]
        inp, args, kwargs = unflatten(given)
        return op.op(inp, *args, **kwargs, out=outs[0] if single else tuple(outs))

    return fn, [t.detach() for t in tensors] + outs


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


def run_sample(op, sample, backend=None, grad: bool = True, variant: str = "op",
               strict: bool = False, options=None) -> dict:
    """Run one sample's `variant` under `backend` (None: brrr) and classify it against
    eager (`strict`: strides and mutated arguments too, low precision against float64;
    `options`: brrr's).

    Returns {"status", "detail", "stage", "kernels", "aten_calls", "fallback"}:
    the stage that failed (output, input after the call, gradient, or crash), brrr's
    fused kernels, the ATen compute calls it left, and the first fallback's reason
    (None for other backends)."""
    made = sample_fn(op, sample, variant)
    result = {"status": PASS, "detail": "", "stage": "", "kernels": None,
              "aten_calls": None, "fallback": None}
    if made is None:
        return dict(result, status=SKIP, detail="eager rejects the out= call")
    fn, tensors = made
    grad = grad and any(t.requires_grad for t in tensors)
    why = "uninitialized output" if op.name in UNDEFINED_OUTPUT else _eager_runs(fn, tensors, grad)
    if why is not None:
        return dict(result, status=SKIP, detail=why)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # fallbacks are read from the record below
            graphs = check_against_eager(fn, *tensors, grad=grad, backend=backend,
                                         allow_fallback=True, strict=strict, reference=strict,
                                         options=options)
        if backend is None:
            result["kernels"] = sum(len(g.kernels) for g in graphs)
            result["aten_calls"] = sum(len(compute_calls(g)) for g in graphs)
            fell = [why for g in graphs for why in g.fallbacks]
            result["fallback"] = _first_lines(fell[0], 1) if fell else None
    except AssertionError as err:
        text = str(err)
        stage = next((s for s in ("gradient", "input after the call", "output")
                      if text.startswith(s)), "output")
        result.update(status=MISMATCH, detail=_first_lines(text, 4), stage=stage)
    except Exception as err:  # noqa: BLE001  (any other error is the backend crashing)
        tb = traceback.extract_tb(err.__traceback__)
        where = f" at {tb[-1].filename.split('/')[-1]}:{tb[-1].lineno}" if tb else ""
        result.update(status=CRASH, stage="crash",
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
