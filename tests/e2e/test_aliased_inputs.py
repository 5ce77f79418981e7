"""Aliasing, mutation and views at the graph's boundary: the same tensor passed twice,
overlapping views of one buffer, inputs mutated in place (aliased too), outputs that are
views of inputs and stay views; brrr's outputs and the inputs after the call as eager's.
"""
import pytest
import torch
from torch.testing import assert_close

from tests.e2e.graph_checks import randn
from tests.helpers import check_against_eager

def _run_both(fn, make_args):
    """(eager outputs, eager args after the call), (brrr outputs, brrr args after)."""
    torch._dynamo.reset()
    eager_args, brrr_args = make_args(), make_args()
    expected = fn(*eager_args)
    actual = torch.compile(fn, backend="brrr")(*brrr_args)
    torch._dynamo.reset()
    return (expected, eager_args), (actual, brrr_args)


def _assert_same(a, b):
    for x, y in zip(a if isinstance(a, (tuple, list)) else [a],
                    b if isinstance(b, (tuple, list)) else [b]):
        if isinstance(y, torch.Tensor):
            assert_close(x, y, equal_nan=True)


def test_same_tensor_passed_twice():
    def make():
        t = randn(6, 5, grad=False)
        return t, t

    (exp, _), (act, _) = _run_both(lambda a, b: (a * b + a).sum(-1) + b.amax(-1), make)
    _assert_same(act, exp)


def test_inputs_are_overlapping_views_of_one_buffer():
    def make():
        base = randn(8, 6, grad=False)
        return base[1:], base[:-1].t(), base

    fn = lambda a, b, c: (a * 2 + b.t(), torch.softmax(a + c[:-1], -1))  # noqa: E731
    (exp, _), (act, _) = _run_both(fn, make)
    _assert_same(act, exp)


def test_in_place_mutation_of_inputs():
    def fn(x, y, stats):
        x.mul_(2).add_(1)                 # an input mutated in place
        stats.copy_(x.mean(0))            # written through a reduction
        y[1:].clamp_(max=0.5)             # a slice of an input mutated
        return torch.softmax(x * y, -1)

    make = lambda: (randn(6, 5, grad=False), randn(6, 5, seed=1, grad=False),  # noqa: E731
                    torch.zeros(5))
    (exp, eargs), (act, bargs) = _run_both(fn, make)
    _assert_same(act, exp)
    _assert_same(bargs, eargs)


def test_in_place_mutation_of_aliased_inputs():
    def fn(a, b):
        a.mul_(2)                         # b is a view of a: it sees the update
        b.add_(1)                         # and a sees b's
        return b * 2, a.sum()

    def make():
        base = torch.arange(12.0)
        return base, base[3:9]

    (exp, eargs), (act, bargs) = _run_both(fn, make)
    _assert_same(act, exp)
    _assert_same(bargs, eargs)


def test_outputs_that_are_views_of_inputs():
    def fn(x):
        return x[1:], x.t(), x.view(-1), x * 2

    make = lambda: (randn(4, 6, grad=False),)  # noqa: E731
    (exp, eargs), (act, bargs) = _run_both(fn, make)
    _assert_same(act, exp)
    for out in act[:3]:
        assert out.untyped_storage().data_ptr() == bargs[0].untyped_storage().data_ptr(), \
            "a view of an input came back as a copy"
    for out, ref in zip(act, exp, strict=True):
        assert out.stride() == ref.stride() and out.storage_offset() == ref.storage_offset()


def test_view_output_then_mutated():
    def fn(x):
        v = x[:, 1:]
        v.mul_(3)
        return v, x.sum()

    make = lambda: (randn(3, 4, grad=False),)  # noqa: E731
    (exp, eargs), (act, bargs) = _run_both(fn, make)
    _assert_same(act, exp)
    _assert_same(bargs, eargs)
    act[0].add_(1)                        # still a view: writes show through
    assert_close(bargs[0][:, 1:], act[0])


@pytest.mark.parametrize("grad", [False, True])
def test_index_fill_of_a_permuted_strided_view_keeps_eagers_layout(grad):
    """Fuzz seed 72400: index_fill_ on a permuted view of a step-sliced input, then lerp and
    a broadcast product. Eager's index_fill keeps a non-dense self's stride order (its
    FakeTensor said contiguous), and the layouts after it follow (decompositions.py,
    decomposition_layout.py)."""
    g = torch.Generator().manual_seed(72400)
    x0 = torch.randn((7, 64, 200), generator=g)[..., 1::2]
    b, idx, y = torch.randn((1, 64, 1), generator=g), torch.tensor([3, 50, 99]), \
        torch.randn((100, 64, 7), generator=g, requires_grad=grad)

    def f(x0, b, idx, y):
        v = x0.permute(2, 1, 0)
        v.index_fill_(0, idx, -2.0)
        return torch.lerp(v, y, 0.25) * b

    check_against_eager(f, x0, b, idx, y, grad=grad, strict=True)
