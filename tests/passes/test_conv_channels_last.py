"""conv_channels_last: eligible CPU convolutions run NHWC; values, user-visible strides and
every node's meta["val"] stay true to what the graph computes."""
import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import assert_close

from brrr_compiler.passes import LAYOUT_FREE_OUTPUTS, run_pipeline

from .conv_layout import CL, StrideCheck, aten
from .conv_layout import check as _check
from .conv_layout import is_cl as _is_cl
from .conv_layout import layout_copies as _layout_copies
from .conv_layout import run_pass as _pass


def _conv_bn_relu(x, w, mean, var):
    y = F.conv2d(x, w, padding=1)
    return F.relu(F.batch_norm(y, mean, var, training=False)) * 2


def _inputs(n=2, c=8, hw=6, k=16):
    return (torch.randn(n, c, hw, hw), torch.randn(k, c, 3, 3), torch.randn(k),
            torch.rand(k) + 0.5)


def test_conv_runs_channels_last_and_output_keeps_eager_strides():
    args = _inputs()
    gm = _pass(_conv_bn_relu, *args)
    conv = next(n for n in gm.graph.nodes if n.target is aten.convolution.default)
    assert all(a.meta["val"].is_contiguous(memory_format=CL) for a in conv.args[:2])
    assert conv.meta["val"].is_contiguous(memory_format=CL)
    assert _layout_copies(gm) == [CL, CL, torch.contiguous_format]
    _check(gm, _conv_bn_relu, *args)


def test_free_output_keeps_the_new_layout():
    args = _inputs()
    gm = _pass(_conv_bn_relu, *args, free=(0,))
    assert _layout_copies(gm) == [CL, CL]
    out = StrideCheck(gm).run(*args)
    assert out.is_contiguous(memory_format=CL)
    assert_close(out, _conv_bn_relu(*args), rtol=1e-4, atol=1e-5)


def test_flatten_after_conv_gets_a_contiguous_copy():
    def fn(x, w):
        return F.conv2d(x, w).relu().flatten(1) @ torch.ones(16 * 4 * 4, 3)

    args = (torch.randn(2, 8, 6, 6), torch.randn(16, 8, 3, 3))
    gm = _pass(fn, *args)
    view = next(n for n in gm.graph.nodes if n.target is aten.view.default)
    assert view.args[0].target is aten.clone.default
    _check(gm, fn, *args)


def test_second_conv_reads_first_convs_layout_without_a_copy():
    def fn(x, w1, w2):
        return F.conv2d(F.conv2d(x, w1, padding=1).relu(), w2)

    args = (torch.randn(2, 4, 8, 8), torch.randn(8, 4, 3, 3), torch.randn(8, 8, 3, 3))
    gm = _pass(fn, *args)
    assert _layout_copies(gm) == [CL, CL, CL, torch.contiguous_format]   # x, w1, w2, out
    _check(gm, fn, *args)


def test_weight_copy_is_made_right_before_its_convolution():
    """A weight's layout copy sits right before the convolution that reads it, not at the
    top of the graph, so no two weights' copies are alive at once."""
    def fn(x, w1, w2):
        return F.conv2d(F.conv2d(x, w1, padding=1).relu(), w2)

    args = (torch.randn(2, 4, 8, 8), torch.randn(8, 4, 3, 3), torch.randn(8, 8, 3, 3))
    gm = _pass(fn, *args)
    nodes = list(gm.graph.nodes)
    for conv in (n for n in nodes if n.target is aten.convolution.default):
        weight = conv.args[1]
        assert weight.target is aten.clone.default and weight.args[0].op == "placeholder"
        assert nodes.index(weight) == nodes.index(conv) - 1
    _check(gm, fn, *args)


def test_channels_last_input_is_not_copied():
    args = (torch.randn(2, 8, 6, 6).contiguous(memory_format=CL), torch.randn(16, 8, 3, 3))
    gm = _pass(lambda x, w: F.conv2d(x, w), *args)
    assert _layout_copies(gm) == [CL]          # the weight only; eager's output is NHWC too
    _check(gm, lambda x, w: F.conv2d(x, w), *args)


def test_convolution_backward_runs_channels_last():
    def fn(g, x, w):
        return aten.convolution_backward.default(g, x, w, [0], [1, 1], [1, 1], [1, 1], False,
                                                 [0, 0], 1, [True, True, False])[:2]

    args = (torch.randn(2, 16, 6, 6), torch.randn(2, 8, 6, 6), torch.randn(16, 8, 3, 3))
    gm = _pass(fn, *args)
    bw = next(n for n in gm.graph.nodes if n.target is aten.convolution_backward.default)
    assert all(a.meta["val"].is_contiguous(memory_format=CL) for a in bw.args[:3])
    _check(gm, fn, *args)


