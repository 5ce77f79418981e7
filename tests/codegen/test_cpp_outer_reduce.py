"""Outer-dim reductions (codegen/cpp_outer_reduce.py): tile widths and blocks of rows as
text, and column sums against eager."""
import numpy as np
import pytest
import torch
from torch.testing import FileCheck

from brrr_compiler.codegen import cpp
from brrr_compiler.codegen.cpp_columns import BLOCK_ROWS
from brrr_compiler.lower.group import lower_group
from tests.helpers import check_against_eager, plan_of


def _column_sum_source(cols: int, threads: int) -> str:
    plan = plan_of(lambda x: x.sum(0), torch.randn(64, cols))
    (g,) = plan.groups
    return cpp.kernel_source(lower_group(g, g.name), threads)


def test_few_columns_are_split_between_threads():
    # 256 columns (a bias gradient) on 2 threads: two tiles of 128, not one of 256
    FileCheck().check("ntiles = (n0 + 128 - 1) / 128").check("double acc_v1[128]").run(
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


def test_float32_column_sums_add_blocks_of_rows_in_float_then_in_double():
    FileCheck().check("double acc_v1[128];").check("float c_v1[128];") \
        .check(f"for (int64_t cb = 0; cb < n_red; cb += {BLOCK_ROWS})") \
        .check("c_v1[b] += v0;").check("acc_v1[b] += c_v1[b];") \
        .check("v1[b] = (float)acc_v1[b];").run(_column_sum_source(256, 2))


def test_long_float32_column_sums_are_as_accurate_as_eagers():
    """64K rows: a float sum over a whole column (what this schedule did before its blocks
    of rows) drifts several times further from the exact sums than eager's cascade."""
    x = torch.rand(65536, 64, generator=torch.Generator().manual_seed(0))
    exact = x.double().sum(0)

    def error(sums):
        return float(((sums.double() - exact).abs() / exact).max())

    serial = torch.from_numpy(np.add.accumulate(x.numpy(), axis=0, dtype=np.float32)[-1])
    assert error(serial) > 10 * error(x.sum(0)), "the test would not tell"
    check_against_eager(lambda x: x.sum(0), x, grad=False)
    torch._dynamo.reset()
    assert error(torch.compile(lambda x: x.sum(0), backend="brrr")(x)) <= error(x.sum(0))
    torch._dynamo.reset()


def test_gradient_of_a_broadcast_operand_is_as_accurate_as_eagers():
    """The gradient of x1 sums 1024 products per element over the dims it was broadcast
    along (a column sum in the backward): within the fuzzer's bound of eager's error."""
    g = torch.Generator().manual_seed(682)
    x0 = torch.randn(1, 32, 16, generator=g).expand(32, 32, 16).requires_grad_()
    x1 = torch.randn(1, 1, 32, generator=g)[..., 1::2].requires_grad_()
    check_against_eager(lambda a, b: (a * b, a * b), x0, x1, strict=True, reference=True)


def _middle_sum_source(shape) -> str:
    g = plan_of(lambda t: t.sum(1), torch.randn(shape)).groups[0]
    return cpp.kernel_source(lower_group(g, g.name), 2)


def test_columns_of_at_most_three_rows_add_in_float_in_order_as_eager():
    """Eager adds a column of 2 or 3 rows in float, row after row, in every layout; so does
    brrr (bit-equal), without the double lanes other short columns keep (tests/e2e/
    test_short_sums.py: there eager's order depends on the layout)."""
    FileCheck().check("float c_v1[128];").check("c_v1[b] += v0;").run(
        _middle_sum_source((2000, 3, 128)))
    FileCheck().check("double c_v1[").run(_middle_sum_source((1, 4, 100)))
    gen = torch.Generator().manual_seed(1)
    for shape in ((2000, 3, 128), (100, 3, 21), (300, 3, 7), (7, 2, 1000)):
        x = torch.randn(shape, generator=gen)
        out = torch.compile(lambda t: t.sum(1), backend="brrr")(x)
        assert torch.equal(out, x.sum(1)), shape
    x = torch.randn(300, 3, 7, generator=gen)
    x[3, 2, 1], x[4, 0, 0] = float("nan"), float("inf")
    check_against_eager(lambda t: t.sum(1) * 2, x.requires_grad_())


def test_short_columns_add_in_eagers_order():
    """Over a multiple of 32 kept columns eager adds a column in float, 16 rows at a time
    (cpp_column_order.py); so do the columns schedule's blocks and the wide
    column lanes, bit for bit, without double tile arrays. Over 18-31 columns it adds in
    four interleaved partials (eager_interleaved), as the column lanes do, and so do the
    columns past the last group of 32: a tile that is a whole row adds each part in its
    order (cpp_column_order.py). Tiles that cut a row, and rows of fewer than 8 columns
    (where eager's order is neither), keep double."""
    FileCheck().check("float c_v1[128];").check("cb += 16").run(_middle_sum_source((100, 9, 128)))
    FileCheck().check("float cq3_v1[100];").check("b < 96").check("c_v1[b] += v0;") \
        .check("b = 96").check("cq1_v1[b] += v0;").run(_middle_sum_source((100, 9, 100)))
    FileCheck().check("float cq0_v1[24];").check_not("c_v1[b] += v0;") \
        .check("cq3_v1[b] += v0;").run(_middle_sum_source((2000, 16, 24)))
    FileCheck().check("double c_v1[").run(_middle_sum_source((1, 9, 100)))
    FileCheck().check("double c_v1[").run(_middle_sum_source((2000, 9, 5)))
    gen = torch.Generator().manual_seed(2)
    for shape in ((100, 4, 128), (60, 9, 96), (40, 17, 64), (30, 31, 32), (20, 24, 1024),
                  (8, 5, 4096), (100, 9, 31), (60, 6, 20), (40, 30, 25), (30, 7, 21),
                  (50, 9, 100), (40, 17, 84), (20, 5, 33), (30, 31, 63), (200, 9, 8),
                  (60, 5, 16), (30, 24, 24), (100, 14, 17)):
        x = torch.randn(shape, generator=gen)
        torch._dynamo.reset()
        out = torch.compile(lambda t: t.sum(1), backend="brrr")(x)
        assert torch.equal(out, x.sum(1)), shape
    x = torch.randn(50, 20, 64, generator=gen)
    x[3, 2, 1], x[4, 0, 0], x[5, 19, 63] = float("nan"), float("inf"), -float("inf")
    check_against_eager(lambda t: t.var(1) + t.mean(1), x.requires_grad_())
    check_against_eager(lambda t: t.var(1) * t.sum(1), x[:, :, :50].detach().requires_grad_())


def test_column_max_and_min_keep_a_nan_without_flags():
    """No OpenMP reduction drops a NaN in the columns schedule: the update takes a NaN
    (`x != x`) and no compare with a NaN accumulator replaces it, so no NaN flag arrays."""
    src = cpp.kernel_source(lower_group(*(lambda g: (g, g.name))(
        plan_of(lambda t: t.amax(1), torch.randn(400, 70, 31)).groups[0])), 2)
    FileCheck().check("c_v1[b] = brrr_maximum(c_v1[b], v0);") \
        .check("acc_v1[b] = brrr_maximum(acc_v1[b], c_v1[b]);") \
        .run(src)
    assert "nan_v1" not in src and "cn_v1" not in src
    x = torch.randn(400, 70, 31, generator=torch.Generator().manual_seed(2))
    x[3, 0, 4] = x[5, 69, 30] = x[6, 4, 0] = float("nan")     # first, last and middle row
    x[7, :, 2] = float("nan")
    x[8, 2, 3], x[9, 3, 3] = float("inf"), float("-inf")
    check_against_eager(lambda t: (t.amax(1), t.amin(1), torch.max(t, 1).values), x)
    check_against_eager(lambda t: (t * 2).amax(0), torch.randn(2048, 100).requires_grad_())


def _relu_column_max_beside_a_mask(x0, m):
    v0 = x0 + 2.0
    v4 = torch.relu(v0 - x0)
    v11 = torch.sqrt((v4 + v0).abs() + 0.25)
    return v4.amax(-2), m.to(v11.dtype) * torch.where(v11 > 0, v11, 0.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_column_max_of_a_relu_beside_a_mask_vectorizes(dtype, tmp_path):
    """`x != x` of a relu's result beside a bool mask's loads: gcc 12 rewrote the NaN
    test through the relu's select into booleans of two widths and left the column walk
    scalar (generated pattern 36 at 32 MB, 2x Inductor's time). The prelude's maximum
    tests both operands at once and the walk vectorizes."""
    from benchmarks.vector_audit import scalar_loops
    from brrr_compiler.runtime.toolchain import find_toolchain
    gen = torch.Generator().manual_seed(36)
    x = torch.randn(128, 128, generator=gen).to(dtype)
    x[5, 7], x[9, 3], x[0, 2] = float("nan"), float("inf"), float("-inf")
    m = torch.rand(8, 128, 128, generator=gen) > 0.5
    groups = plan_of(_relu_column_max_beside_a_mask, x.expand(8, 128, 128), m).groups
    tc = find_toolchain()
    for g in groups:
        src = cpp.translation_unit([lower_group(g, g.name)], 2)
        assert scalar_loops(src, tc.flags, tc.libs, tmp_path) == [], g.name
    check_against_eager(_relu_column_max_beside_a_mask, x.expand(8, 128, 128), m)


def test_a_per_column_bool_is_held_in_an_int_tile_array():
    """A bool tile array kept gcc 12 from vectorizing the column walk that selects on it
    (generated pattern 5: 4.8x Inductor's time); in an int array the walk vectorizes."""
    x = torch.randn(67, 301, generator=torch.Generator().manual_seed(1))
    x[3, 5], x[9, 7] = float("nan"), float("inf")
    m = torch.rand(301, generator=torch.Generator().manual_seed(2)) > 0.5

    def f(x, m):
        return torch.where(m, x, x * 0.5 - 1).sum(0)

    (g,) = plan_of(f, x, m).groups
    source = cpp.kernel_source(lower_group(g, g.name), 2)
    FileCheck().check("int v0[").check_not("bool v0[").check("(v0[b] ? ").run(source)
    check_against_eager(f, x, m)
    check_against_eager(f, x[:, :1], m[:1])
