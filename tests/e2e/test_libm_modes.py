"""Config.libm: float transcendental functions from libmvec's float kernels ("fast", the
default: 2-4 ulp) or evaluated in double and rounded once ("accurate": correctly rounded,
transforms/rounded_libm.py). Both are checked against eager; "accurate" also bit for bit
against float64 rounded to float32."""
import pytest
import torch

from brrr_compiler.codegen import cpp
from brrr_compiler.kernel_ir import Stmt
from brrr_compiler.scalar_ops import ROUNDED
from tests.helpers import check_against_eager

FUNCTIONS = {"cos": torch.cos, "log": torch.log, "erf": torch.erf, "tanh": torch.tanh,
             "atan2": lambda x: torch.atan2(x, x.flip(0)),
             "hypot": lambda x: torch.hypot(x, x.flip(0))}


def _input(name):
    x = torch.randn(1 << 14, generator=torch.Generator().manual_seed(4)) * 3
    return x.abs() + 0.1 if name == "log" else x


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_accurate_libm_is_correctly_rounded(name):
    fn, x = FUNCTIONS[name], _input(name)
    # the float input of the function, as float32 rounds it (log's argument, atan2's flip)
    exact = fn(x.double()).float()
    check_against_eager(lambda x: fn(x) * 1.0, x, grad=False, options={"libm": "accurate"})
    torch._dynamo.reset()
    out = torch.compile(lambda x: fn(x) * 1.0, backend="brrr", options={"libm": "accurate"})(x)
    assert torch.equal(out, exact)


@pytest.mark.parametrize("libm", ["fast", "accurate"])
def test_both_modes_match_eager_in_every_float_dtype_and_with_gradients(libm):
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        x = _input("cos").to(dtype).requires_grad_()
        check_against_eager(lambda x: torch.sin(x) * torch.log1p(x.abs()) + torch.erf(x), x,
                            options={"libm": libm})


def test_a_rounded_call_prints_the_double_function():
    s = Stmt("v1", torch.float32, "cos", ("v0",), value=ROUNDED)
    line = cpp.stmt_line(s, {"v0": torch.float32})
    assert "((float)brrr_libm_cos((double)v0))" in line, line
    plain = cpp.stmt_line(Stmt("v1", torch.float32, "cos", ("v0",)), {"v0": torch.float32})
    assert "brrr_libm_cosf(v0)" in plain, plain


def test_hypot_fuses_with_its_neighbours_in_every_float_dtype():
    """hypot is a libm function of two arguments (torch's decomposition left prims.hypot,
    which ran through ATen between two cast kernels)."""
    from tests.helpers import plan_of
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        x = _input("cos").to(dtype).requires_grad_()
        check_against_eager(lambda x: torch.hypot(x * 2, x.flip(0)) + 1, x)
        plan = plan_of(lambda x: torch.hypot(x * 2, x.flip(0)) + 1, x.detach())
        fused = [n.target for g in plan.groups for n in g.nodes]
        assert len(plan.groups) == 1 and torch.ops.aten.hypot.default in fused, str(plan)
