"""brrr_compiler/eager_strides.py: pointwise ops get the strides eager's kernels give
them, where FakeTensor's Python references lay them out otherwise (they upcast
float16/bfloat16 inputs into dense copies first, and keep or drop size-1 dims' strides
by rules of their own, which a later op's layout can turn on)."""
import pytest
import torch

from brrr_compiler.eager_strides import follow_eager
from tests.helpers import aten_graph, check_against_eager

DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def _dtype_id(dt) -> str:
    return str(dt).removeprefix("torch.")


def _step_sliced_and_expanded(dtype):
    g = torch.Generator().manual_seed(48)
    a = torch.randn(4, 1, 2, generator=g).to(dtype)[..., 1::2]     # strides (2, 2, 2)
    b = torch.randn(1, 1, 1, generator=g).to(dtype).expand(1, 3, 1)
    return a, b


def minimum_of_sliced_sum(a, b):
    # the sum's size-1 dims get eager's strides, and the minimum breaks its ties by them
    return torch.minimum(a + a[..., ::2], b) + -1.0


def broadcast_plus_transposed(a, b):
    return (a.expand(5, 17, 17) + b.transpose(1, 2)).transpose(0, 1) * 2


def _broadcast_and_transposed(dtype):
    g = torch.Generator().manual_seed(1)
    return (torch.randn(1, 17, 1, generator=g).to(dtype),
            torch.randn(5, 17, 17, generator=g).to(dtype))


def divide_by_a_sliced_abs(a, b):
    # abs of a step-sliced (4, 3, 1, 1): eager's strides are contiguous, FakeTensor keeps
    # the slice's 2 in the last dim, and the division then breaks its ties by it
    return b / (a[..., ::2].abs() + 1)


def _four_dims(dtype):
    g = torch.Generator().manual_seed(1920)
    return (torch.randn(4, 3, 1, 1, generator=g).to(dtype),
            torch.randn(4, 1, 8, 1, generator=g).to(dtype))


def lerp_of_expanded_and_transposed(a, b):
    # torch decomposes lerp; its reference lays the result out contiguous, eager's
    # TensorIterator keeps b's transposed layout (a's broadcast dim decides nothing)
    return torch.lerp(a.expand(64, 7), b.t(), 0.25) + 0.5


def _row_and_transposed(dtype):
    g = torch.Generator().manual_seed(4064)
    return torch.randn(1, 7, generator=g).to(dtype), torch.randn(7, 64, generator=g).to(dtype)


CASES = {
    "minimum_of_sliced_sum": (minimum_of_sliced_sum, _step_sliced_and_expanded),
    "broadcast_plus_transposed": (broadcast_plus_transposed, _broadcast_and_transposed),
    "divide_by_a_sliced_abs": (divide_by_a_sliced_abs, _four_dims),
    "lerp_of_expanded_and_transposed": (lerp_of_expanded_and_transposed, _row_and_transposed),
}


class _RealStrides(torch.fx.Interpreter):
    """Each node's strides when the graph runs on real tensors (eager's kernels)."""

    def __init__(self, gm):
        super().__init__(gm)
        self.strides = {}

    def run_node(self, n):
        out = super().run_node(n)
        if n.op == "call_function" and isinstance(out, torch.Tensor):
            self.strides[n.name] = out.stride()
        return out


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("name", list(CASES))
def test_every_node_has_eagers_strides(name, dtype):
    fn, make = CASES[name]
    args = make(dtype)
    gm = follow_eager(aten_graph(fn, *args))
    real = _RealStrides(gm)
    real.run(*args)
    fake = {n.name: n.meta["val"].stride() for n in gm.graph.nodes
            if isinstance(n.meta.get("val"), torch.Tensor)}
    assert real.strides and {k: fake[k] for k in real.strides} == real.strides


def test_fake_tensors_with_eagers_strides_are_kept():
    gm = aten_graph(lambda x, y: (x * y + 1).sin().t() * 2, torch.randn(4, 5), torch.randn(5))
    before = {n.name: n.meta.get("val") for n in gm.graph.nodes}
    follow_eager(gm)
    assert all(n.meta.get("val") is before[n.name] for n in gm.graph.nodes)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("name", list(CASES))
def test_outputs_have_eagers_strides(name, dtype):
    fn, make = CASES[name]
    check_against_eager(fn, *make(dtype), grad=False, strict=True)


def amin_gradient_through_a_transpose(x):
    # the backward's ATen calls build a transposed view of a sum whose bfloat16 strides
    # FakeTensor got wrong: the gradient went to the wrong elements
    v = x + -1.0
    t = v.mT
    return (t * 2 - v).amin(2), t.sum()


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
def test_gradient_through_views_of_low_precision_values(dtype):
    x = torch.randn(5, 17, 17, generator=torch.Generator().manual_seed(655)).to(dtype)
    check_against_eager(amin_gradient_through_a_transpose, x.requires_grad_(), strict=True,
                        allow_fallback=True, reference=True)


