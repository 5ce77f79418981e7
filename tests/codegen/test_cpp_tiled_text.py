"""The tiled printer (codegen/cpp_tiled.py) checked as text: transposed operands staged in
blocks, rows of a tile end to end in one flat loop. No compiler runs here."""
import sympy
import torch
from torch.testing import FileCheck

from brrr_compiler.codegen import cpp
from tests.codegen.test_cpp_text import _buffer, _inputs, _kernel, _load_index, _mul_exp

i0, i1 = sympy.symbols("i0 i1")


def _long_rows():
    """y and x.t() with rows longer than a tile's 64: tiles of rows, a loop per row."""
    return torch.randn(33, 80), torch.randn(80, 33).t()


def test_transposed_operand_is_staged_in_tiles():
    _, k = _kernel(_mul_exp, *_long_rows())          # the second operand is y.t()
    src = cpp.kernel_source(k, 4)
    (FileCheck().check("const int64_t a_lo = ta * 128;")
     .check("if (a_hi - a_lo == 128 && b_hi - b_lo == 64) {")
     .check("brrr_transpose16(&in1[(b_lo*33 + qb*33 + a_lo + qa)], 33, &tb0[qa * 64 + qb], 64);")
     .check("} else {")
     .check("const int64_t fa = na & ~(int64_t)15, fb = nb & ~(int64_t)15;")
     .check("const int64_t ca = na >= 16 ? na : fa, cb = nb >= 16 ? nb : fb;")
     .check("for (int64_t qa = 0; qa < fa; qa += 16)").check("brrr_transpose16(")
     .check("if (ca > fa) {").check("const int64_t qa = na - 16;").check("brrr_transpose16(")
     .check("if (cb > fb) {").check("const int64_t qb = nb - 16;").check("brrr_transpose16(")
     .check("for (int64_t i0 = (i1 < b_lo + cb ? a_lo + ca : a_lo); i0 < a_hi; ++i0)")
     .check("tb0[(i0 - a_lo) * 64 + (i1 - b_lo)] = in1[(i1*33 + i0)];")
     .check("#pragma omp simd").check("for (int64_t i1 = b_lo; i1 < b_hi; ++i1)")
     .check("in0[(i0*80 + i1)]").check("tb0[").check("out0[(i0*80 + i1)]").run(src))


def test_transposed_input_is_a_strided_load():
    _, k = _kernel(_mul_exp, *_long_rows())
    src = cpp.kernel_source(k, 1)
    assert _load_index(src, _buffer(k, "y_1")) == 80 * i0 + i1
    assert _load_index(src, _buffer(k, "xt_1")) == 33 * i1 + i0
    FileCheck().check_regex(r"in1\[\(?i1\*33 \+ i0\)?\]").run(src)


def test_a_short_inner_dim_makes_one_flat_loop_per_tile():
    """Rows of 17 (whole in a 64-wide tile): the block is staged with pitch 17 (no
    whole-tile branch: 17 is not whole 16-blocks) and the main loop runs over the tile's
    rows end to end, every operand indexed by the flat variable (cpp_tiled's note)."""
    _, k = _kernel(_mul_exp, *_inputs())
    src = cpp.kernel_source(k, 4)
    (FileCheck().check("float tb0[2176];")
     .check("brrr_transpose16(&in1[(b_lo*33 + qb*33 + a_lo + qa)], 33, &tb0[qa * 17 + qb], 17);")
     .check("tb0[(i0 - a_lo) * 17 + (i1 - b_lo)] = in1[(i1*33 + i0)];")
     .check("#pragma omp simd").check("for (int64_t tf = a_lo * 17; tf < a_hi * 17; ++tf)")
     .check("in0[tf]").check("tb0[(a_lo*-17 + b_lo*-1 + tf)]").check("out0[tf]").run(src))
    assert "a_hi - a_lo == 128" not in src


def test_rows_apart_keep_a_loop_per_row():
    """An operand whose rows are not end to end (a slice 20 wide read 17 at a time) keeps
    the loop per row, with the block staged at the short pitch."""
    _, k = _kernel(_mul_exp, torch.randn(33, 20)[:, :17], torch.randn(17, 33).t())
    src = cpp.kernel_source(k, 4)
    (FileCheck().check("&tb0[qa * 17 + qb], 17);").check("for (int64_t i0 = a_lo; i0 < a_hi; ++i0)")
     .check("#pragma omp simd").check("for (int64_t i1 = b_lo; i1 < b_hi; ++i1)")
     .check("in0[(i0*20 + i1)]").check("tb0[(a_lo*-17 + b_lo*-1 + i0*17 + i1)]").run(src))
    assert "tf" not in src
