"""Shared test helpers. Eager PyTorch is the oracle: every end-to-end test goes through
`check_against_eager`; partition and codegen tests build their ATen graphs with
`aten_graph` and plans with `plan_of`."""
from __future__ import annotations

import functools
import warnings

import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import assert_close
from torch.utils._pytree import tree_flatten

from brrr_compiler.backend import brrr_backend
from brrr_compiler.capture import decomposition_table
from brrr_compiler.partition import GreedyPolicy, partition

# fused kernels keep intermediates in float32 where eager rounds after every op, so a
# chain drifts by a few units in the last place of the low-precision type
LOW_PRECISION_TOL = {
    torch.float16: dict(atol=1e-2, rtol=1e-2),
    torch.bfloat16: dict(atol=5e-2, rtol=5e-2),
}

# ATen calls that move no data: allowed next to a fused kernel
ALIAS_OPS = ("aten.detach.", "aten.alias.", "aten.view.", "aten._unsafe_view.", "aten.t.",
             "aten.permute.", "aten.expand.", "aten.slice.", "aten.select.", "aten.unsqueeze.",
             "aten.squeeze.", "aten.transpose.", "aten.reshape.")


def clone_input(t):
    """A copy of `t` with the same sizes, strides and storage offset, and no view base."""
    if not isinstance(t, torch.Tensor):
        return t
    storage = torch.empty(t.untyped_storage().nbytes() // t.element_size(), dtype=t.dtype)
    storage.untyped_storage().copy_(t.detach().untyped_storage())
    copy = torch.empty(0, dtype=t.dtype).set_(storage.untyped_storage(), t.storage_offset(),
                                               t.shape, t.stride())
    return copy.requires_grad_(t.requires_grad)


def _tensors(tree) -> list[torch.Tensor]:
    flat, _ = tree_flatten(tree)
    return [t for t in flat if isinstance(t, torch.Tensor)]


def _gradients(out, inputs, params):
    """Gradients of sum(output * fixed random cotangent) w.r.t. the inputs needing grad
    and `params`."""
    outs = [o for o in _tensors(out) if o.requires_grad]
    wrt = [a for a in inputs if isinstance(a, torch.Tensor) and a.requires_grad] + params
    if not outs or not wrt:
        return []
    gen = torch.Generator().manual_seed(1234)
    loss = sum((o * torch.randn(o.shape, generator=gen, dtype=o.dtype)).sum() for o in outs)
    return list(torch.autograd.grad(loss, wrt, allow_unused=True))


def _compare(actual, expected, atol, rtol, what: str) -> None:
    actual, expected = _tensors(actual), _tensors(expected)
    assert len(actual) == len(expected), f"{what}: {len(actual)} tensors, eager has {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        given = atol is not None or rtol is not None
        tol = dict(atol=atol, rtol=rtol) if given else LOW_PRECISION_TOL.get(e.dtype, {})
        assert_close(a.detach(), e.detach(), equal_nan=True, **tol,
                     msg=lambda m, i=i: f"{what} {i} differs from eager:\n{m}")


def check_against_eager(fn, *args, options=None, grad=True, atol=None, rtol=None,
                        allow_fallback=False, backend=None):
    """Compile `fn` with brrr, run it and eager on copies of `args`, and compare outputs
    (and, if `grad`, the gradients of the inputs that require grad and, for a module, of
    its parameters). Unless `allow_fallback`, brrr's warning that a group runs through
    ATen instead (a kernel that failed to lower or build) fails the test.

    `backend` replaces brrr (e.g. "aot_eager", to tell brrr's failures from torch's).
    Returns the GraphReports of the graphs brrr compiled.
    """
    if not grad:
        args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    torch._dynamo.reset()
    sink: list = []
    if backend is None:
        backend = functools.partial(brrr_backend, options=options, _sink=sink)
    compiled = torch.compile(fn, backend=backend)
    eager_args = [clone_input(a) for a in args]
    brrr_args = [clone_input(a) for a in args]
    expected = fn(*eager_args)
    with warnings.catch_warnings():     # the backward graph compiles in _gradients
        if not allow_fallback:
            warnings.filterwarnings("error", "brrr: .*instead", RuntimeWarning)
        actual = compiled(*brrr_args)
        _compare(actual, expected, atol, rtol, "output")
        if grad:
            params = [p for p in fn.parameters() if p.requires_grad] \
                if isinstance(fn, torch.nn.Module) else []
            _compare(_gradients(actual, brrr_args, params),
                     _gradients(expected, eager_args, params),
                     atol, rtol, "gradient of input or parameter")
    torch._dynamo.reset()
    return sink


def compute_calls(graph_report) -> list[tuple[str, str]]:
    """The ATen calls of a compiled graph that are not views or aliases."""
    return [(name, op) for name, op in graph_report.aten_nodes if not op.startswith(ALIAS_OPS)]


def aten_graph(fn, *args) -> torch.fx.GraphModule:
    """`fn` traced to a functional ATen graph (fake tensors, brrr's decompositions)."""
    return make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)


def plan_of(fn, *args, policy=None, max_args: int = 48):
    """The FusionPlan brrr's partitioner makes for `fn` (greedy unless `policy` is given)."""
    return partition(aten_graph(fn, *args), policy or GreedyPolicy(), max_args)


def spy_builds(monkeypatch) -> list[str]:
    """Record the library path of every C++ compile (a cache miss) in runtime/build.py."""
    from brrr_compiler.runtime import build
    calls, real = [], build._compile

    def spy(toolchain, so):
        calls.append(so)
        return real(toolchain, so)

    monkeypatch.setattr(build, "_compile", spy)
    return calls
