"""Outer-dim reductions (codegen/cpp_outer_reduce.py): tile widths as text."""
import torch
from torch.testing import FileCheck

from brrr_compiler.codegen import cpp
from brrr_compiler.lower.group import lower_group
from tests.helpers import check_against_eager, plan_of


def _column_sum_source(cols: int, threads: int) -> str:
    plan = plan_of(lambda x: x.sum(0), torch.randn(64, cols))
    (g,) = plan.groups
    return cpp.kernel_source(lower_group(g, g.name), threads)


def test_few_columns_are_split_between_threads():
    # 256 columns (a bias gradient) on 2 threads: two tiles of 128, not one of 256
    FileCheck().check("ntiles = (n0 + 128 - 1) / 128").check("float acc_v1[128]").run(
        _column_sum_source(256, 2))
    FileCheck().check("ntiles = (n0 + 256 - 1) / 256").run(_column_sum_source(512, 2))
    FileCheck().check("ntiles = (n0 + 64 - 1) / 64").run(_column_sum_source(100, 8))


def test_narrow_tiles_match_eager():
    # small integers sum exactly in any order: every column must match
    x = torch.randint(-8, 8, (300, 200), generator=torch.Generator().manual_seed(0)).float()
    check_against_eager(lambda x: (x * 2).sum(0), x.requires_grad_())


def test_large_column_sums_prefetch_rows_ahead():
    """Each row's piece of a tile sits on pages of its own: the loop requests the piece
    of a row further on (cpp_outer_reduce.PREFETCH_BYTES); inputs within the L2 do not."""
    def source(x):
        g = plan_of(lambda t: t.sum(0), x).groups[0]
        return cpp.kernel_source(lower_group(g, g.name), 2)

    big = source(torch.rand(4096, 4096))
    assert "if (r0 + 8 < m0) for (int64_t pf = 0; pf < bn; pf += 16) __builtin_prefetch(&in0[" in big
    assert "__builtin_prefetch" not in source(torch.rand(256, 256))
