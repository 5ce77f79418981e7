"""A kernel stores a mutated input's new value into the input itself (runtime/inplace.py)
where nothing can tell, and the write-back copy_ disappears; elsewhere the value is
copied back as before. Values, dtypes, strides and the mutated inputs match eager."""
import pytest
import torch

from tests.helpers import check_against_eager


def _code(graphs) -> str:
    return "\n".join(g.runner_code for g in graphs)


def _in_place(fn, *args, **kw) -> bool:
    """Whether brrr's runner for fn(*args) stores every write-back in place, after checking
    it against eager (values, strides, the inputs after the call)."""
    graphs = check_against_eager(fn, *args, grad=False, strict=True, **kw)
    return "aten.copy_" not in _code(graphs)


def _x(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("fn", [
    lambda x, y: x.add_(2.0),
    lambda x, y: x.fill_(3.0),
    lambda x, y: x.mul_(y).sigmoid_(),
    lambda x, y: x.add_(y[:1]),                     # a broadcast operand
    lambda x, y: (x.mul_(0.5), y.add_(x)),          # y's kernel reads x's new value
])
def test_pointwise_updates_go_in_place(fn, dtype):
    assert _in_place(fn, _x(64, 33, dtype=dtype), _x(64, 33, dtype=dtype, seed=1))


def test_a_transposed_input_keeps_its_layout():
    assert _in_place(lambda x: x.mul_(3.0), _x(33, 64).t())


def test_an_optimizer_like_step():
    def step(p, m, v, g):
        m.mul_(0.9).add_(g, alpha=0.1)
        v.mul_(0.99).addcmul_(g, g, value=0.01)
        p.addcdiv_(m, v.sqrt().add_(1e-8), value=-1e-3)

    assert _in_place(step, _x(300, 7), _x(300, 7, seed=1), _x(300, 7, seed=2).abs(),
                     _x(300, 7, seed=3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_addcmul_and_addcdiv_with_a_value_fuse(dtype):
    """Dynamo writes them as inductor's prims.fma, which brrr lowers (one rounding)."""
    def step(p, m, v, g):
        v.mul_(0.99).addcmul_(g, g, value=0.01)
        p.addcdiv_(m, v.sqrt().add_(1e-8), value=-1e-3)

    args = [_x(300, 7, dtype=dtype, seed=s) for s in range(4)]
    args[2] = args[2].abs()
    graphs = check_against_eager(step, *args, grad=False, strict=True, reference=True)
    code = _code(graphs)
    assert "prims.fma" not in code and "aten.copy_" not in code, code


@pytest.mark.parametrize("fn", [
    lambda x: x.add_(x.t() * 1.5),                 # reads a transposed view of itself
    lambda x: x.copy_(x.flip(0) * 2),              # the new value reads x elsewhere
    lambda x: (x.sum(), x.mul_(2))[0],             # the old value is read by a sum
    lambda x: x[:, 1].add_(1),                     # a slice written back: slice_scatter
    lambda x: (x + 1, x.add_(1))[0],               # the new value is also an output
])
def test_other_write_backs_match_eager(fn):
    x = _x(17, 17)
    check_against_eager(fn, x, grad=False, strict=True, kernels=False)


def test_the_old_value_read_after_the_update_is_ordered_before_it():
    def fn(x, w):
        old = x @ w                    # an ATen call reading x: must run before the kernel
        x.mul_(2.0)
        return old

    graphs = check_against_eager(fn, _x(16, 16), _x(16, 16, seed=1), grad=False, strict=True)
    code = _code(graphs)
    assert code.index("torch.mm(") < code.index("k0_"), code


def test_an_output_view_of_the_updated_input():
    check_against_eager(lambda x: x.add_(1).view(-1)[:5], _x(8, 8), grad=False, strict=True)


def test_the_old_value_and_the_new_in_one_in_place_kernel():
    """The kernel stores x's new value into x and reads x's old value for another output
    in the same iteration: x's pointer and the output's are not `__restrict` (gcc 12
    re-read x after the store when they were: fuzz seed 177653, wrong values)."""
    def fn(x, m, y):
        old = x + 2.0
        x[m] = 0.0
        return torch.lerp(x, old, 0.25).transpose(2, 1).to(torch.bfloat16) / (y.abs() + 1)

    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 1, 16, dtype=torch.float64, generator=g)
    m = torch.rand(7, 1, 16, generator=g) > 0.5
    y = torch.randn(1, 2, 16, dtype=torch.float64, generator=g).transpose(-1, -2)
    assert _in_place(fn, x, m, y)
    check_against_eager(fn, x, m, y.requires_grad_(), strict=True)


@pytest.mark.parametrize("n", [1024, 37])
def test_an_element_loaded_twice_is_read_before_it_is_stored(n):
    """A cat specialized per piece loads x once for the value it stores into x and again
    for another output: every store of the loop body comes after its loads
    (transforms/inplace_order.py), so both loads see the old x (fuzz seed 301942 stored
    x * 0.5 into x and then scaled the reloaded x again)."""
    def fn(x, y):
        x.mul_(0.5)
        v = torch.minimum(x, y)
        x[..., :1] = 0.5
        return (-v,)

    assert _in_place(fn, _x(n), _x(1).expand(n))
