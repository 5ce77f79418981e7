"""conv_channels_last's timed choices (_conv_choice.py, _conv_timing.py): which
convolutions stay NCHW or go channels-last by what the timing answers, with values and
strides as eager's."""
import torch
import torch.nn.functional as F

from brrr_compiler.passes import _conv_choice, _conv_timing

from .conv_layout import CL, PASS, aten
from .conv_layout import check as _check
from .conv_layout import is_cl as _is_cl
from .conv_layout import layout_copies as _layout_copies
from .conv_layout import run_pass as _pass


def _timed(monkeypatch, answer, clearly=lambda shape: False):
    """The pass asks the timing (MEASURE on), which answers `answer` for every shape it
    asks of a paying convolution, and `clearly` for one that does not pay by arithmetic
    (whether channels-last was clearly faster). Returns the paying ones' questions."""
    monkeypatch.setattr(PASS, "MEASURE", True)
    asked = []

    def fake(x, w, stride, padding, dilation, groups, copy_weight, nhwc_in):
        asked.append((tuple(x.shape), tuple(w.shape), groups, copy_weight, nhwc_in))
        return answer(tuple(x.shape))

    def fake_clearly(x, w, stride, padding, dilation, groups, copy_weight, nhwc_in):
        return clearly(tuple(x.shape))
    monkeypatch.setattr(_conv_choice, "faster_channels_last", fake)
    monkeypatch.setattr(_conv_choice, "clearly_faster_channels_last", fake_clearly)
    monkeypatch.setattr(_conv_choice, "_NCHW_FORWARD", set())
    monkeypatch.setattr(_conv_choice, "_PAYING_FORWARD", set())
    return asked


def test_a_convolution_timed_faster_nchw_stays_nchw_and_gets_a_contiguous_input(monkeypatch):
    """The first convolution (8 input channels) timed faster channels-last, the second
    (16, strided) not: its input, channels-last after the first, is copied back to
    contiguous; values and strides as eager's."""
    asked = _timed(monkeypatch, lambda shape: shape[1] == 8)

    def fn(x, w1, w2):
        return F.conv2d(F.relu(F.conv2d(x, w1, padding=1)), w2, stride=2, padding=1).sum(1)

    args = (torch.randn(2, 8, 16, 16), torch.randn(16, 8, 3, 3), torch.randn(16, 16, 3, 3))
    gm = _pass(fn, *args)
    assert [a[0] for a in asked] == [(2, 8, 16, 16), (2, 16, 16, 16)]
    assert [a[3:] for a in asked] == [(True, False), (True, True)]   # input from the first
    convs = [n for n in gm.graph.nodes if n.target is aten.convolution.default]
    assert _is_cl(convs[0].meta["val"]) and convs[1].meta["val"].is_contiguous()
    assert convs[1].args[0].target is aten.clone.default
    assert convs[1].args[0].kwargs["memory_format"] is torch.contiguous_format
    _check(gm, fn, *args)


def test_a_convolution_timed_faster_nchw_before_a_channels_last_one_stays_channels_last(
        monkeypatch):
    """NCHW only for a run of convolutions to the end (_conv_choice.py): the first, timed
    faster NCHW, feeds one timed faster channels-last."""
    _timed(monkeypatch, lambda shape: shape[1] == 16)

    def fn(x, w1, w2):
        return F.conv2d(F.relu(F.conv2d(x, w1, padding=1)), w2, padding=1)

    args = (torch.randn(2, 8, 6, 6), torch.randn(16, 8, 3, 3), torch.randn(16, 16, 3, 3))
    gm = _pass(fn, *args)
    convs = [n for n in gm.graph.nodes if n.target is aten.convolution.default]
    assert all(_is_cl(c.meta["val"]) for c in convs)
    _check(gm, fn, *args)


def test_a_run_to_the_end_may_close_with_convolutions_that_do_not_pay(monkeypatch):
    """The first convolution, timed faster NCHW, is followed only by one that stays NCHW
    because copying its weight would not pay: both run NCHW, with no copy at all."""
    asked = _timed(monkeypatch, lambda shape: False)

    def fn(x, w1, w2):
        return F.conv2d(F.relu(F.conv2d(x, w1, padding=1)), w2, padding=1)

    args = (torch.randn(1, 16, 4, 4), torch.randn(16, 16, 3, 3), torch.randn(64, 16, 3, 3))
    gm = _pass(fn, *args)
    assert [a[0] for a in asked] == [(1, 16, 4, 4)]
    assert _layout_copies(gm) == []
    _check(gm, fn, *args)


