"""float16 stores of values computed before their loop (codegen/cpp_hoist.invariant_bits):
the bits are converted once before the loop, which then vectorizes; values as eager's."""
import torch
from torch.testing import FileCheck

from tests.helpers import check_against_eager, kernel_sources


def _source(f, *args) -> str:
    return "\n".join(kernel_sources(f, *args))


def _row_value_expanded(x):
    s = x.float().sum(-1, keepdim=True)
    return (s * 0.5).to(x.dtype).expand_as(x).contiguous(), x * s


def _column_walk(x0, x1):
    # x0's softplus is the same for every column of a tile: hoisted out of the tile loop
    return (torch.maximum(x0, x1) * 2).var(-3), torch.nn.functional.softplus(x0).mul(0.5)


def test_a_row_value_stored_along_its_row_goes_through_the_staged_store():
    """A row walk's float16 stores now convert a chunk at a time after it
    (cpp_staging.py): the row's value is stored as a float, no bits before the walk."""
    x = torch.randn(67, 1001, generator=torch.Generator().manual_seed(0)).half()
    x[3, 5], x[9, 0] = float("nan"), 70000.0 / 2
    src = _source(_row_value_expanded, x)
    FileCheck().check("hs_v5[r0 - st_lo] = v5;").check("brrr_f16_store(&out0[").run(src)
    assert "v5_bits" not in src
    check_against_eager(_row_value_expanded, x)
    check_against_eager(_row_value_expanded, x[:1, :1])



def test_a_hoisted_column_value_is_converted_once_per_row():
    g = torch.Generator().manual_seed(1)
    x0 = torch.randn(32, 31, 1, generator=g)
    x0[0, :4] *= 1e-4          # subnormal halves among them
    x0 = x0.half().expand(32, 31, 64)
    x1 = torch.randn(32, 1, 64, generator=g).half()
    source = _source(_column_walk, x0, x1)
    assert "_bits = brrr_f16_bits(" in source
    check_against_eager(_column_walk, x0, x1)


def test_float32_and_bfloat16_stores_are_unchanged():
    x = torch.randn(16, 600, generator=torch.Generator().manual_seed(2))
    for t in (x, x.bfloat16()):
        assert "_bits =" not in _source(_row_value_expanded, t)
        check_against_eager(_row_value_expanded, t)
