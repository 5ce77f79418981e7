"""The runner calls ATen ops through torch's bindings where fast_aten lists one; each
binding computes what its OpOverload computes, and the runner's code shows which ran."""
import torch
from torch.testing import assert_close

from brrr_compiler.runtime.fast_aten import FAST, fast_target
from tests.helpers import check_against_eager

aten = torch.ops.aten


def _samples():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)
    return [
        (aten.mm.default, (r(3, 4), r(4, 5)), {}),
        (aten.addmm.default, (r(5), r(3, 4), r(4, 5)), {"beta": 0.5, "alpha": 2}),
        (aten.bmm.default, (r(2, 3, 4), r(2, 4, 5)), {}),
        (aten.mv.default, (r(3, 4), r(4)), {}),
        (aten.convolution.default, (r(1, 2, 5, 5), r(3, 2, 3, 3), r(3), [1, 1], [1, 1],
                                    [1, 1], False, [0, 0], 1), {}),
        (aten.native_layer_norm.default, (r(4, 6), [6], r(6), r(6), 1e-5), {}),
        (aten._softmax.default, (r(4, 6), 1, False), {}),
        (aten.amax.default, (r(4, 6), [0], True), {}),
        (aten.cat.default, ([r(2, 3), r(1, 3)], 0), {}),
        (aten.clone.default, (r(2, 3).t(),), {"memory_format": torch.contiguous_format}),
        (aten.max_pool2d_with_indices.default, (r(1, 2, 6, 6), [2, 2], [2, 2]), {}),
        (aten.constant_pad_nd.default, (r(2, 3), [1, 2], 0.5), {}),
    ]


def test_each_binding_computes_what_its_overload_computes():
    for op, args, kwargs in _samples():
        assert op in FAST, op
        want, got = op(*args, **kwargs), fast_target(op)(*args, **kwargs)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want), op
        for w, g in zip(want, got):
            assert_close(g, w, rtol=0, atol=0)
            assert g.stride() == w.stride(), op


def test_other_targets_are_kept():
    assert fast_target(aten.mm.out) is aten.mm.out
    assert fast_target(aten.index.Tensor) is aten.index.Tensor


def test_runner_calls_the_binding():
    def f(x, w, v):
        h = (x @ w).relu()
        return h @ v, torch.cat([h, h])

    graphs = check_against_eager(f, torch.randn(4, 6), torch.randn(6, 8), torch.randn(8))
    code = graphs[0].runner_code
    assert "torch.mm(" in code and "torch.mv(" in code, code
    assert "torch.ops.aten.mm" not in code, code
