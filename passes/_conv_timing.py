"""Whether a convolution runs faster channels-last on this machine, timed once per shape.

Note on why. Which layout oneDNN runs faster depends on the CPU and on the shape, by
factors either way, and no fixed rule held on both machines this project measures. On the
Intel Xeon VM (2026-12-06; benchmarks/results/notes.md, "Convolution layouts timed"), with
the weight copied to channels-last on every call as the pass does: 3x3 convolutions over
a batch of 16 ran 2.5x slower channels-last at 2x2 pixels (256 channels), 1.45x at 4x4,
even at 8x8, 0.86x at 16x16 and 0.32x at 32x32; at batch 1 channels-last lost at every
size up to 16x16; depthwise ones won at every size (0.39-0.61x). On an AMD EPYC the
model suite's conv net ran about twice as fast channels-last throughout. ResNet's last
stage (2x2 pixels, batch 16) spent more in its channels-last convolutions and weight
copies than the whole step gained elsewhere.

So the pass asks `faster_channels_last`, which times the forward convolution both ways
on random tensors of its shapes, a few alternating calls each. Each timed call pays the
copies its layout would: the weight copied to channels-last when the graph reads it from
an input (as on every call), and the input copied from the layout it arrives in:
channels-last when a convolution comes before it (the default's layout), else the graph
input's own. The weight copy is brrr's generated transposed copy, not eager's: timed as
COPY_PASSES plain copies of the weight, since calibrate measures brrr's transposed copies
at 1.9 (AMD EPYC) to 2.5 (Intel Xeon) times a plain one's time, while eager's
`contiguous(memory_format=channels_last)` of a (256, 256, 3, 3) weight took 5.8 plain
copies' time on the AMD EPYC VM (169 against 29 us; brrr's ~60). Timed with eager's
copy, ResNet's last stage at batch 1 stayed NCHW there, where channels-last with brrr's
copy ran 2x faster (a 3x3 convolution over 2x2 pixels, 256 channels: 120 us
channels-last, 390 NCHW, ATen's thnn path either way).

Channels-last stays the default: a convolution counts as faster NCHW only where its
median is at most NCHW_GAIN of channels-last's, and _conv_choice.py takes NCHW only for a
run of such convolutions to the end of the network, since the other ops of a
graph read the layout too. ConvNeXt's convolutions timed faster NCHW one by one (its 2x2
downsampling ones 1.2-1.9x, its depthwise ones 1.0x behind an NCHW input), but with all
of them NCHW its permutes to channels-last around each LayerNorm and Linear became copies
and the model ran 1.5x slower. Answers are kept per process; a convolution too long to
time (past MAX_TIMED_FLOP) stays channels-last, which won every such case measured.
"""
import statistics
import time

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

aten = torch.ops.aten

NCHW_GAIN = 0.8         # NCHW only where its median is at most this of channels-last's
COPY_PASSES = 2         # plain copies timed for one transposed weight copy of brrr's (note)
MAX_TIMED_FLOP = 4e8    # ~4-20 ms a call on 2 cores: longer ones are not timed
ROUNDS = 5              # alternating timed calls per layout, after one untimed call each

_answers: dict[tuple, float] = {}     # key -> NCHW's median over channels-last's


def faster_channels_last(x: torch.Tensor, w: torch.Tensor, stride, padding, dilation,
                         groups: int, copy_weight: bool, input_nhwc: bool = False) -> bool:
    """Whether the convolution of an input shaped as `x` by a weight shaped as `w` (meta or
    fake tensors; only shapes and dtype are read) ran faster channels-last, the weight
    copied to that layout in each call where `copy_weight`, the input copied from
    channels-last to NCHW (`input_nhwc`) or back (module note): not NCHW_GAIN faster NCHW."""
    return _ratio(x, w, stride, padding, dilation, groups, copy_weight, input_nhwc) > NCHW_GAIN


def clearly_faster_channels_last(x: torch.Tensor, w: torch.Tensor, stride, padding,
                                 dilation, groups: int, copy_weight: bool,
                                 input_nhwc: bool = False) -> bool:
    """As faster_channels_last, the other way round: channels-last's median at most
    NCHW_GAIN of NCHW's, for a convolution whose arithmetic does not obviously repay its
    copies (conv_channels_last.py `_pays`)."""
    ratio = _ratio(x, w, stride, padding, dilation, groups, copy_weight, input_nhwc)
    return ratio * NCHW_GAIN >= 1.0


def _ratio(x, w, stride, padding, dilation, groups, copy_weight, input_nhwc) -> float:
    key = (tuple(x.shape), tuple(w.shape), x.dtype, tuple(stride), tuple(padding),
           tuple(dilation), int(groups), bool(copy_weight), bool(input_nhwc),
           torch.get_num_threads())
    if key not in _answers:
        _answers[key] = _timed(key)
    return _answers[key]


def _timed(key: tuple) -> float:
    xs, ws, dtype, stride, padding, dilation, groups, copy_weight, input_nhwc, _ = key
    out_pixels = xs[0] * ws[0]
    for size, k, s, p, d in zip(xs[2:], ws[2:], stride, padding, dilation):
        out_pixels *= max((size + 2 * p - d * (k - 1) - 1) // s + 1, 0)
    if 2 * out_pixels * ws[1] * ws[2] * ws[3] > MAX_TIMED_FLOP:
        return float("inf")
    cl = torch.channels_last
    with unset_fake_temporarily(), torch.no_grad():
        g = torch.Generator().manual_seed(0)
        x = torch.randn(xs, generator=g).to(dtype)
        w = torch.randn(ws, generator=g).to(dtype)
        x_cl, w_cl = x.contiguous(memory_format=cl), w.contiguous(memory_format=cl)

        def conv(a, b):
            return aten.convolution.default(a, b, None, list(stride), list(padding),
                                            list(dilation), False, [0, 0], groups)

        def nchw():
            return conv(x_cl.contiguous() if input_nhwc else x, w)

        def nhwc():
            for _ in range(COPY_PASSES if copy_weight else 0):
                w.clone()
            return conv(x_cl if input_nhwc else x.contiguous(memory_format=cl), w_cl)

        calls = {"nchw": nchw, "nhwc": nhwc}
        times: dict[str, list[float]] = {k: [] for k in calls}
        for f in calls.values():
            f()
        for _ in range(ROUNDS):
            for name, f in calls.items():
                start = time.perf_counter()
                f()
                times[name].append(time.perf_counter() - start)
    return statistics.median(times["nchw"]) / statistics.median(times["nhwc"])
