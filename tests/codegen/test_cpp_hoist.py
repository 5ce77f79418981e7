"""Values the same all along a pointwise kernel's inner loop are computed once per row,
before it (codegen/cpp_hoist.py), checked as text; values against eager."""
import torch
from torch.testing import FileCheck

from brrr_compiler.codegen import cpp
from brrr_compiler.lower.group import lower_group
from tests.helpers import check_against_eager, plan_of


def _source(fn, *args) -> str:
    plan = plan_of(fn, *args)
    assert len(plan.groups) == 1, str(plan)
    g = plan.groups[0]
    return cpp.kernel_source(lower_group(g, g.name), 1)


def _broadcast_mask(x, m, b):
    return torch.where(m, x * torch.sigmoid(b), x - b)


def _inputs(dtype=torch.float64):
    return (torch.randn(16, 31, 32, dtype=dtype), torch.rand(16, 31, 1) < 0.5,
            torch.randn(16, 31, 1, dtype=dtype))


def test_row_broadcast_values_are_read_once_per_row():
    """The mask byte and the broadcast value (and its sigmoid) are read before the
    `omp simd` loop: a byte load inside it sized the vector for 64 lanes, more than the
    row of 32 doubles, and the loop stayed scalar."""
    src = _source(_broadcast_mask, *_inputs())
    loop = src.split("#pragma omp simd", 1)[1]
    FileCheck().check("!= 0);").check("brrr_libm_exp(").check("#pragma omp simd").run(src)
    assert "in1[" in loop and "!= 0" not in loop and "exp(" not in loop   # in1: x
    assert "in0[" not in loop and "in2[" not in loop                       # the mask, b


def test_values_along_the_row_stay_in_the_loop():
    src = _source(lambda x, m: torch.where(m, x, 0.0), torch.randn(16, 32), torch.rand(16, 32) < 0.5)
    FileCheck().check("#pragma omp simd").check("in0[").check("!= 0);").run(src)


def test_hoisted_values_match_eager():
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        x, m, b = _inputs(dtype)
        b[0, 0] = float("nan")
        check_against_eager(_broadcast_mask, x, m, b)
        check_against_eager(_broadcast_mask, x.transpose(0, 1), m.transpose(0, 1), b.transpose(0, 1))
