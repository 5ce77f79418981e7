"""Shared test helpers. Eager PyTorch is the oracle: every end-to-end test goes through
`check_against_eager`; partition and codegen tests build their ATen graphs with
`aten_graph` and plans with `plan_of`; lowering tests evaluate kernels with
`lowered_vs_eager` (the kernel IR's reference evaluator, no printer or compiler)."""
from __future__ import annotations

import functools

import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import assert_close
from torch.utils._pytree import tree_flatten

from brrr_compiler.accuracy import (LOW_PRECISION_TOL, coarsest_tol, rounded_each_op,
                                    within_eager_error, zero_sign_variants)
from brrr_compiler.backend import brrr_backend
from brrr_compiler.capture import decomposition_table
from brrr_compiler.kernel_eval import run_kernel
from brrr_compiler.kernel_verify import verify
from brrr_compiler.lower.group import lower_group
from brrr_compiler.partition import GreedyPolicy, partition

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


def with_specials(x: torch.Tensor) -> torch.Tensor:
    """A copy of float `x` whose first three elements are NaN, inf and -inf (where it
    has more than three)."""
    x = x.clone()
    flat = x.view(-1)
    if flat.numel() > 3:
        flat[0], flat[1], flat[2] = float("nan"), float("inf"), float("-inf")
    return x


def _tensors(tree) -> list[torch.Tensor]:
    flat, _ = tree_flatten(tree)
    return [t for t in flat if isinstance(t, torch.Tensor)]


def _gradients(out, inputs, params, drawn_as=None):
    """Gradients of sum(output * fixed random cotangent) w.r.t. the inputs needing grad
    and `params`. `drawn_as`: the dtypes to draw the cotangents in (those of another run's
    outputs: a float64 reference of a float16 program sees the float16 run's cotangents)."""
    outs = [o for o in _tensors(out) if o.requires_grad]
    wrt = [a for a in inputs if isinstance(a, torch.Tensor) and a.requires_grad] + params
    if not outs or not wrt:
        return []
    gen = torch.Generator().manual_seed(1234)
    drawn_as = drawn_as if drawn_as and len(drawn_as) == len(outs) else [o.dtype for o in outs]
    loss = sum((o * torch.randn(o.shape, generator=gen, dtype=d).to(o.dtype)).sum()
               for o, d in zip(outs, drawn_as))
    return list(torch.autograd.grad(loss, wrt, allow_unused=True))


def _same_layout(a: torch.Tensor, e: torch.Tensor) -> bool:
    """Equal strides over the dims that have any (size > 1); sparse and empty pass."""
    if a.layout != torch.strided or e.layout != torch.strided or e.numel() == 0:
        return True
    return all(sa == se for n, sa, se in zip(e.shape, a.stride(), e.stride()) if n > 1)


def _aligned(tree, n: int) -> list:
    """The tensors of `tree` if there are `n` of them, else n Nones."""
    tensors = _tensors(tree) if tree is not None else []
    return tensors if len(tensors) == n else [None] * n


# the correctly rounded program, then two rounded at random (accuracy.py's note)
JITTERS = (None, 1, 2)


def _compare(actual, expected, atol, rtol, what: str, strides=False, reference=None,
             rounded=None, input_dtypes=(), signed=None) -> None:
    """`rounded`: a function making the correctly rounded program's outputs and those of
    the randomly rounded ones (a list of runs, the correctly rounded first), called only
    when an output is outside eager's tolerance; `signed`: likewise, the
    float64 program's outputs with order-signed zeros signed otherwise (accuracy.py);
    `input_dtypes`: the program's float input dtypes, the coarsest of which sets the
    units of its error."""
    actual, expected = _tensors(actual), _tensors(expected)
    reference = _aligned(reference, len(expected))
    assert len(actual) == len(expected), f"{what}: {len(actual)} tensors, eager has {len(expected)}"
    for i, (a, e, r) in enumerate(zip(actual, expected, reference)):
        given = atol is not None or rtol is not None
        tol = dict(atol=atol, rtol=rtol) if given else LOW_PRECISION_TOL.get(e.dtype, {})
        try:
            assert_close(a.detach(), e.detach(), equal_nan=True, **tol,
                         msg=lambda m, i=i: f"{what} {i} differs from eager:\n{m}")
        except AssertionError:
            if callable(rounded):
                rounded = rounded()
            if callable(signed):
                signed = signed()
            ro, *fair = [_aligned(run, len(expected))[i] for run in rounded or [None]]
            alts = [_aligned(v, len(expected))[i] for v in signed or ()]
            if a.dtype != e.dtype or a.shape != e.shape or \
                    not within_eager_error(a, e, r, rounded=ro, alts=alts, fair=fair,
                                           coarse=coarsest_tol({e.dtype, *input_dtypes})):
                raise
        if strides:
            assert _same_layout(a, e), \
                f"{what} {i}: strides {a.stride()}, eager's {e.stride()} (shape {tuple(e.shape)})"


