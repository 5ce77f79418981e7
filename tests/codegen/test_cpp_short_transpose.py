"""A transposed dim shorter than a 16x16 block (a conv weight's 9 taps) is tiled whole and
staged 16 x extent at a time (brrr_transpose16k in the prelude; codegen/cpp_tiled.py):
whole rows load as full vectors where they stay inside the block, the last as a partial
copy, and tiles cut short at the edges stage their whole 16x16 blocks and copy the rest
element by element. Every bit must arrive."""
import pytest
import torch

from tests.helpers import check_against_eager


def _weights(shape, seed=0):
    w = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    flat = w.view(-1)
    flat[1], flat[-1], flat[flat.numel() // 2] = float("nan"), float("-inf"), -0.0
    return w


@pytest.mark.parametrize("shape", [(64, 256, 3, 3), (3, 64, 3, 3), (5, 80, 3, 3),
                                   (7, 37, 3, 3), (4, 128, 5, 5), (2, 48, 1, 3), (6, 17, 2, 2)])
def test_channels_last_copies_of_weights(shape):
    w = _weights(shape)
    check_against_eager(lambda w: w.clone(memory_format=torch.channels_last), w,
                        grad=False, strict=True)


@pytest.mark.parametrize("taps", [1, 2, 5, 7, 8, 12, 15])
def test_every_short_extent(taps):
    """Extents below, at and past the 8-float rows that machines without AVX-512 transpose
    in (four 8x8 blocks per 16x16 one): each block's partial last row and the blocks past
    column 8 holding only the extent's remainder."""
    check_against_eager(lambda w: w.clone(memory_format=torch.channels_last),
                        _weights((3, 40, 1, taps), taps), grad=False, strict=True)


def test_bits_are_kept():
    w = _weights((16, 64, 3, 3))
    bits = w.view(torch.int32).clone()
    bits[0, 0, 0, 0] = 0x7FC00001                  # a NaN payload
    f = torch.compile(lambda w: w.clone(memory_format=torch.channels_last), backend="brrr")
    out = f(bits.view(torch.float32))
    want = bits.view(torch.float32).clone(memory_format=torch.channels_last)
    assert torch.equal(out.view(torch.int32), want.view(torch.int32))
    assert out.stride() == want.stride()


def test_a_fused_chain_on_the_transposed_operand_with_gradients():
    w = torch.randn(32, 64, 3, 3, requires_grad=True)
    check_against_eager(lambda w: (w.clone(memory_format=torch.channels_last) * 2).sin(), w)


@pytest.mark.parametrize("shape", [(2, 96, 20, 20), (3, 40, 7, 9), (1, 130, 17, 3),
                                   (2, 16, 16, 17), (1, 15, 31, 1)])
def test_channels_last_copies_of_activations_with_partial_tiles(shape):
    """Long dims: 128 x 64 tiles, cut short at the edges (96 channels: 64, then 32)."""
    check_against_eager(lambda x: x.clone(memory_format=torch.channels_last), _weights(shape),
                        grad=False, strict=True)
    check_against_eager(lambda x: x.permute(0, 2, 3, 1).contiguous() + 1, _weights(shape, 1),
                        grad=False, strict=True)


@pytest.mark.parametrize("channels", [2, 3, 5, 7, 15])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int32])
def test_a_short_inner_dim_walks_along_its_outer_neighbour(channels, dtype):
    """An image's few channels going channels-last: no tile, `a` is the vector loop and
    the channels unroll inside it (schedule/cpp.py `short_inner`)."""
    x = _weights((3, channels, 17, 29)).to(dtype)
    check_against_eager(lambda x: x.contiguous(memory_format=torch.channels_last), x,
                        grad=False, strict=True)
    if dtype.is_floating_point:
        check_against_eager(lambda x: (x.permute(0, 2, 3, 1) * 2 + 1).contiguous(), x,
                            grad=False, strict=True)


def test_a_short_inner_dim_with_gradients_and_its_loop():
    from brrr_compiler.codegen import cpp
    from tests.helpers import plan_of
    from brrr_compiler.lower.group import lower_group
    from brrr_compiler.schedule import choose

    x = torch.randn(4, 3, 20, 21, requires_grad=True)
    check_against_eager(lambda x: (x.contiguous(memory_format=torch.channels_last) * 3).sin(), x)
    plan = plan_of(lambda x: (x.permute(0, 2, 3, 1) + 1).contiguous(), x.detach())
    k = lower_group(plan.groups[0], "k")
    sched = choose(k, "cpp", 2)
    assert sched.kind == "tiled" and sched.tile[1] == 3 and not sched.stream
    src = cpp.kernel_source(k, 2)
    assert "#pragma GCC unroll 16" in src and "< 3; ++" in src and "tb0" not in src


def test_empty_dims_of_a_transposed_copy_compile():
    """An empty dim is no short tile: a tile 0 wide divided by zero in the schedule, and
    linalg.svd / eigh / qr of (0, 0, 0) inputs fell back to ATen (strict: it raises)."""
    for shape in ((2, 0, 0), (3, 0, 5), (3, 5, 0), (0, 4, 3)):
        x = torch.randn(*shape)
        check_against_eager(lambda t: (t.transpose(-1, -2) * 2).contiguous(), x,
                            options={"strict": True}, grad=False, kernels=False)
    check_against_eager(lambda t: torch.linalg.svd(t, full_matrices=True),
                        torch.randn(0, 0, 0), options={"strict": True}, grad=False,
                        kernels=False)
