"""Fallbacks: without strict, one warning naming the group and the reason (a failed build:
the compiler's first error and the source path) and results like eager; with
options={"strict": True} or BRRR_STRICT=1, a BrrrFallbackError instead."""
import os
import re
import warnings

import pytest
import torch
from torch._dynamo.exc import BackendCompilerFailed
from torch.testing import assert_close

from brrr_compiler import BrrrFallbackError, backend
from brrr_compiler import log as brrr_log
from brrr_compiler.backend import lower_plan
from brrr_compiler.codegen import cpp
from brrr_compiler.config import build_config
from brrr_compiler.partition.plan import FusionPlan, Group
from brrr_compiler.runtime.kernels import build_kernels
from brrr_compiler.runtime.runner import build_runner
from tests.helpers import aten_graph


def _f(x):
    return (x * 2 + 1).sin()


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(brrr_log, "_warned", set())


def _run(options, x):
    """(result, brrr's warnings) of `_f` compiled with `options`."""
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(_f, backend="brrr", options=options)(x)
    torch._dynamo.reset()
    return out, [str(w.message) for w in caught if issubclass(w.category, brrr_log.BrrrWarning)]


def _strict_error(options, x) -> BrrrFallbackError:
    torch._dynamo.reset()
    with pytest.raises(BackendCompilerFailed) as info:
        torch.compile(_f, backend="brrr", options={**options, "strict": True})(x)
    torch._dynamo.reset()
    assert isinstance(info.value.inner_exception, BrrrFallbackError)
    assert "BrrrFallbackError" in str(info.value)
    return info.value.inner_exception


@pytest.fixture
def unlowerable(monkeypatch):
    def refuse(group, *args, **kwargs):
        raise NotImplementedError("brrr: no rule for scalar op 'sin' (a test's refusal)")
    monkeypatch.setattr(backend, "lower_group", refuse)


@pytest.fixture
def broken_build(monkeypatch):
    real = cpp.print_kernel
    monkeypatch.setattr(cpp, "print_kernel",
                        lambda k, sched: real(k, sched).replace("{", "{\n#error brrr test breaks this\n", 1))


def test_lowering_fallback_names_the_group_and_reason(unlowerable):
    x = torch.randn(5, 7)
    out, messages = _run({}, x)
    assert_close(out, _f(x))
    (message,) = messages
    assert re.search(r"group k\d+_\w+ \(aten\.mul\.Tensor, aten\.add\.Tensor, aten\.sin\.default\) "
                     r"cannot be lowered: no rule for scalar op 'sin'", message), message
    assert message.endswith("its ops run through ATen instead")
    error = _strict_error({}, x)
    assert "cannot be lowered" in str(error) and "strict" in str(error)


def test_build_failure_names_the_first_compiler_error_and_the_source(broken_build, tmp_path):
    x = torch.randn(5, 7)
    out, messages = _run({"cache_dir": str(tmp_path)}, x)
    assert_close(out, _f(x))
    (message,) = messages
    assert re.search(r"kernel k\d+_\w+ failed to build: .*error: #error brrr test breaks this",
                     message), message
    source = re.search(r"source: (\S+\.cpp)\)", message).group(1)
    assert os.path.exists(source) and source.startswith(str(tmp_path))
    assert "C++ compile failed" not in message          # the error itself, not the exit code
    assert "failed to build" in str(_strict_error({"cache_dir": str(tmp_path)}, x))


def test_strict_from_the_environment(broken_build, tmp_path, monkeypatch):
    monkeypatch.setenv("BRRR_STRICT", "1")
    assert "failed to build" in str(_strict_error({"cache_dir": str(tmp_path)}, torch.randn(3)))


def test_missing_compiler_under_strict(tmp_path):
    options = {"cache_dir": str(tmp_path), "cxx": "/nonexistent/brrr-test-strict/g++"}
    assert "no working C++ compiler" in str(_strict_error(options, torch.randn(3)))


def test_strict_build_without_fallbacks_runs(tmp_path):
    x = torch.randn(4, 6)
    out, messages = _run({"cache_dir": str(tmp_path), "strict": True}, x)
    assert_close(out, _f(x)) and messages == []


def test_kernel_on_a_cycle_under_strict(tmp_path):
    """tests/runtime/test_faults.py makes the same plan by hand (a group feeding itself
    through an ATen call); under strict the runner refuses it."""
    def f(x):
        return torch.cumsum(x + 1, 0) * 2

    x = torch.randn(5, 3)
    gm = aten_graph(f, x)
    add, cumsum, mul = [n for n in gm.graph.nodes if n.op == "call_function"]
    plan = FusionPlan(gm, [Group(0, [add, mul], [add, mul], [add.args[0], cumsum], (5, 3))],
                      [], "by hand")
    kernels, specs, *_ = lower_plan(plan)
    compiled, _ = build_kernels(kernels, specs, build_config({"cache_dir": str(tmp_path)}), 1)
    with pytest.raises(BrrrFallbackError, match="on a cycle"):
        build_runner(plan, compiled, strict=True)
