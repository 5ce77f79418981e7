"""A graph AOTAutograd cannot trace runs as eager runs it, with one warning: tracing the
joint graph fails on writes eager only objects to in backward (an input saved for
backward, then written in place), and the user must meet eager's behaviour, not a
compile error."""
import warnings

import pytest
import torch

from brrr_compiler import explain
from brrr_compiler.log import BrrrWarning


def max_then_write_the_saved_input(x, y):
    out = torch.maximum(x, y).sum().tanh()
    y[..., ::2].add_(1.0)       # maximum saved y for its backward
    return out


def _inputs():
    g = torch.Generator().manual_seed(4207)
    return (torch.randn(64, 31, generator=g).requires_grad_(),
            torch.randn(31, 64, generator=g).t())


def test_forward_matches_eager_with_one_warning():
    torch._dynamo.reset()
    x, y = _inputs()
    want = max_then_write_the_saved_input(x.detach(), y.clone())
    wanted_y = y.clone()
    wanted_y[..., ::2] += 1.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(max_then_write_the_saved_input, backend="brrr")(x, y)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(y, wanted_y)             # the write happened, as in eager
    ours = [w for w in caught if issubclass(w.category, BrrrWarning)]
    assert len(ours) == 1 and "AOTAutograd could not trace" in str(ours[0].message)


def test_backward_raises_what_eager_raises():
    torch._dynamo.reset()
    x, y = _inputs()
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as eager:
        max_then_write_the_saved_input(x, y.clone()).backward()
    x, y = _inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BrrrWarning)
        out = torch.compile(max_then_write_the_saved_input, backend="brrr")(x, y)
    with pytest.raises(type(eager.value), match="modified by an inplace operation"):
        out.backward()


def test_strict_raises_the_tracing_error():
    torch._dynamo.reset()
    fn = torch.compile(max_then_write_the_saved_input, backend="brrr",
                       options={"strict": True})
    with pytest.raises(Exception, match="modified by an inplace operation"):
        fn(*_inputs())


def test_explain_names_the_graph_that_ran_eagerly(monkeypatch):
    # explain runs backward too, where this graph fails as eager does: a tracer that
    # fails on a plain graph stands in for AOTAutograd
    from brrr_compiler import backend

    def untraceable(*args, **kwargs):
        def trace(gm, example_inputs):
            raise RuntimeError("cannot trace this graph\nsecond line")
        return trace

    torch._dynamo.reset()
    monkeypatch.setattr(backend, "aot_backend", untraceable)
    x = torch.randn(8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BrrrWarning)
        report = explain(lambda x: torch.maximum(x, x.t()).sum(), x)
    text = str(report)
    assert "AOTAutograd could not trace a graph (RuntimeError: cannot trace this graph)" in text
    assert "maximum" in text and "second line" not in text
