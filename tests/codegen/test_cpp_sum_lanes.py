"""Sums in blocks of lanes (schedule/sum_lanes.py, codegen/cpp_sum_lanes.py): which walks
take them, the text they print, and their values against eager on odd lengths, rows split
across threads, stores beside the sum, double sums, NaN, inf and zero-size rows."""
import pytest
import torch
import torch.nn.functional as F
from torch.testing import FileCheck

from brrr_compiler.schedule.sum_lanes import MIN_ROW, MIN_SHORT_ROW
from tests.helpers import check_against_eager, one_kernel_source


_source = one_kernel_source


def test_a_long_row_sum_adds_in_a_block_of_lanes_folded_as_a_tree():
    src = _source(lambda x: x.sum(-1), torch.randn(64, 1000))
    (FileCheck().check("float c_v1[64];")
     .check("for (; lb + 64 <= ce - ro * m0; lb += 64) {")
     .check("c_v1[lane] += v0;").check("lane < ce - ro * m0 - lb")
     .check("brrr_fold_lanes<64>(c_v1);").check("acc_v1 += c_v1[0];").run(src))
    assert "reduction(+:" not in src, src


def test_a_cancelling_sum_keeps_sixteen_values_a_lane_and_a_sum_of_squares_sixty_four():
    assert "cb + 1024," in _source(lambda x: x.sum(-1), torch.randn(8, 5000))
    assert "cb + 4096," in _source(lambda x: (x * x).sum(-1), torch.randn(8, 5000))


def test_double_sums_keep_thirty_two_lanes():
    src = _source(lambda x: x.sum(-1), torch.randn(8, 700, dtype=torch.float64))
    assert "double c_v1[32];" in src and "brrr_fold_lanes<32>(" in src, src


@pytest.mark.parametrize("fn,n", [(lambda x: x.sum(-1), MIN_ROW - 1),
                                  (lambda x: x.softmax(-1), 2048),
                                  (lambda x: x.exp().sum(-1), MIN_SHORT_ROW - 1)],
                         ids=["short", "softmax", "shorter"])
def test_walks_not_taken(fn, n):
    """Short rows that only add, long rows' one-walk max and sum of exps, and rows
    shorter than two blocks keep their simd reductions."""
    src = _source(fn, torch.randn(16, n))
    assert "brrr_fold_lanes" not in src and "reduction(" in src, src


def test_a_short_row_sum_of_exps_folds_one_vector_of_lanes_as_a_tree():
    """A softmax over rows of 100: the one-walk max and sum of exps adds its exps in
    16 lanes folded as a tree (schedule/sum_lanes.py), its max as before."""
    src = _source(lambda x: x.softmax(-1), torch.randn(64, 100))
    (FileCheck().check("reduction(max:").check("float c_v5[16];")
     .check("for (; lb + 16 <= ce - ro * m0; lb += 16) {").check("brrr_expf_nonpos(")
     .check("brrr_fold_lanes<16>(c_v5);").run(src))


