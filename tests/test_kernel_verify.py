"""The kernel-IR verifier: real kernels pass; each broken rule is named."""
import dataclasses

import pytest
import sympy
import torch

from brrr_compiler.kernel_ir import Stmt
from brrr_compiler.kernel_verify import KernelIRError, verify
from brrr_compiler.lower.group import lower_group
from tests.helpers import plan_of


def _kernel(fn, *args):
    plan = plan_of(fn, *args)
    return lower_group(plan.groups[0], "k0")


def _softmax_kernel():
    return _kernel(lambda x: (x * 2).softmax(-1) + 1, torch.randn(8, 32))


@pytest.mark.parametrize("fn,args", [
    (lambda x, y: (x * y + 1).sin(), (torch.randn(4, 5), torch.randn(5))),
    (lambda x: (x * 2).softmax(-1) + 1, (torch.randn(8, 32),)),
    (lambda x: x.sum(1).sum(), (torch.randn(8, 32),)),
    (lambda x, i: x.gather(1, i) * 2, (torch.randn(4, 6), torch.randint(0, 6, (4, 3)))),
    (lambda x: x.argmax(-1), (torch.randn(4, 9),)),
    (lambda x, g: (x.softmax(-1) * g).sum(), (torch.randn(8, 32), torch.randn(8, 32))),
    (lambda x: (x.softmax(-1), x.sum(0) * 2), (torch.randn(8, 32),)),
], ids=["pointwise", "softmax", "fold_across", "gather", "argmax", "full_sum", "columns"])
def test_lowered_kernels_pass(fn, args):
    assert verify(_kernel(fn, *args)) is not None


def _broken(kernel, phase, edit):
    k = dataclasses.replace(kernel, phases=[dataclasses.replace(p, body=list(p.body))
                                            for p in kernel.phases])
    edit(k.phases[phase].body)
    return k


def _first(body, op):
    return next(i for i, s in enumerate(body) if s.op == op)


def test_value_defined_twice():
    k = _softmax_kernel()
    def edit(body):
        s = body[_first(body, "load")]
        body.append(dataclasses.replace(s))
    with pytest.raises(KernelIRError, match="defined twice"):
        verify(_broken(k, 0, edit))


def test_unknown_op_and_wrong_arity():
    k = _softmax_kernel()
    def edit(body):
        body.append(Stmt("w0", torch.float32, "frobnicate", ()))
        body.append(Stmt("w1", torch.float32, "add", ("w0",)))
    with pytest.raises(KernelIRError, match=r"unknown op 'frobnicate'(.|\n)*add takes 2"):
        verify(_broken(k, 0, edit))


def test_dtypes_against_the_scalar_op_table():
    """Each scalar op's operands and result keep its row's rules (scalar_ops.py): one
    operand dtype, the result's dtype by its rule, operands in its domain."""
    k = _softmax_kernel()
    x = next(s.out for s in k.phases[0].body if s.op == "load")
    def edit(body):
        body.append(Stmt("w3", torch.int64, "const", value=1))
        body.append(Stmt("w4", torch.float32, "add", (x, "w3")))          # mixed operands
        body.append(Stmt("w5", torch.float32, "lt", (x, x)))              # not bool
        body.append(Stmt("w6", torch.int64, "exp", ("w3",)))              # not a float
        body.append(Stmt("w7", torch.float32, "where", (x, x, x)))        # cond not bool
    with pytest.raises(KernelIRError) as err:
        verify(_broken(k, 0, edit))
    for broken in ("add(float32, int64)", "lt(float32, float32) is float32",
                   "exp(int64)", "where(float32, float32, float32)"):
        assert broken in str(err.value)


def test_loop_value_read_in_a_later_phase():
    k = _softmax_kernel()
    loop = next(n for n, p in enumerate(k.phases) if p.loop)
    inner = next(s.out for s in k.phases[loop].body if s.op == "load")
    def edit(body):
        body.append(Stmt("w2", torch.float32, "neg", (inner,)))
    last = len(k.phases) - 1
    assert last > loop
    with pytest.raises(KernelIRError, match=f"reads {inner} where it is not visible"):
        verify(_broken(k, last, edit))


def test_store_to_an_input_and_stray_index_symbol():
    k = _softmax_kernel()
    value = next(s.out for s in k.phases[-1].body if s.out)
    def edit(body):
        body.append(Stmt(None, torch.float32, "store", (value,), k.inputs[0].name,
                         sympy.Symbol("q7", integer=True)))
    with pytest.raises(KernelIRError, match=r"not an output(.|\n)*uses q7"):
        verify(_broken(k, len(k.phases) - 1, edit))


def test_column_fold_read_inside_a_row():
    """A column fold exists only in the columns phase, which indexes no loop variable."""
    k = _kernel(lambda x: (x.softmax(-1), x.sum(0) * 2), torch.randn(8, 32))
    cols = next(n for n, p in enumerate(k.phases) if p.loop and p.once)
    fold = next(s for s in k.body if s.op == "column_reduce")
    last_row = next(n for n, p in reversed(list(enumerate(k.phases))) if p.per_row_loop)
    bad = _broken(k, last_row, lambda body: body.append(
        Stmt("zz", torch.float32, "neg", (fold.out,))))
    with pytest.raises(KernelIRError, match="reads .* where it is not visible"):
        verify(bad)
    i0 = k.loop_vars[0]
    bad = _broken(k, cols, lambda body: body.append(
        Stmt("zy", torch.float32, "index", index=i0)))
    with pytest.raises(KernelIRError, match=f"uses {i0}"):
        verify(bad)