def _float64_copy(a):
    if not isinstance(a, torch.Tensor) or not a.is_floating_point():
        return clone_input(a)
    return a.detach().to(torch.float64).requires_grad_(a.requires_grad)


def _cotangent_dtypes(expected) -> list:
    """The dtypes eager's outputs that take a gradient draw their cotangents in."""
    return [o.dtype for o in _tensors(expected) if o.requires_grad]


def _float64_reference(fn, args, grad: bool, params, expected) -> tuple:
    """fn's outputs, inputs after the call and gradients, computed from float64 copies of
    the floating-point inputs: the reference low-precision results are judged against.
    Its cotangents are drawn as for eager's outputs (`expected`)."""
    ref_args = [_float64_copy(a) for a in args]
    try:
        out = fn(*ref_args)
        grads = _gradients(out, ref_args, params, _cotangent_dtypes(expected)) if grad else None
    except Exception:  # noqa: BLE001  (an op without float64 support: no reference)
        return None, None, None
    return out, ref_args, grads


def check_against_eager(fn, *args, options=None, grad=True, atol=None, rtol=None,
                        allow_fallback=False, backend=None, strict=False, reference=False,
                        kernels=True, strides=True):
    """Compile `fn` with brrr, run it and eager on copies of `args`, and compare outputs
    (and, if `grad`, the gradients of the inputs that require grad and, for a module, of
    its parameters). Unless `allow_fallback`, brrr's warning that a group runs through
    ATen instead (a kernel that failed to lower or build) fails the test, counted from
    each compile's own record (GraphReport.fallbacks), and so does a run in which brrr
    made no kernel at all, unless `kernels=False` (a program with nothing to fuse).
    Outputs are compared with their strides (unless `strides=False`: an op whose strides
    only its real kernel knows).

    `backend` replaces brrr (e.g. "aot_eager", to tell brrr's failures from torch's).
    `strict` also compares the inputs after the call (values,
    dtypes, strides: what the function mutated). `reference` judges a float32, float16 or
    bfloat16 value that misses eager's tolerance against the same program run in float64
    instead: it passes if it is no further from that than eager is, or than the program
    run with each op correctly rounded or rounded at random is (outputs and gradients;
    accuracy.py's note on ill-conditioned results). `reference` may be
    that float64 program itself (a function like `fn` whose casts to lower precision
    are float64 too: the exact math a float32-intermediate chain approximates). With
    `reference`, a bool or integer output may also match `fn` run with each op
    correctly rounded (brrr_compiler/accuracy.py) as well as eager does.
    Returns the GraphReports of the graphs brrr compiled.
    """
    if not grad:
        args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    torch._dynamo.reset()
    sink: list = []
    backend_is_brrr = backend is None
    if backend is None:
        backend = functools.partial(brrr_backend, options=options, _sink=sink)
    compiled = torch.compile(fn, backend=backend)
    eager_args = [clone_input(a) for a in args]
    brrr_args = [clone_input(a) for a in args]
    expected = fn(*eager_args)
    actual = compiled(*brrr_args)
    params = [p for p in fn.parameters() if p.requires_grad] \
        if isinstance(fn, torch.nn.Module) else []
    ref_fn = reference if callable(reference) else fn
    ref_out, ref_args, ref_grads = _float64_reference(ref_fn, args, grad, params, expected) \
        if reference else (None, None, None)
    rounded = (lambda: [rounded_each_op(fn, *[clone_input(a).detach() if isinstance(
        a, torch.Tensor) else a for a in args], jitter=j) for j in JITTERS]) \
        if reference else None
    signed = (lambda: zero_sign_variants(ref_fn, lambda: [_float64_copy(a) for a in args])) \
        if reference else None
    floats = {t.dtype for t in [*_tensors(args), *params] if t.is_floating_point()}
    _compare(actual, expected, atol, rtol, "output", strides or strict, ref_out, rounded,
             floats, signed)
    if strict:
        _compare(brrr_args, eager_args, atol, rtol, "input after the call", True, ref_args,
                 input_dtypes=floats)
    if grad:
        rounded_grads = (lambda: [rounded_each_op(
            lambda *xs: _gradients(fn(*xs), xs, params, _cotangent_dtypes(expected)),
            *[clone_input(a) for a in args], grad=True, jitter=j) for j in JITTERS]) \
            if reference else None
        _compare(_gradients(actual, brrr_args, params),
                 _gradients(expected, eager_args, params),
                 atol, rtol, "gradient of input or parameter", reference=ref_grads,
                 rounded=rounded_grads, input_dtypes=floats)
    torch._dynamo.reset()
    if backend_is_brrr and not allow_fallback:
        assert_no_fallback(sink, kernels)
    return sink


