"""Dynamic shapes: sizes are kernel arguments, so new sizes reuse the built kernels.

A small transformer-ish block (linear, GELU, residual, layer norm, softmax over the
sequence) runs over five sequence lengths with `dynamic=True` and with
`torch._dynamo.mark_dynamic`; every length matches eager (outputs and gradients) and
the C++ compiler runs only for the first one. Guards behave as with other backends: a
new rank or dtype recompiles (and builds), a new size within the guards does not.
"""
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounterWithBackend
from torch.testing import assert_close

from tests.helpers import check_against_eager, clone_input, spy_builds

SEQ_LENS = (5, 7, 16, 33, 64)


class Block(torch.nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.up = torch.nn.Linear(dim, 2 * dim)
        self.down = torch.nn.Linear(2 * dim, dim)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, x):                          # x: [batch, seq, dim]
        h = self.norm(x + self.down(F.gelu(self.up(x))))
        scores = torch.softmax(h @ h.transpose(-1, -2) * 0.25, dim=-1)
        return scores @ h + h.sum(1, keepdim=True)


def _block():
    torch.manual_seed(0)
    return Block()


def _x(seq, batch=3, dim=16, requires_grad=True):
    gen = torch.Generator().manual_seed(seq)
    return torch.randn(batch, seq, dim, generator=gen).requires_grad_(requires_grad)


@pytest.fixture
def builds(monkeypatch):
    """Counts C++ compiler runs (cache misses)."""
    return spy_builds(monkeypatch)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BRRR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _train_step_matches(compiled, eager, x, mark_dim=None):
    """Outputs and input gradients match eager (float32 sums reassociate in the backward
    of a fused norm, as under inductor: a few ulp of the largest gradient)."""
    xb, xe = clone_input(x), clone_input(x)
    if mark_dim is not None:
        torch._dynamo.mark_dynamic(xb, mark_dim)
    out, ref = compiled(xb), eager(xe)
    assert_close(out, ref)
    cotangent = torch.randn(ref.shape, generator=torch.Generator().manual_seed(7))
    (out * cotangent).sum().backward()
    (ref * cotangent).sum().backward()
    assert_close(xb.grad, xe.grad, rtol=1e-5, atol=1e-5 * xe.grad.abs().max().item())


def _run_lengths(backend: str, how: str, builds: list) -> tuple[list, int]:
    """(C++ builds so far after each length, Dynamo graphs compiled) for one backend."""
    model = _block()
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(model, backend=counter, dynamic=True if how == "dynamic=True" else None)
    per_length = []
    for seq in SEQ_LENS:
        _train_step_matches(compiled, model, _x(seq), 1 if how == "mark_dynamic" else None)
        per_length.append(len(builds))
        for p in model.parameters():
            p.grad = None
    torch._dynamo.reset()
    return per_length, counter.frame_count


@pytest.mark.parametrize("how", ["dynamic=True", "mark_dynamic"])
def test_five_sequence_lengths_build_once(how, builds, fresh_cache):
    per_length, graphs = _run_lengths("brrr", how, builds)
    assert per_length[0] > 0, "the first length built no kernel"
    assert per_length == [per_length[0]] * len(SEQ_LENS), \
        f"C++ builds after each of the lengths {SEQ_LENS}: {per_length}"
    assert len(list(fresh_cache.glob("*/*.so"))) == per_length[0]
    _, aot_graphs = _run_lengths("aot_eager", how, [])
    assert graphs == aot_graphs, "guards: Dynamo compiled more graphs than for aot_eager"


def test_dynamic_kernels_take_sizes_as_arguments():
    """The kernels' C signatures carry the sequence length, not a baked-in number."""
    x = _x(SEQ_LENS[0], requires_grad=False)
    with torch._dynamo.config.patch(assume_static_by_default=False):   # as dynamic=True
        graphs = check_against_eager(lambda a: torch.softmax(a * 2, -1).sum(1) + a.mean(1), x)
    (graph,) = graphs
    assert graph.kernels
    assert "int64_t s" in graph.source, graph.source[-2000:]


def test_new_size_reuses_kernels_new_rank_and_dtype_rebuild(builds, fresh_cache):
    def f(a):
        return F.gelu(a * 3 + 1).sum(-1)

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="brrr", dynamic=True)
    for n in (4, 9, 130):
        a = torch.randn(n, 6)
        assert_close(compiled(a), f(a))
    first = len(builds)
    assert first > 0
    for shape, dtype in (((2, 3, 6), torch.float32), ((5, 6), torch.float64)):
        a = torch.randn(*shape, dtype=dtype)
        assert_close(compiled(a), f(a))
    assert len(builds) == first + 2, "a new rank and a new dtype each build once"
    a = torch.randn(11, 6, dtype=torch.float64)
    assert_close(compiled(a), f(a))
    assert len(builds) == first + 2, "a new size with a seen rank and dtype rebuilt"
    torch._dynamo.reset()


def test_size_one_and_zero_specialize_like_other_backends(builds, fresh_cache):
    """Dynamo specializes sizes 0 and 1; brrr gives eager's results across them."""
    def f(a, b):
        return torch.softmax(a, -1) * b.amax(0)

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="brrr", dynamic=True)
    for n in (3, 1, 0, 8):
        a, b = torch.randn(n, 5), torch.randn(4, 5)
        assert_close(compiled(a, b), f(a, b))
    torch._dynamo.reset()


def test_square_input_with_one_size_symbol():
    """Both dims of a square input share one size symbol, so index expressions hold
    s**2: the kernel must print it (not fall back to ATen)."""
    def fn(a, b):
        return F.silu(a) * b.t()

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="brrr", dynamic=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "brrr: .*instead", RuntimeWarning)
        for n in (6, 9):
            x, y = torch.randn(n, n).bfloat16(), torch.randn(n, n).bfloat16()
            assert_close(compiled(x, y), fn(x, y))