# ops brrr decomposes, whose result must still be laid out as eager's kernel lays it out
# (the reference's own rule differs for an expanded and a transposed operand)
DECOMPOSED = {
    "logaddexp": torch.logaddexp,
    "hypot": torch.hypot,
    "lerp": lambda a, b: torch.lerp(a, b, 0.25),
    "addcmul": lambda a, b: torch.addcmul(a, b, b, value=0.5),
    "mse_loss": lambda a, b: torch.nn.functional.mse_loss(a, b, reduction="none"),
    "smooth_l1_loss": lambda a, b: torch.nn.functional.smooth_l1_loss(a, b, reduction="none"),
    "huber_loss": lambda a, b: torch.nn.functional.huber_loss(a, b, reduction="none"),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("name", list(DECOMPOSED))
def test_decomposed_ops_keep_eagers_layout(name, dtype):
    a, b = _row_and_transposed(dtype)
    check_against_eager(DECOMPOSED[name], a.expand(64, 7), b.t(), grad=False, strict=True,
                        reference=True, kernels=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
def test_log_sigmoid_of_a_transposed_input_is_contiguous_as_in_eager(dtype):
    # eager's CPU kernel makes a contiguous result; the fake kernel follows the input
    x = torch.randn(9, 6, generator=torch.Generator().manual_seed(0)).to(dtype).t()
    check_against_eager(torch.nn.functional.logsigmoid, x.requires_grad_(dtype is torch.float32),
                        strict=True, reference=True)


def _batch_norm_inputs(layout):
    g = torch.Generator().manual_seed(0)
    if layout == "transposed_2d":
        return torch.randn(9, 6, generator=g).t()
    if layout == "transposed_3d":
        return torch.randn(2, 5, 9, generator=g).transpose(1, 2)
    return torch.randn(2, 9, 4, 5, generator=g).to(memory_format=torch.channels_last)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("layout", ["transposed_2d", "transposed_3d", "channels_last"])
def test_batch_norm_output_in_the_inputs_suggested_format(layout, training):
    # eager's CPU kernel: a transposed input gives a contiguous output, channels-last stays
    import copy
    bn = torch.nn.BatchNorm1d(9) if layout != "channels_last" else torch.nn.BatchNorm2d(9)
    bn.train(training)
    twin = copy.deepcopy(bn)
    x = _batch_norm_inputs(layout).requires_grad_()
    x2 = x.detach().clone(memory_format=torch.preserve_format).requires_grad_()
    torch._dynamo.reset()
    expected, actual = bn(x), torch.compile(twin, backend="brrr")(x2)
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual, expected)
    expected.square().sum().backward()
    actual.square().sum().backward()
    assert x2.grad.stride() == x.grad.stride()
    torch.testing.assert_close(x2.grad, x.grad)
    torch.testing.assert_close(twin.weight.grad, bn.weight.grad)
    torch.testing.assert_close(twin.running_mean, bn.running_mean)


def test_the_layout_sweep_runs_and_finds_nothing_on_a_slice():
    # benchmarks/layout_sweep.py sweeps every decomposed op; a slice of it here
    from benchmarks import layout_sweep
    assert layout_sweep.run(["lerp", "logsigmoid", "batch_norm_eval"], ["bfloat16"]) == []


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_of_a_transposed_difference_is_contiguous_as_eager(dtype, op):
    """Eager's softmax kernels write contiguous results. In float16/bfloat16 the
    difference below is contiguous to FakeTensor until eager_strides makes it transposed,
    after the decomposition's x.contiguous() had recorded nothing (fuzz seed 26543:
    brrr's result came out transposed)."""
    gen = torch.Generator().manual_seed(1)
    x0 = torch.randn(2, 2, 1, generator=gen).to(dtype).expand(2, 2, 5)
    x1 = torch.randn(1, 5, 2, generator=gen).to(dtype).transpose(-1, -2)
    check_against_eager(lambda a, b: getattr(a - b, op)(2), x0, x1, grad=False)


def write_into_a_row_of_a_difference(a, b):
    v = a[..., ::2].t() - b
    v.select(0, 0).mul_(-1)
    return torch.relu(v)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
def test_a_write_into_a_restrided_value_keeps_its_eager_layout(dtype):
    """The in-place mul becomes a select_scatter over the difference, which brrr writes
    as a cat laid out as the difference was traced: row-major in float16/bfloat16, where
    eager's (and eager_strides', later) is transposed. The cat must follow the corrected
    layout, as eager's select_scatter would (fuzz seed 311835: brrr's result was (31, 1)-
    strided, eager's (1, 50))."""
    gen = torch.Generator().manual_seed(311835)
    a = torch.randn(31, 1, generator=gen).to(dtype).expand(31, 100)
    b = torch.randn(31, 50, generator=gen).to(dtype).t()
    check_against_eager(write_into_a_row_of_a_difference, a.requires_grad_(),
                        b.requires_grad_(), grad=True, strict=True)
