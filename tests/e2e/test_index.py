"""Advanced indexing by integer tensors (aten.index, _unsafe_index; lower/index_rules.py
`index`): indirect loads in brrr's kernels, against eager in values, strides and
gradients: adjacent and separated indexed dims, broadcast index tensors, negative and
int32 indices, out-of-range indices (IndexError, as eager), empty index tensors, and the
upsampling modes that decompose to it. Bool masks stay ATen's (their shape depends on
their values)."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import check_against_eager, compute_calls


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), requires_grad=True)


def _i(*values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


CASES = {
    "first dim": (lambda x, i: x[i] * 2, (5, 7), _i(4, 0, 2, 2)),
    "a later dim": (lambda x, i: x[:, i].exp(), (5, 7), _i(6, 1, 1)),
    "negative": (lambda x, i: x[:, i] + 1, (5, 7), _i(-1, -7, 3)),
    "int32": (lambda x, i: x[i].sin(), (5, 7), _i(1, 3, dtype=torch.int32)),
    "2-d index": (lambda x, i: x[i] * x[i], (6, 4), torch.tensor([[0, 5], [2, 2], [1, 3]])),
    "empty index": (lambda x, i: x[i] + 1, (5, 7), torch.zeros(0, dtype=torch.int64)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_one_index_tensor(name):
    fn, shape, index = CASES[name]
    reports = check_against_eager(fn, _x(*shape), index, kernels=name != "empty index")
    assert not [op for r in reports if not r.name.endswith("backward")
                for _, op in compute_calls(r) if op.startswith("aten.index")]


def test_adjacent_index_tensors_broadcast_in_place():
    rows, cols = torch.tensor([[0], [3], [2]]), torch.tensor([1, 4])
    check_against_eager(lambda x, r, c: x[:, r, c] * 2, _x(2, 4, 5, 3), rows, cols)


def test_separated_index_tensors_put_the_broadcast_dims_first():
    a, b = _i(0, 1, 1), _i(2, 0, 4)
    check_against_eager(lambda x, a, b: x[a, :, b].relu(), _x(2, 3, 5), a, b)


def test_an_index_out_of_range_raises_index_error_as_eager():
    x, i = torch.randn(5, 7), _i(0, 7)
    with pytest.raises(IndexError):
        x[:, i]
    compiled = torch.compile(lambda x, i: x[:, i] + 1, backend="brrr")
    with pytest.raises(IndexError):
        compiled(x, i)
    torch._dynamo.reset()


def test_a_bool_mask_stays_aten_and_matches():
    check_against_eager(lambda x, m: x[m] * 2, _x(5, 7), torch.rand(5, 7) > 0.5,
                        allow_fallback=True, kernels=False)


@pytest.mark.parametrize("mode,shape", [("nearest", (3, 2, 5, 6)), ("bilinear", (3, 2, 5, 6)),
                                        ("bicubic", (2, 2, 5, 6)), ("linear", (3, 2, 7)),
                                        ("trilinear", (2, 2, 3, 4, 5))])
@pytest.mark.parametrize("align", [False, True])
def test_upsampling_runs_in_brrrs_kernels(mode, shape, align):
    kw = {} if mode == "nearest" else {"align_corners": align}
    size = [7, 4, 6][:len(shape) - 2]
    reports = check_against_eager(lambda x: F.interpolate(x, size=size, mode=mode, **kw),
                                  _x(*shape), atol=1e-5, rtol=1e-5)
    forward = [r for r in reports if not r.name.endswith("backward")]
    assert forward and not [op for r in forward for _, op in compute_calls(r) if "index" in op]


def test_an_index_with_nan_inf_and_size_one_dims():
    x = torch.tensor([[float("nan"), 1.0, float("inf")]]).requires_grad_()
    check_against_eager(lambda x, i: x[:, i] * 2, x, _i(2, 0, 0, 1))