@pytest.mark.parametrize("n", [32, 33, 100, 257, 511])
def test_short_rows_of_exps_match_eager_with_nan_and_inf(n):
    """softmax (scratch rows), log_softmax (the one-walk max and sum of exps) and a sum
    of exps over short rows of odd lengths: a NaN in a block and in the remainder, a row
    of -inf, a row holding +inf, gradients through softmax."""
    g = torch.Generator().manual_seed(n)
    x = torch.randn(6, n, generator=g) * 4
    x[1, n // 3], x[2, n - 1] = float("nan"), float("nan")
    x[3], x[4, 5] = -float("inf"), float("inf")
    check_against_eager(lambda t: (t.softmax(-1), t.log_softmax(-1), t.exp().sum(-1)), x,
                        grad=False)
    y = torch.randn(9, n, generator=g, requires_grad=True)
    check_against_eager(lambda t: (t.softmax(-1) * t).sum(), y)
    check_against_eager(lambda t: t.log_softmax(-1), x[:3].to(torch.bfloat16), grad=False)


def test_a_long_row_max_folds_its_lanes_and_nan_flags_as_trees():
    src = _source(lambda x: x.amax(-1), torch.randn(16, 2048))
    (FileCheck().check("float c_v1[64];").check("int cn_v1[64];")
     .check("c_v1[lane] = v0 > c_v1[lane] ? v0 : c_v1[lane];")
     .check("cn_v1[lane] |= (v0 != v0);")
     .check("brrr_fold_max_lanes<64>(c_v1);").check("brrr_fold_or_lanes<64>(cn_v1);")
     .check("nan_v1 |= cn_v1[0];").run(src))


@pytest.mark.parametrize("n", [512, 513, 1000, 4099, 3 * 65536 + 77])
def test_maxes_and_mins_match_eager_with_nan_inf_and_signed_zeros(n):
    """Odd lengths, a row split across threads (the last), NaN in a block and in the
    remainder, rows of -inf and of signed zeros, and a max and a sum in one walk."""
    g = torch.Generator().manual_seed(n)
    x = torch.randn(5, n, generator=g)
    x[1, n // 3], x[2, n - 1] = float("nan"), float("nan")
    x[3] = -float("inf")
    x[4] = torch.where(torch.rand(n, generator=g) < 0.5, -0.0, 0.0)
    check_against_eager(lambda t: (t.amax(-1), t.amin(-1)), x, grad=False)
    check_against_eager(lambda t: (t.amax(-1) + t.sum(-1)), x[:1], grad=False)
    check_against_eager(lambda t: t.max(), x[:3].reshape(-1), grad=False)
    check_against_eager(lambda t: t.amin(-1), x.to(torch.bfloat16), grad=False)


@pytest.mark.parametrize("n", [512, 513, 575, 1000, 1023, 1025, 4099])
def test_row_sums_match_eager_at_odd_lengths(n):
    x = torch.randn(7, n, generator=torch.Generator().manual_seed(n))
    check_against_eager(lambda t: (t.sum(-1), t.mean(-1, keepdim=True) * t), x, grad=False)


def test_layer_norm_with_gradients():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(33, 777, generator=g, requires_grad=True)
    w, b = (torch.randn(777, generator=g, requires_grad=True) for _ in range(2))
    check_against_eager(lambda x, w, b: (F.layer_norm(x, (777,), w, b) * 1.5).sum(), x, w, b)


def test_one_long_row_split_across_threads():
    """A full sum past the split size: each thread folds its slice in blocks. Judged
    against float64 where it misses eager's tolerance: this one is nearer the exact sum
    than eager's (2.7e-5 off, eager 1.8e-4)."""
    x = torch.randn(3 * 65536 + 77, generator=torch.Generator().manual_seed(2))
    check_against_eager(lambda t: (t.sum(), (t * 2 - 1).sum()), x, grad=False, reference=True)


def test_double_and_nan_inf_and_zero_rows():
    x = torch.randn(5, 1030, dtype=torch.float64)
    check_against_eager(lambda t: t.sum(-1), x, grad=False)
    y = torch.randn(6, 600)
    y[1, 5], y[2, 599], y[3, 0], y[3, 1], y[4, 100] = float("nan"), float("inf"), float("inf"), \
        -float("inf"), -float("inf")
    check_against_eager(lambda t: (t.sum(-1), t.mean(-1)), y, grad=False)
    check_against_eager(lambda t: t.sum(-1), torch.randn(0, 600), grad=False, kernels=False)


def test_stores_beside_the_sum():
    """A walk that also stores (a scaled copy) writes every element once, blocks and
    remainder alike."""
    x = torch.randn(9, 1111, generator=torch.Generator().manual_seed(3))
    check_against_eager(lambda t: ((t * 3).sum(-1), t * 3 + 1), x, grad=False)


@pytest.mark.parametrize("shape,dim", [((40000, 25), None), ((8, 300000), -1)])
def test_a_product_walks_its_whole_segment_in_one_simd_loop(shape, dim):
    """A product's lanes restart at 1 per chunk, and where it underflows each restart went
    through the subnormals again (cpp_reduce.PROD_CHUNK): its segments run whole. Values
    in (-1, 1) that underflow to 0, and a row that overflows to inf, against eager."""
    from brrr_compiler.codegen.cpp_reduce import PROD_CHUNK
    g = torch.Generator().manual_seed(0)
    x = torch.rand(shape, generator=g) * 2 - 1
    fn = (lambda t: t.prod()) if dim is None else (lambda t: t.prod(dim))
    src = _source(fn, x)
    assert f"cb + {PROD_CHUNK}," in src
    assert "brrr_fold_prod_lanes<64>(" in src, src
    check_against_eager(fn, x)
    check_against_eager(fn, x * 3)
