"""How the C++ printer reads masks and integers in float loops, checked as text.

bool lives in memory as uint8_t and is read back as `!= 0`, and a bool becomes a number
through a select: gcc 12 vectorizes neither a load of C++ bool nor (float)bool, so those
forms kept every masked loop scalar. Values against eager are in tests/e2e/test_masks.py.
"""
import functools
import torch
from torch.testing import FileCheck

from tests.helpers import check_against_eager, one_kernel_source


_source = functools.partial(one_kernel_source, whole=True)


def _mask(*shape):
    return torch.rand(shape) < 0.5


def test_bool_input_is_bytes_compared_with_zero():
    src = _source(lambda m, x, y: torch.where(m, x, y), _mask(64, 64), torch.randn(64, 64),
                  torch.randn(64, 64))
    (FileCheck().check("(const uint8_t* __restrict in0, const float* __restrict in1")
     .check("#pragma omp simd")
     .check("const bool v0 = (in0[i0] != 0);")
     .check("const float v3 = (v0 ? v1 : v2);").run(src))
    assert "bool*" not in src


def test_bool_to_float_is_a_select():
    src = _source(lambda m, x: m.to(x.dtype) * x, _mask(64, 64), torch.randn(64, 64))
    (FileCheck().check("const bool v0 = (in0[i0] != 0);")
     .check("const float v1 = (v0 ? (float)1 : (float)0);").run(src))


def test_bool_output_is_stored_as_bytes():
    src = _source(lambda a, b: a > b, torch.randn(64, 64), torch.randn(64, 64))
    (FileCheck().check("uint8_t* __restrict out0)").check("const bool v2 = (v0 > v1);")
     .check("out0[i0] = (uint8_t)(v2 ? 1 : 0);").run(src))


def test_or_of_a_float_compare_and_a_mask_is_stored_through_a_select():
    """gcc 12 left this loop scalar with the bool stored as is: the OR joins masks of two
    widths (a float compare's, a byte load's), and with a libm call beside it no vector
    width fit both (generated pattern seed 6, 5x slower). A row shorter than 64 stores
    the bool into an int array, copied out as bytes after the loop (test_cpp_short_row_masks)."""
    def fn(x, m):
        y = torch.where(m, x - torch.log1p(x.abs()), 0.0)
        return y.isnan() | m, y

    x, m = torch.randn(8, 16, 17), _mask(8, 1, 17)
    FileCheck().check("brrr_libm_log1pf").check("(uint8_t)ss_v").run(_source(fn, x, m))
    check_against_eager(fn, x, m)
    x, m = torch.randn(8, 16, 67), _mask(8, 1, 67)
    src = _source(fn, x, m)
    FileCheck().check("brrr_libm_log1pf").check("(uint8_t)(v").check(" ? 1 : 0);").run(src)
    check_against_eager(fn, x, m)


def test_bools_combine_through_selects_and_int_compares():
    """`a | b`, `a ^ b`, `a != b` and `a == b` of a byte mask's bool and a float compare's
    kept the loop scalar even with the store as a select (gcc 12: "no vectype"; seed 6
    at its L1 size, inner dim 8): or prints as `a ? true : b`, the others compare ints."""
    def fn(x, m):
        y = torch.where(m, x - torch.log1p(x.abs()), 0.0)
        n = y.isnan()
        return (n | m, n ^ m, n != m, n == m, torch.logical_or(n, m), torch.logical_xor(n, m),
                y)

    x, m = torch.randn(4, 7, 5, 8), _mask(4, 7, 1, 8)
    x[0, 0, 0, :3] = float("nan")
    src = _source(fn, x, m)
    assert " | " not in src and " ^ " not in src and " || " not in src, src
    (FileCheck().check(" ? true : v").check("? 1 : 0) != (v").check("? 1 : 0) == (v")
     .run(src))
    check_against_eager(fn, x, m)


def test_masked_softmax_stages_the_mask_for_its_sum_of_exps():
    """The walk that sums exps over a short row reads the mask from an int32 copy of the
    chunk (cpp_staging.py); the max walk (a tree fold) and the last walk, which folds
    nothing, read the bytes; rows longer than STAGE_MAX_ROW are not staged."""
    def fn(s, mask):
        return torch.where(mask, s * 0.125, float("-inf")).softmax(-1)

    src = _source(fn, torch.randn(2, 3, 64, 64), torch.ones(64, 64, dtype=torch.bool).tril())
    (FileCheck().check("const uint8_t* __restrict in0")
     .check("#pragma omp simd reduction(max:").check("= (in0[(i1*64 + r0)] != 0);")
     .check("const int64_t st_lo = cb - ro * m0;").check("int32_t st_v7[1024];")
     .check("#pragma omp simd").check("st_v7[r0 - st_lo] = in0[(i1*64 + r0)];")
     .check("#pragma omp simd reduction(+:").check("const bool v7 = (st_v7[r0 - st_lo] != 0);")
     .check("#pragma omp simd \n").check("= (in0[(i1*64 + r0)] != 0);").run(src))
    long = _source(fn, torch.randn(1, 2, 4, 300), torch.ones(4, 300, dtype=torch.bool).tril())
    assert "st_lo" not in long


def test_gathered_byte_loads_are_not_staged():
    """A load at an index read in the loop (gather) stays where it is."""
    def fn(m, idx):
        return m.gather(-1, idx).sum(-1)

    src = _source(fn, _mask(8, 64), torch.randint(0, 64, (8, 48)))
    assert "st_lo" not in src and "brrr_in_bounds(" in src


