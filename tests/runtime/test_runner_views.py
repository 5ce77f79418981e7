"""The runner builds static views as one reinterpretation of the root of their chain
(runtime/reinterpret.py) instead of one ATen call per link; results match eager."""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import FileCheck, assert_close

from brrr_compiler.runtime.reinterpret import as_reinterpret
from tests.helpers import aten_graph, check_against_eager


def _runner(graphs, kind):
    return next(g for g in graphs if g.kind == kind).runner_code


def _linear_chain(x, w):
    # t(t(w)) and view(view(x)) are chains of views; mm's operands are views of inputs
    # (sin: an activation linear_epilogues leaves, so the mm stays an mm)
    h = (x.view(8, 4, 6).view(32, 6) @ w.t().t().t()).sin()
    return h.view(8, 4, 5).transpose(0, 1) * 2


def test_view_chains_are_one_reinterpret_each():
    x = torch.randn(8, 24, requires_grad=True)
    w = torch.randn(5, 6, requires_grad=True)
    graphs = check_against_eager(_linear_chain, x, w)
    code = _runner(graphs, "forward")
    FileCheck().check("brrr_reinterpret(").check("torch.mm(").run(code)
    for op in ("aten.view.", "aten.t.", "aten.transpose.", "aten._unsafe_view."):
        assert op not in code, code
    # t(t(t(w))): one reinterpretation of w, the inner links are never built
    assert "brrr_reinterpret(primals_2, [6, 5], [1, 6], 0)" in code, code
    assert "brrr_reinterpret(t" not in code and "brrr_reinterpret(view" not in code, code


def test_views_of_offset_and_strided_inputs():
    def f(x):
        return (x[1:4, 2:].t() @ x[:3, :4]).sum(0) + x[0, :4]

    base = torch.randn(5, 7)
    check_against_eager(f, base[:, 1:].requires_grad_())


def test_output_that_views_an_input_stays_an_alias():
    def f(x, y):
        return x.t()[1:], (y + 1).view(2, 6)

    x, y = torch.randn(4, 3), torch.randn(3, 4)
    out = torch.compile(f, backend="brrr")(x, y)
    expected = f(x, y)
    assert_close(out, expected)
    assert out[0].data_ptr() == expected[0].data_ptr()     # a view of x, as eager's


def test_a_reshape_that_copies_is_not_reinterpreted():
    def f(x):
        return x.t().reshape(-1)

    gm = aten_graph(f, torch.randn(3, 4))
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    clone = next(n for n in nodes if n.target is torch.ops.aten.clone.default)
    last = nodes[-1]
    assert as_reinterpret(last) == (clone, [12], [1], 0)   # a view of the copy, not of x
    assert as_reinterpret(clone) is None


def test_symbolic_sizes_stay_aten_calls():
    def f(x):
        return x.t() @ x

    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(3, 4))
    t = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.t.default)
    assert as_reinterpret(t) is None


def test_kernel_reads_views_of_a_matmul_through_its_root():
    def f(x, w):
        h = (x @ w).view(6, 2, 4)
        return h[:, 1, 1:] * h[:, 0, :-1] + h.sum(1)[:, 1:]     # offsets 5 and 0 floats

    x, w = torch.randn(6, 5, requires_grad=True), torch.randn(5, 8, requires_grad=True)
    code = _runner(check_against_eager(f, x, w), "forward")
    assert "brrr_reinterpret(mm" not in code, code     # the kernels take mm itself
    FileCheck().check("mm = torch.mm(").check("_mul_add(mm, mm,").run(code)


def _tied_operands():
    """Operands whose elementwise result FakeTensor lays out contiguous and eager's
    TensorIterator transposed (the two break a size-1 dim's stride tie apart)."""
    a = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    b = torch.empty_strided((1, 1, 4), (1, 4, 1)).copy_(torch.randn(1, 1, 4))
    return a, b


def test_a_view_of_an_aten_result_whose_real_strides_differ_from_its_fake():
    """nextafter runs through ATen; its FakeTensor is contiguous where eager's output is
    transposed, so the reshape was traced as a view. The checking runner copies the
    result into the layout the view was built for before reinterpreting it."""
    a, b = _tied_operands()
    meta = [torch.empty_strided(t.shape, t.stride(), device="meta") for t in (a, b)]
    assert torch.nextafter(*meta).stride() != torch.nextafter(a, b).stride(), \
        "the test would not tell"
    check_against_eager(lambda a, b: torch.nextafter(a, b).reshape(-1), a, b, grad=False,
                        allow_fallback=True, strict=True)


@pytest.mark.parametrize("op", [torch.maximum, torch.fmax, torch.atan2, torch.hypot,
                                lambda a, b: (a * b).neg()])
def test_a_view_of_a_kernel_result_whose_eager_strides_differ_from_its_trace(op):
    """The same reshape of an op brrr fuses: the kernel writes the layout the view was
    traced with (eager_strides.py `_keeps_its_trace`); with eager's, the view failed and
    the whole graph ran through ATen."""
    a, b = _tied_operands()
    graphs = check_against_eager(lambda a, b: op(a, b).reshape(-1) * 2, a, b, grad=False,
                                 strict=True)
    assert any(g.kernels for g in graphs)


def test_views_of_a_linear_layer_with_its_activation_are_reinterpreted():
    """linear_epilogues' call gives its result the activation's storage: the views after
    it are metadata the kernels read through, never ATen calls."""
    from brrr_compiler.passes.linear_epilogues import WITH_EPILOGUES
    x = torch.randn(8, 4096, requires_grad=True)
    w = torch.randn(1024, 64, requires_grad=True)
    graphs = check_against_eager(
        lambda x, w: (x.view(512, 64) @ w.t()).relu().view(8, 64, 1024).transpose(0, 1) * 2,
        x, w, options={"passes": WITH_EPILOGUES})
    code = _runner(graphs, "forward")
    assert "_linear_pointwise" in code and "aten.view." not in code, code
