"""mask_index_put: x[mask] = v with a bool mask of x's shape becomes where(mask, v, x)."""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import FileCheck, assert_close

from brrr_compiler.passes import run_pipeline
from tests.helpers import check_against_eager

aten = torch.ops.aten


def _pass(fn, *args):
    """`fn` as a functional ATen graph (as AOTAutograd hands it), after the pass."""
    from torch.func import functionalize
    traced = make_fx(functionalize(fn), tracing_mode="fake")
    return run_pipeline(traced(*args), ("mask_index_put",))


def masked_write(x, mask):
    y = x.sin()
    y[mask] = 0.5
    return y * 2


def masked_add(x, mask):
    y = x.sin()
    return y.index_put((mask,), torch.tensor(0.25, dtype=x.dtype), accumulate=True)


def _inputs(dtype=torch.float32, shape=(6, 33)):
    g = torch.Generator().manual_seed(0)
    return torch.randn(shape, generator=g).to(dtype), torch.rand(shape, generator=g) > 0.5


@pytest.mark.parametrize("fn", [masked_write, masked_add])
def test_becomes_a_where(fn):
    x, mask = _inputs()
    gm = _pass(fn, x, mask)
    FileCheck().check_not("index_put").check("aten.where.self").run(gm.code)
    assert_close(gm(x, mask), fn(x, mask), rtol=0, atol=0)


def _left_alone(gm) -> bool:
    return "index_put" in gm.code and "where" not in gm.code


def test_a_mask_of_fewer_dims_is_left_alone():
    x, mask = _inputs()
    assert _left_alone(_pass(masked_write, x, mask[:, 0]))


def test_a_transposed_tensor_is_left_alone():
    # index_put's copy keeps the transposed layout; where's would be the mask's
    x, mask = _inputs()
    assert _left_alone(_pass(lambda x, m: masked_write(x.t(), m), x, mask.t().contiguous()))


def test_values_per_element_are_left_alone():
    x, mask = _inputs()

    def fn(x, mask):
        y = x.sin()
        y[mask] = y[mask] * 3
        return y
    assert _left_alone(_pass(fn, x, mask))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fn", [masked_write, masked_add])
def test_fused_and_matches_eager_with_gradients(fn, dtype):
    x, mask = _inputs(dtype)
    check_against_eager(fn, x.requires_grad_(), mask, strict=True)


def test_writing_an_input_through_a_mask_matches_eager():
    def fn(x, mask):
        x[mask] = -1.0
        return x.exp()
    check_against_eager(fn, *_inputs(), grad=False, strict=True)
