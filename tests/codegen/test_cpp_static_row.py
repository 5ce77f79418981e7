"""A whole row of static length walked as one segment with constant bounds, its
reductions' last elements in a scalar tail of their own (codegen/cpp_static_row.py):
the text it prints, where it is not taken, and values against eager on row lengths
around the vector width, with NaN and inf in the tail and in the vector part."""
import pytest
import torch
import torch.nn.functional as F
from torch.testing import FileCheck

from tests.helpers import check_against_eager, one_kernel_source


_source = one_kernel_source


def test_a_softmax_row_of_fifty_walks_forty_eight_in_vectors_and_two_in_a_tail():
    src = _source(lambda x: x.softmax(-1), torch.randn(64, 50))
    (FileCheck().check("the whole row, 50 elements").check("ce = 48;")
     .check("reduction(max:c_v1)").check("float t_v1 =").check("int tn_v1 = 0;")
     .check("for (int64_t r0 = 48; r0 < 50; ++r0) {").check("tn_v1 |=")
     .check("nan_v1 |= tn_v1;").run(src))


def test_a_row_of_whole_vectors_has_constant_bounds_and_no_tail():
    src = _source(lambda x: x.amax(-1), torch.randn(64, 64))
    assert "ce = 64;" in src and "t_v" not in src, src


@pytest.mark.parametrize("fn,shape,dtype", [
    (lambda x: x.sum(-1), (64, 100), torch.float32),            # plain simd sums
    (lambda x: x.amax(-1), (16, 1000), torch.bfloat16),         # a long row's block
], ids=["plain_sum", "long_row"])
def test_walks_that_keep_gccs_epilogue(fn, shape, dtype):
    src = _source(fn, torch.randn(shape, dtype=dtype))
    assert f"ce = {shape[1]};" in src and "t_v" not in src, src


def test_rows_longer_than_a_chunk_keep_their_segments():
    assert "the whole row" not in _source(lambda x: x.amax(-1), torch.randn(4, 20000))
    assert "the whole row" not in _source(lambda x: x.sum(-1), torch.randn(4, 5000))


def _with_specials(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1]
    x[1, -1] = float("nan")               # in the tail
    x[2, 0] = float("nan")                # in the vector part
    x[3, -1] = float("inf")
    x[4, :] = float("-inf")
    x[5, n // 2] = float("-inf")
    return x


@pytest.mark.parametrize("n", [17, 31, 33, 50, 63, 100, 197])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_row_folds_match_eager(n, dtype):
    g = torch.Generator().manual_seed(n)
    x = _with_specials(torch.randn(12, n, generator=g).to(dtype))
    check_against_eager(lambda t: (t.softmax(-1), t.amax(-1), t.sum(-1), t.amin(-1)), x,
                        grad=False)
    check_against_eager(lambda t: (t.exp().sum(-1), torch.sigmoid(t).mean(-1)), x, grad=False)


@pytest.mark.parametrize("n", [50, 100])
def test_norms_and_log_softmax_with_gradients(n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(24, n, generator=g, requires_grad=True)
    w = torch.randn(n, generator=g, requires_grad=True)
    check_against_eager(lambda t, w: F.layer_norm(t, (n,), w) * 2, x, w)
    check_against_eager(lambda t: torch.log_softmax(t, -1), x)
    check_against_eager(lambda t: torch.var_mean(t, -1), x)


def test_a_comparisons_bool_does_not_push_a_short_row_into_the_tail():
    """A masked softmax over rows of 32 floats: its `x > 0.3` is a mask at float width,
    so the max walks the row in vectors (as a bool counted 1 byte, the unit was 64
    elements and the whole row ran in the scalar tail); a loaded bool mask still counts
    a byte."""
    fn = lambda x: x.masked_fill(x > 0.3, float("-inf")).softmax(-1)     # noqa: E731
    src = _source(fn, torch.randn(64, 32))
    assert "ce = 32;" in src and "reduction(max:" in src and "t_v" not in src, src
    mask = torch.rand(64, 32) < 0.5
    loaded = _source(lambda x, m: x.masked_fill(m, float("-inf")).softmax(-1),
                     torch.randn(64, 32), mask)
    assert "for (int64_t r0 = 0; r0 < 32; ++r0) {" in loaded, loaded


@pytest.mark.parametrize("n", [17, 32, 50, 63])
def test_masked_row_folds_match_eager(n):
    """Rows with comparisons in them, all masked, some masked, NaN and inf in both parts."""
    g = torch.Generator().manual_seed(n)
    x = _with_specials(torch.randn(12, n, generator=g))
    x[6, :] = 5.0                                         # every element masked: NaN row
    fn = lambda t: (t.masked_fill(t > 0.3, float("-inf")).softmax(-1),  # noqa: E731
                    torch.where(t < -0.5, t, 0.0).amax(-1), (t > 0).float().sum(-1))
    check_against_eager(fn, x, grad=False)
