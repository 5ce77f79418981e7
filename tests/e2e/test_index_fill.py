"""index_fill as a where over a mask along its dim (decompositions._index_fill_where): the
fill fuses with what makes and reads self, against eager in values, strides and
gradients; negative, repeated and empty indices, a 0-d index, integer selfs, a tensor
value, transposed and non-dense selfs, NaN and inf; an index out of range raises
IndexError, as eager; what the where does not take (a 0-d self, a bool self) stays
ATen's op."""
import pytest
import torch

from tests.helpers import check_against_eager, compute_calls


def _x(*shape, dtype=torch.float32, grad=False):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    return x.requires_grad_(grad)


def _i(*values):
    return torch.tensor(values, dtype=torch.int64)


CASES = {
    "first dim": (lambda x, i: (x.sigmoid().index_fill(0, i, -2.0) * 2), (6, 5), _i(3, 0)),
    "last dim, negative": (lambda x, i: x.index_fill(-1, i, 1.5).exp(), (4, 7), _i(-1, 2)),
    "repeated": (lambda x, i: x.index_fill(1, i, 0.0) + x, (3, 5, 4), _i(4, 4, 1, 4)),
    "empty index": (lambda x, i: x.index_fill(0, i, 9.0) * 3, (5, 2), _i()),
    "0-d index": (lambda x, i: x.index_fill(1, i, -1.0) - 1, (3, 4), torch.tensor(2)),
    "transposed self": (lambda x, i: x.t().index_fill(0, i, 4.0), (6, 5), _i(1, 4)),
    "non-dense self": (lambda x, i: x[:, ::2].permute(1, 0).index_fill(1, i, 2.0), (6, 10),
                       _i(0, 5)),
    "in place": (lambda x, i: x.mul(2).index_fill_(0, i, 7.0).relu(), (4, 3), _i(2)),
}


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_index_fill_fuses_as_a_where(name, grad):
    fn, shape, index = CASES[name]
    reports = check_against_eager(fn, _x(*shape, grad=grad), index, grad=grad, strict=True)
    assert not [c for r in reports for c in compute_calls(r) if "index_fill" in c[1]]


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16, torch.int64,
                                   torch.uint8])
def test_index_fill_in_each_dtype(dtype):
    x = (_x(5, 6) * 10).to(dtype)
    check_against_eager(lambda x, i: x.index_fill(1, i, 3) * 2, x, _i(0, -2), strict=True)


def test_a_tensor_value_is_cast_to_selfs_dtype():
    check_against_eager(lambda x, i, v: x.index_fill(0, i, v) + 1, _x(4, 3), _i(1, 3),
                        torch.tensor(2.5, dtype=torch.float64), strict=True)


def test_nan_and_inf_in_self_and_value():
    x = _x(4, 5)
    x[0, 1], x[2, 3] = float("nan"), float("inf")
    check_against_eager(lambda x, i: x.index_fill(1, i, float("-inf")) * 2, x, _i(1, 4),
                        strict=True)


@pytest.mark.parametrize("bad", [5, -6])
def test_an_index_out_of_range_raises_index_error_as_eager(bad):
    x, i = torch.zeros(5, 3), _i(0, bad)
    with pytest.raises(IndexError):
        x.index_fill(0, i, 1.0)
    compiled = torch.compile(lambda x, i: x.index_fill(0, i, 1.0) + 1, backend="brrr")
    with pytest.raises(IndexError):
        compiled(x, i)
    torch._dynamo.reset()


def test_a_bool_self_keeps_atens_op():
    x = torch.zeros(4, 3, dtype=torch.bool)
    reports = check_against_eager(lambda x, i: x.index_fill(0, i, True), x, _i(1, 2),
                                  strict=True, kernels=False)
    assert [c for r in reports for c in compute_calls(r) if "index_fill" in c[1]]