def assert_no_fallback(reports, kernels: bool = True) -> None:
    """No compiled graph in `reports` (a sink's GraphReports) ran any part through ATen
    that brrr meant to fuse, and, if `kernels`, brrr made at least one kernel."""
    fell = [f"{r.name}: {why}" for r in reports for why in r.fallbacks]
    assert not fell, "brrr fell back to ATen:\n" + "\n".join(fell)
    if kernels:
        assert reports and sum(len(r.kernels) for r in reports), \
            f"brrr made no kernel ({len(reports)} graphs compiled)"


def compute_calls(graph_report) -> list[tuple[str, str]]:
    """The ATen calls of a compiled graph that are not views or aliases."""
    return [(name, op) for name, op in graph_report.aten_nodes if not op.startswith(ALIAS_OPS)]


def aten_graph(fn, *args) -> torch.fx.GraphModule:
    """`fn` traced to a functional ATen graph (fake tensors, brrr's decompositions)."""
    return make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)


def plan_of(fn, *args, policy=None, max_args: int = 48):
    """The FusionPlan brrr's partitioner makes for `fn` (greedy unless `policy` is given)."""
    return partition(aten_graph(fn, *args), policy or GreedyPolicy(), max_args)


def kernel_sources(fn, *args, threads: int = 2, prefetch: bool = False) -> list[str]:
    """The C++ source of each kernel brrr makes for `fn` (greedy plan), in plan order;
    `prefetch`: as on a machine whose calibration turned stream prefetch on."""
    from brrr_compiler.codegen import cpp
    return [cpp.kernel_source(lower_group(g, g.name), threads, prefetch=prefetch)
            for g in plan_of(fn, *args).groups]


def one_kernel_source(fn, *args, threads: int = 2, whole: bool = False,
                      prefetch: bool = False) -> str:
    """The C++ source of the one kernel brrr makes for `fn`: from its `extern` on (what
    codegen tests match their text against), or with the helpers above it if `whole`."""
    sources = kernel_sources(fn, *args, threads=threads, prefetch=prefetch)
    assert len(sources) == 1, f"{len(sources)} kernels"
    return sources[0] if whole else sources[0].split("extern")[-1]


def spy_builds(monkeypatch) -> list[str]:
    """Record the library path of every C++ compile (a cache miss) in runtime/build.py."""
    from brrr_compiler.runtime import build
    calls, real = [], build._compile

    def spy(toolchain, so):
        calls.append(so)
        return real(toolchain, so)

    monkeypatch.setattr(build, "_compile", spy)
    return calls


def _node_values(gm, args) -> dict:
    """Every node's eager value when `gm` runs on `args`."""
    values = {}

    class Record(torch.fx.Interpreter):
        def run_node(self, n):
            values[n] = super().run_node(n)
            return values[n]

    Record(gm).run(*args)
    return values


def lowered_vs_eager(fn, *args, scratch=True, exact=True, atol=None, rtol=None) -> int:
    """Lower every group of `fn`'s plan, evaluate each kernel on eager's values of its
    inputs and compare its outputs with eager's; the number of kernels."""
    plan = plan_of(fn, *args)
    values = _node_values(plan.graph, args)
    by_name = {n.name: n for n in plan.graph.graph.nodes}
    for g in plan.groups:
        k = verify(lower_group(g, g.name, use_scratch=scratch, round_results=exact))
        outs = [torch.empty_strided(o.meta["val"].shape, o.meta["val"].stride(),
                                    dtype=o.meta["val"].dtype) for o in g.outputs]
        run_kernel(k, [values[by_name[b.origin]] for b in k.inputs], outs)
        for o, got in zip(g.outputs, outs):
            assert_close(got, values[o], equal_nan=True, atol=atol, rtol=rtol,
                         msg=lambda m: f"{g.name} output {o.name}: {m}")
    assert plan.groups, "nothing was fused"
    return len(plan.groups)
