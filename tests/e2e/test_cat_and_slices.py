"""Cats, rotary embeddings and slice gradients: a cat's innermost loop splits at its
pieces' boundaries (transforms/split.py), each piece bit-exact against eager; cats along outer
dims, of many pieces and read through a slice; slice_backward as a fused cat.
"""
import pytest
import torch

from tests.helpers import check_against_eager


def rotary(x, cos, sin):
    """Rotate-half rotary embedding over (batch, seq, heads, dim) by (seq, dim) tables."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


def rotary_inputs(shape, dtype=torch.float32, layout="contiguous"):
    gen = torch.Generator().manual_seed(sum(shape))
    b, s, h, d = shape
    x = {"contiguous": lambda: torch.randn(b, s, h, d, generator=gen),
         "transposed": lambda: torch.randn(b, h, s, d, generator=gen).transpose(1, 2),
         "sliced": lambda: torch.randn(b, s, h, 2 * d + 1, generator=gen)[..., 1::2]}[layout]()
    cos, sin = torch.randn(s, d, generator=gen), torch.randn(s, d, generator=gen)
    # the tables' gradients are sums over batch and heads (not bit-exact): x's alone
    return [x.to(dtype).requires_grad_(), cos.to(dtype), sin.to(dtype)]


def _simd_loops(graphs) -> int:
    """How many innermost loops the forward graph's kernels print (a split loop: several)."""
    return graphs[0].source.count("#pragma omp simd")


@pytest.mark.parametrize("shape", [(1, 128, 8, 64), (2, 5, 3, 62), (2, 5, 3, 66),
                                   (2, 5, 3, 2), (2, 5, 3, 63), (1, 3, 2, 9000)],
                         ids=lambda s: "x".join(map(str, s)))
def test_rotary_cat_split_bit_exact(shape):
    """The cat's innermost loop splits at the halves (transforms/split.py); every piece must
    read exactly what eager reads, odd and unequal halves and several tiles included."""
    graphs = check_against_eager(rotary, *rotary_inputs(shape), atol=0, rtol=0)
    assert _simd_loops(graphs) == 2


@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_rotary_cat_split_non_contiguous(layout):
    graphs = check_against_eager(rotary, *rotary_inputs((2, 6, 3, 34), layout=layout),
                                 atol=0, rtol=0)
    assert _simd_loops(graphs) == 2


def test_rotary_cat_split_bfloat16():
    x, cos, sin = rotary_inputs((2, 6, 3, 34), torch.bfloat16)
    check_against_eager(rotary, x, cos, sin)
    # one rounding per element (a negation is exact): bit-exact in bfloat16 too
    graphs = check_against_eager(lambda x, s: torch.cat((-x[..., 17:], x[..., :17]), -1) * s,
                                 x, sin[:, None, :], atol=0, rtol=0)
    assert _simd_loops(graphs) == 2


def test_cat_three_unequal_pieces_last_dim():
    gen = torch.Generator().manual_seed(3)
    a, b, c = (torch.randn(4, 7, n, generator=gen, requires_grad=True) for n in (5, 11, 3))
    w = torch.randn(19, generator=gen)
    graphs = check_against_eager(
        lambda a, b, c: torch.cat((a * 2, -b, c + 1), dim=-1) * w, a, b, c, atol=0, rtol=0)
    assert _simd_loops(graphs) == 3


def test_cat_read_through_a_slice_splits_at_shifted_boundaries():
    """The cat's output is read from column 3 on: its pieces end at 5 - 3 and 16 - 3."""
    gen = torch.Generator().manual_seed(4)
    a, b, c = (torch.randn(4, 7, n, generator=gen) for n in (5, 11, 3))
    graphs = check_against_eager(
        lambda a, b, c: torch.cat((a, -b, c), dim=-1)[..., 3:] * 2, a, b, c, grad=False,
        atol=0, rtol=0)
    assert _simd_loops(graphs) == 3