def test_backward_convolutions_follow_their_forward_ones(monkeypatch):
    asked = _timed(monkeypatch, lambda shape: False)
    x, w = torch.randn(2, 8, 6, 6), torch.randn(16, 8, 3, 3)
    _pass(lambda x, w: F.conv2d(x, w, padding=1), x, w)        # the forward: NCHW

    def fn(g, x, w):
        return aten.convolution_backward.default(g, x, w, [16], [1, 1], [1, 1], [1, 1],
                                                 False, [0, 0], 1, [True, True, True])

    gm = _pass(fn, torch.randn(2, 16, 6, 6), x, w)
    assert len(asked) == 1                   # the forward's question only
    assert _layout_copies(gm) == []          # left NCHW, as its forward


def test_a_convolution_that_does_not_pay_goes_channels_last_where_timed_clearly_faster(
        monkeypatch):
    """ResNet's last stage at batch 1 on the AMD EPYC VM: the second convolution does too
    little arithmetic for its weight copy by the FLOP rule, but timed (copies counted)
    clearly faster channels-last; its weight is copied and it reads its input as the
    first convolution left it. Values and strides as eager's."""
    asked = _timed(monkeypatch, lambda shape: True, clearly=lambda shape: shape[1] == 64)

    def fn(x, w1, w2):
        return F.conv2d(F.relu(F.conv2d(x, w1, padding=1)), w2, stride=8, padding=1)

    args = (torch.randn(1, 8, 16, 16), torch.randn(64, 8, 3, 3) / 8, torch.randn(64, 64, 3, 3) / 24)
    gm = _pass(fn, *args)
    convs = [n for n in gm.graph.nodes if n.target is aten.convolution.default]
    assert all(_is_cl(c.meta["val"]) for c in convs)
    assert convs[1].args[0].target is aten.relu.default      # no copy back to NCHW
    assert convs[1].args[1].kwargs["memory_format"] is CL    # its weight copied
    assert [a[0] for a in asked] == [(1, 8, 16, 16), (1, 64, 16, 16)]
    _check(gm, fn, *args)


def test_backward_convolutions_follow_a_forward_one_timed_to_pay(monkeypatch):
    _timed(monkeypatch, lambda shape: True, clearly=lambda shape: True)
    x, w = torch.randn(1, 64, 2, 2), torch.randn(64, 64, 3, 3)
    fwd = _pass(lambda x, w: F.conv2d(x, w, padding=1), x, w)
    assert _layout_copies(fwd).count(CL) == 2                # input and weight

    def fn(g, x, w):
        return aten.convolution_backward.default(g, x, w, [64], [1, 1], [1, 1], [1, 1],
                                                 False, [0, 0], 1, [True, True, True])

    _timed(monkeypatch, lambda shape: True)                  # not asked again
    monkeypatch.setattr(_conv_choice, "_PAYING_FORWARD", {_conv_choice._key(
        [n for n in fwd.graph.nodes if n.target is aten.convolution.default][0])})
    args = (torch.randn(1, 64, 2, 2), x, w)
    gm = _pass(fn, *args)
    assert _layout_copies(gm).count(CL) == 3                 # grad_output, input, weight
    _check(gm, fn, *args)


def test_the_timing_answers_once_per_shape_and_takes_nhwc_past_its_budget(monkeypatch):
    monkeypatch.setattr(_conv_timing, "_answers", {})
    x, w = torch.empty(2, 8, 6, 6, device="meta"), torch.empty(16, 8, 3, 3, device="meta")
    first = _conv_timing.faster_channels_last(x, w, [1, 1], [1, 1], [1, 1], 1, True, True)
    assert isinstance(first, bool) and len(_conv_timing._answers) == 1
    assert _conv_timing.faster_channels_last(x, w, [1, 1], [1, 1], [1, 1], 1, True, True) == first
    clearly = _conv_timing.clearly_faster_channels_last(x, w, [1, 1], [1, 1], [1, 1], 1, True,
                                                        True)
    assert len(_conv_timing._answers) == 1 and (first or not clearly)   # one timing
    monkeypatch.setattr(_conv_timing, "MAX_TIMED_FLOP", 1.0)
    assert _conv_timing.faster_channels_last(x, w, [1, 1], [1, 1], [1, 1], 1, False) is True
    assert _conv_timing.clearly_faster_channels_last(x, w, [1, 1], [1, 1], [1, 1], 1, False)
