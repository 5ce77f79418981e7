"""The scalar-op table (scalar_ops.py): every row complete for every target, its readers
agree with it, and every ATen op mapped onto a row lowers to what eager computes."""
import re

import pytest
import torch

from brrr_compiler import ops, scalar_ops
from brrr_compiler.codegen import cpp, triton_body, triton_prelude
from brrr_compiler.kernel_ir import STRUCTURAL, Stmt
from brrr_compiler.lower import index_rules
from brrr_compiler.lower.scalar_rules import RULES, default_rule
from tests.helpers import lowered_vs_eager

ROWS = list(scalar_ops.TABLE.values())
FLOATS = (torch.float32, torch.float64)
INTEGERS = (torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool)
ARGS = ["a", "b", "c"]


def _operands(row, dt):
    return [torch.bool, dt, dt] if row.result == scalar_ops.SELECT else [dt] * row.arity


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_every_row_is_complete(row):
    assert row.arity in (1, 2, 3) and callable(row.ref)
    assert row.result in (scalar_ops.SAME, scalar_ops.BOOL, scalar_ops.SELECT)
    assert row.cost > 0 and row.flops >= 0 and row.transcendentals >= 0
    assert row.name not in STRUCTURAL
    args = ARGS[:row.arity]
    for dt in [d for d in FLOATS + INTEGERS if row.accepts(d)]:
        dts = _operands(row, dt)
        c = cpp.op_expr(Stmt("o", dt, row.name, tuple(args)), args, dts)
        t = triton_body.op_expr(row.name, args, row.operand_dtype(dts))
        for text in (c, t):        # every argument used, no field left unfilled
            assert all(a in text for a in args) and "{" not in text, (dt, text)


@pytest.mark.parametrize("row", [r for r in ROWS if r.operands != scalar_ops.ANY],
                         ids=lambda r: r.name)
def test_operands_outside_the_domain_are_refused(row):
    """A printer asked for operands an op is not defined on raises (the group then runs
    through ATen); the verifier names the break."""
    dt = torch.int64 if row.operands == scalar_ops.FLOAT else torch.float32
    args = ARGS[:row.arity]
    with pytest.raises(NotImplementedError, match=f"no rule for scalar op '{row.name}'"):
        triton_body.op_expr(row.name, args, dt)
    with pytest.raises(NotImplementedError, match=f"no rule for scalar op '{row.name}'"):
        cpp.op_expr(Stmt("o", dt, row.name, tuple(args)), args, [dt] * row.arity)
    assert row.result_dtype([dt] * row.arity) is None


def test_libdevice_functions_are_rows():
    """Every libdevice function a Triton form or the prelude calls is some row's (the
    interpreter runs that row's reference for it) and CUDA's libdevice has it."""
    forms = " ".join(t for r in ROWS for t in (r.triton.floating, r.triton.double,
                                                   r.triton.integer, r.triton.boolean) if t)
    called = set(re.findall(r"libdevice\.(\w+)\(", forms + triton_prelude.PRELUDE))
    provided = scalar_ops.libdevice_functions()
    assert called == set(provided)
    for name, row in provided.items():
        assert f"libdevice.{name}(" in row.triton.floating
    real = pytest.importorskip("triton.language.extra.libdevice")
    assert all(hasattr(real, name) for name in provided)


def test_prelude_declares_the_libm_functions():
    prelude = cpp.prelude()
    assert "BRRR_LIBM_DECLARATIONS" not in prelude
    for row in ROWS:
        if row.libmvec:                  # declared, and called by the name declared
            for kind in ("FLOAT", "DOUBLE"):
                assert f"BRRR_LIBM_{kind}({row.arity}, {row.name}, (" in prelude
            args = ARGS[:row.arity]
            double = cpp.op_expr(Stmt("o", torch.float64, row.name, tuple(args)), args,
                                 [torch.float64] * row.arity)
            assert double.startswith(f"brrr_libm_{row.name}(")
            only = cpp.prelude(f"x = {double};")
            assert f"BRRR_LIBM_DOUBLE({row.arity}, {row.name}, (" in only
            assert f"BRRR_LIBM_FLOAT({row.arity}, {row.name}, (" not in only


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_reference_keeps_the_result_rule(row):
    g = torch.Generator().manual_seed(0)
    for dt in [d for d in (torch.float32, torch.float64, torch.int64, torch.bool)
               if row.accepts(d)]:
        dts = _operands(row, dt)
        args = [torch.rand(5, generator=g) > 0.5 if d is torch.bool
                else (torch.randn(5, generator=g) * 4).to(d) for d in dts]
        try:
            out = row.ref(*args)
        except (NotImplementedError, RuntimeError):
            assert dt is torch.bool       # eager refuses some on bool: never lowered there
            continue
        assert out.dtype == row.result_dtype(dts)


def test_every_pointwise_aten_op_has_a_rule_and_cost():
    for op, info in ops.TABLE.items():
        if info.kind is not ops.Kind.POINTWISE:
            continue
        rule = RULES.get(info.scalar) or default_rule(info.scalar) or \
            index_rules.RULES.get(info.scalar)
        assert rule is not None, op
        if info.scalar in scalar_ops.TABLE:
            assert info.cost == scalar_ops.TABLE[info.scalar].cost, op


def test_costs_read_the_table():
    assert ops.scalar_cost("truediv") == scalar_ops.DIV
    assert ops.scalar_cost("sigmoid") == scalar_ops.TRANSCENDENTAL + scalar_ops.DIV
    assert ops.scalar_cost("bounded") == 2 * scalar_ops.ADD
    with pytest.raises(KeyError, match="frobnicate"):
        ops.scalar_cost("frobnicate")


def _same_name_ops():
    """(row, arity) of each row an ATen op of the same name maps onto."""
    out = []
    for row in ROWS:
        packet = getattr(torch.ops.aten, row.name, None)
        overloads = [getattr(packet, o) for o in ("default", "Tensor")
                     if packet is not None and hasattr(packet, o)]
        if any(ops.info(o).scalar == row.name for o in overloads):
            out.append(row)
    return out


def _special(seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 7, generator=g) * 3
    x.view(-1)[:5] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.5])
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("row", _same_name_ops(), ids=lambda r: r.name)
def test_lowered_through_the_evaluator(row, dtype):
    """Each ATen op named like a row, lowered alone and evaluated, against eager (NaN,
    infinities and -0.0 among the inputs)."""
    fn = getattr(torch, row.name)
    args = [_special(i, dtype) for i in range(row.arity)]
    if row.result == scalar_ops.SELECT:
        args[0] = args[0] > 0
    if row.name.startswith(("bitwise", "logical")):
        args = [a > 0 for a in args]
    assert lowered_vs_eager(fn, *args) == 1