def test_integer_input_converts_directly():
    src = _source(lambda q, s: (q.float() - 3) * s, torch.zeros(64, 64, dtype=torch.int8),
                  torch.randn(64, 1))
    (FileCheck().check("const int8_t* __restrict in0").check("const int8_t v0 = in0[")
     .check("const float v1 = ((float)v0);").run(src))


def test_embedding_checks_its_row_index_before_the_inner_loop():
    """The index an embedding reads once per output row is loaded and checked before the
    `omp simd` loop (cpp_hoist.py), which then reads one contiguous table row; a gather
    whose index changes along the inner loop keeps its check inside."""
    def fn(idx, w, pos):
        return torch.nn.functional.embedding(idx, w) * 2.0 + pos

    src = _source(fn, torch.randint(0, 100, (4, 64)), torch.randn(100, 32), torch.randn(64, 32))
    (FileCheck().check("const int64_t v0 = in0[(i0*64 + i1)];")
     .check("const int64_t v1 = brrr_in_bounds(v0, 100) ? v0 : 0;")
     .check("#pragma omp simd").check("for (int64_t i2 = lo; i2 < hi; ++i2) {")
     .check_not("brrr_in_bounds").check("in1[(v1*32 + i2)]").run(src))
    src = _source(lambda x, i: x.gather(-1, i) * 2, torch.randn(8, 64), torch.randint(0, 64, (8, 48)))
    (FileCheck().check("#pragma omp simd").check("for (int64_t i1 = lo; i1 < hi; ++i1) {")
     .check("brrr_in_bounds(").run(src))


def test_a_masked_walk_that_calls_libm_stages_its_mask_at_any_row_length():
    """A loop of byte lanes has no libm vector clone that wide: gcc called the scalar
    function lane by lane (cpp_staging.py). Its mask is staged even where the walk folds
    only a max over a long row; in 64-bit lanes where the walk computes in double."""
    def fn(s, mask):
        m = torch.where(mask, float("-inf"), torch.log1p(s.abs()))
        return m.amax(-1)

    for dtype, lane in ((torch.float32, "int32_t"), (torch.float64, "int64_t")):
        s, mask = torch.randn(4, 300, dtype=dtype), torch.rand(300) > 0.5
        src = _source(fn, s, mask)
        (FileCheck().check(f"{lane} st_v").check("#pragma omp simd reduction(max:")
         .check(f"= (st_v").check("brrr_libm_log1p").run(src))
        check_against_eager(fn, s, mask, grad=False)


def test_a_staged_walk_of_a_long_row_stays_within_its_staging_arrays():
    """A max or min walks segments of 8192 elements, but a staged mask is copied into
    arrays of 1024 lanes: such a walk over a row longer than 1024 wrote past them (a min
    with a masked cos beside it never returned, fuzz seed 161391). Staged walks take
    segments of at most 1024."""
    def fn(x, m):
        return x.amin(-1), torch.where(m, x, -x).cos()

    for n in (1092, 20000):
        x, m = torch.randn(2, n), torch.rand(2, n) > 0.5
        src = _source(fn, x, m)
        (FileCheck().check("int32_t st_v").check_not("cb + 8192").check("cb + 1024")
         .check("#pragma omp simd reduction(min:").run(src))
        check_against_eager(fn, x, m, grad=False)
    check_against_eager(fn, torch.randn(3000, dtype=torch.float64), torch.rand(3000) > 0.5,
                        grad=False)


def test_a_short_sum_walk_stages_the_bools_it_stores():
    """A bool stored in a walk that sums a short row made gcc's vectors 64 byte lanes
    wide, as a byte load does: the walk's float sum then folded its lanes one at a time
    in order, 3.3x slower over rows of 100 and no better than a sequential sum (fuzz
    seed 162962: a mean three ulps off, and a layer norm's gradient through it, 5x
    eager's error). The walk stores its bools into an int32 array, copied to the output
    after the loop (cpp_staging.py); rows longer than STAGE_MAX_ROW are not staged."""
    def fn(x):
        return x.mean(-1, keepdim=True), x * 2 <= 0.5

    src = _source(fn, torch.randn(64, 100))
    (FileCheck().check("int32_t ss_v").check("#pragma omp simd reduction(+:")
     .check("ss_v").check("r0 - st_lo] = v").check("}").check("#pragma omp simd")
     .check("= (uint8_t)ss_v").run(src))
    assert "(uint8_t)(v" not in src
    assert "ss_v" not in _source(fn, torch.randn(8, 300))
    for shape in ((64, 100), (3, 7, 33), (5, 256), (1, 1), (0, 40), (4, 0)):
        x = torch.randn(shape)
        x.view(-1)[:3] = float("nan")
        check_against_eager(fn, x, grad=False, kernels=x.numel() > 0)


def test_fuzz_seed_162962_mean_of_a_masked_softmax_plus_a_scalar():
    """The layer norm's gradient to x1 sums to zero exactly; in float32 it is what the
    forward's mean rounded to (0.0035 per ulp of it). Unstaged, brrr's mean summed the
    row in order; staged, it is eager's."""
    def fn(x0, x1):
        v0 = x0.masked_fill(x0 > 0.3, float("-inf")).softmax(0)
        v1 = v0 + x1
        v5 = torch.maximum(v1, x1)
        v8 = (v5 - v5.mean(0, keepdim=True)) * torch.rsqrt(
            v5.var(0, keepdim=True, unbiased=False) + 1e-5)
        return v8, v0 <= -v1

    g = torch.Generator().manual_seed(162962)
    x0 = torch.randn((100,), generator=g).requires_grad_()
    x1 = torch.randn((1,), generator=g).requires_grad_()
    check_against_eager(fn, x0, x1, strict=True, reference=True)