@pytest.mark.parametrize("dim", [0, 1])
def test_cat_along_an_outer_dim_copies_its_loop_per_side(dim):
    # the side is a loop-invariant select, which gcc vectorizes only as two loops
    # (codegen/cpp_unswitch.py): no split of the inner loop, one copy per side
    gen = torch.Generator().manual_seed(5)
    a, b = torch.randn(3, 4, 33, generator=gen), torch.randn(3, 4, 33, generator=gen)
    graphs = check_against_eager(lambda a, b: torch.cat((a * 2, -b), dim=dim) + 1, a, b,
                                 grad=False, atol=0, rtol=0)
    assert _simd_loops(graphs) == 2 and "if (" in graphs[0].source


def test_cat_of_many_inputs_keeps_one_loop():
    """Past MAX_PIECES pieces (transforms/split.py) the loop stays whole, clamped and selected.
    gcc 12 with both -fno-tree-sink and -fno-thread-jumps, tuned for AVX2, read one element
    from another input's buffer (runtime/toolchain.py's note on -fno-code-hoisting)."""
    gen = torch.Generator().manual_seed(6)
    xs = [torch.randn(3, n, generator=gen) for n in (1, 2, 3, 1, 2, 3, 1, 2, 3)]
    graphs = check_against_eager(lambda *xs: torch.cat([x * 2 for x in xs], dim=-1) + 1, *xs,
                                 grad=False, atol=0, rtol=0)
    assert _simd_loops(graphs) == 1


def _halves(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), -1) * 2 + x[..., 1:-1].exp().sum(-1, True)


@pytest.mark.parametrize("shape", [(2, 8), (3, 7), (4, 2, 10)], ids=str)
def test_slice_gradients_become_fused_cats(shape):
    """slice_backward (step 1) decomposes to a cat of the gradient between zeros: the
    backward has no ATen slice_backward and matches eager."""
    graphs = check_against_eager(_halves, torch.randn(*shape, requires_grad=True))
    backward = graphs[-1]
    assert not [op for _, op in backward.aten_nodes if "slice_backward" in op], backward


def test_strided_slice_gradient_is_a_fused_scatter():
    graphs = check_against_eager(lambda x: x[1::2].exp(), torch.randn(7, 8, requires_grad=True))
    assert not [op for _, op in graphs[-1].aten_nodes if "slice" in op], graphs[-1]
    # along the innermost dim the scatter stays ATen's (ops.py: a gather per element)
    check_against_eager(lambda x: x[:, 1::2].exp(), torch.randn(3, 8, requires_grad=True))


def test_cats_of_slices_of_cats_stop_growing_a_kernel():
    # diff with prepend and append, 7 times over: each level clamps every index once per
    # cat input, so one kernel holding all levels has thousands of clamps (sympy took
    # seconds per candidate group). Past MAX_CLAMPS a group does not lower, and the cost
    # policy refuses the merge that would make it: right values, no fallback warning.
    g = torch.Generator().manual_seed(0)
    x, p, a = (torch.randn(3, 3, 3, generator=g) for _ in range(3))
    check_against_eager(lambda x, p, a: torch.diff(x, 7, 2, p, a), x.requires_grad_(), p, a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_circular_pad_chained_cats_are_one_kernel(dtype):
    """Circular padding's three cats read each other through overlapping slices; the
    recompute offers take what revisit left them (partition/recompute.py): one kernel,
    NaN and inf carried."""
    import torch.nn.functional as F
    x = torch.randn(6, 3, 5, dtype=dtype)
    x[0, 0, 0], x[1, 2, 4] = float("nan"), float("inf")
    graphs = check_against_eager(lambda x: F.pad(x, (1, 2), mode="circular") * 2,
                                 x.requires_grad_())
    forward = [g for g in graphs if not g.name.endswith("backward")]
    assert len(forward[0].kernels) == 1, forward[0]