@pytest.mark.parametrize("case", ["conv1d", "transposed", "float64", "symbolic"])
def test_ineligible_convolutions_are_left_alone(case):
    fn, args, mode = (lambda x, w: F.conv2d(x, w)), _inputs()[:2], "fake"
    if case == "conv1d":
        fn, args = (lambda x, w: F.conv1d(x, w)), (torch.randn(2, 8, 6), torch.randn(4, 8, 3))
    elif case == "transposed":
        fn, args = (lambda x, w: F.conv_transpose2d(x, w)), (args[0], torch.randn(8, 4, 3, 3))
    elif case == "float64":
        args = tuple(a.double() for a in args)
    else:
        mode = "symbolic"
    gm = _pass(fn, *args, tracing_mode=mode)
    assert _layout_copies(gm) == []
    assert_close(gm(*args), fn(*args))


def test_output_of_other_strides_is_copied_back_into_them():
    """An output whose eager strides are neither contiguous nor channels-last (a
    transposed view of the convolution) gets a copy into an empty tensor of its strides."""
    def fn(x, w):
        return F.conv2d(x, w).transpose(1, 2)

    args = (torch.randn(2, 8, 6, 6), torch.randn(16, 8, 3, 3))
    gm = _pass(fn, *args)
    assert aten.empty_strided.default in [n.target for n in gm.graph.nodes]
    _check(gm, fn, *args)


def test_only_values_downstream_of_a_layout_change_are_recomputed():
    """A branch the convolution does not reach keeps its FakeTensors (not run again); the
    values after the convolution get new ones, and every stride still matches a real run."""
    def fn(x, w, z):
        a = (z * 2).view(-1)              # independent of the convolution
        return F.conv2d(x, w, padding=1).relu(), a + 1

    args = (*_inputs()[:2], torch.randn(3, 4))
    gm = make_fx(fn, tracing_mode="fake")(*args)
    before = {n.name: n.meta.get("val") for n in gm.graph.nodes}
    gm.meta[LAYOUT_FREE_OUTPUTS] = ()
    gm = run_pipeline(gm, ("conv_channels_last",))
    vals = {n.name: n.meta.get("val") for n in gm.graph.nodes}
    assert _layout_copies(gm)
    kept = [name for name, v in vals.items() if v is before.get(name)]
    assert {"mul", "view", "add"} <= set(kept), kept
    assert vals["relu"] is not before["relu"] and vals["relu"].is_contiguous(memory_format=CL)
    _check(gm, fn, *args)


def test_a_convolution_whose_copies_outweigh_its_arithmetic_stays_as_it_is():
    """bench_sweep's conv2d: a (41668, 2, 3, 4) weight over a (1, 2, 4, 3) image does
    1 FLOP per byte its copies would move on every call (MIN_FLOPS_PER_COPIED_BYTE)."""
    def fn(x, w):
        return F.conv2d(x, w, None, 2, 1, 1)

    args = (torch.randn(1, 2, 4, 3), torch.randn(4000, 2, 3, 4))
    gm = _pass(fn, *args)
    assert _layout_copies(gm) == []
    _check(gm, fn, *args)


def test_a_convolution_that_does_not_pay_after_a_channels_last_one_reads_nchw():
    """ResNet's last stage at batch 1: the second convolution (a 64x64x3x3 weight giving
    2x2 pixels) does too little arithmetic to copy its weight to channels-last; its input,
    channels-last after the first convolution, is copied back to contiguous, or ATen would
    copy the weight itself on every call to follow the input's layout."""
    def fn(x, w1, w2):
        return F.conv2d(F.relu(F.conv2d(x, w1, padding=1)), w2, stride=8, padding=1)

    args = (torch.randn(1, 8, 16, 16), torch.randn(64, 8, 3, 3) / 8, torch.randn(64, 64, 3, 3) / 24)
    gm = _pass(fn, *args)
    convs = [n for n in gm.graph.nodes if n.target is aten.convolution.default]
    assert _is_cl(convs[0].meta["val"]) and convs[1].meta["val"].is_contiguous()
    assert convs[1].args[1].op == "placeholder"           # the weight is read as it is
    assert convs[1].args[0].kwargs["memory_format"] is torch.contiguous_format
    _check(gm, fn, *args)


def test_a_convolution_that_does_not_pay_keeps_a_larger_input_channels_last():
    """The second convolution (stride 32: 2x2 pixels out) does not pay for its weight
    copy either, but its channels-last input (128 KB) outweighs its weight (4.6 KB):
    ATen's copy of the weight is the cheaper one, so the input is not copied back."""
    def fn(x, w1, w2):
        return F.conv2d(F.relu(F.conv2d(x, w1, padding=1)), w2, stride=32)

    args = (torch.randn(1, 3, 64, 64), torch.randn(8, 3, 3, 3) / 4, torch.randn(16, 8, 3, 3) / 8)
    gm = _pass(fn, *args)
    second = [n for n in gm.graph.nodes if n.target is aten.convolution.default][1]
    assert second.args[0].target is aten.relu.default, second.args[0]
    assert _is_cl(second.args[0].meta["val"])
    _check(gm, fn, *args)
