"""A flat tile (transforms/flat_tile.py, codegen/cpp_tiled.py) converts its float16 loads
and stores a chunk at a time with the target's instructions (cpp_half.staged_loop): the
text, the schedule's record, and values against eager with NaN, infinities, subnormals
and tiles cut short at odd sizes."""
import torch

from brrr_compiler.codegen import cpp
from brrr_compiler.lower.group import lower_group
from brrr_compiler.schedule import choose
from tests.helpers import check_against_eager, plan_of


def _where_t(x):
    return torch.where(x.mT > -0.5, -1.5, x.mT).contiguous()


def _kernel_and_schedule(fn, *args):
    (g,) = plan_of(fn, *args).groups
    k = lower_group(g, g.name)
    return k, choose(k, "cpp", 2)


def test_the_schedule_records_the_flat_tile_and_the_printer_stages_its_halves():
    k, sched = _kernel_and_schedule(_where_t, torch.randn(64, 32, 31).half())
    assert sched.kind == "tiled" and sched.flat_tile == 32 and sched.tile_loads
    assert "rows of 32 run flat" in sched.describe()
    src = cpp.kernel_source(k, 2, sched)
    body = src[src.index("brrr_transpose16h"):]
    assert "brrr_f16_load(hl" in body and "brrr_f16_store(&out0[" in body, src


def test_rows_longer_than_a_tile_keep_their_row_loops():
    k, sched = _kernel_and_schedule(lambda x: (x.t() + 1).contiguous(),
                                    torch.randn(96, 80).half())
    assert sched.kind == "tiled" and sched.flat_tile == 0
    assert "brrr_f16_load(" not in cpp.kernel_source(k, 2, sched).split("extern \"C\"")[-1]


def _specials(shape):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).half()
    flat = x.view(-1)
    flat[::7] = float("nan")
    flat[1::11] = float("inf")
    flat[2::13] = -float("inf")
    flat[3::17] = 3e-6            # a float16 subnormal
    flat[4::19] = -0.0
    return x


def test_flat_tiles_with_halves_match_eager():
    for shape in [(64, 32, 31), (3, 17, 40), (1, 16, 16), (5, 33, 63), (0, 32, 31)]:
        check_against_eager(_where_t, _specials(shape), grad=False)
        check_against_eager(lambda x: (x.mT * 2 - 1).contiguous(), _specials(shape), grad=False)
    x = (_specials((6, 32, 31)).float() * 1.001).requires_grad_()   # rounded by the store
    check_against_eager(lambda x: (x.mT.half() + 1).contiguous(), x)


def test_partial_tiles_take_overlapping_blocks_and_match_eager():
    """A partial tile's last rows and columns go through a block overlapping the whole
    ones where that side is at least a block long (cpp_tiled._partial_blocks), element
    by element where it is shorter: every mix, float32 and float16, flat tiles or not."""
    g = torch.Generator().manual_seed(1)
    for rows, cols in [(17, 20), (31, 32), (33, 70), (129, 5), (5, 129), (16, 16),
                       (130, 33), (47, 100)]:
        for dtype in (torch.float32, torch.float16):
            x = torch.randn(3, rows, cols, generator=g).to(dtype)
            check_against_eager(lambda x: (x.mT * 2).contiguous(), x, grad=False)
            y = torch.randn(cols, rows, generator=g).to(dtype)
            check_against_eager(lambda x, y: x[0] + y.t(), x, y, grad=False)
