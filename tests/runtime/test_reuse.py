"""runtime/reuse.py: a kernel this process has built is bound again, not compiled again."""
import torch
from torch.testing import assert_close

from brrr_compiler.backend import lower_plan
from brrr_compiler.config import build_config
from brrr_compiler.runtime.kernels import build_kernels
from brrr_compiler.runtime.runner import build_runner
from tests.helpers import check_against_eager, plan_of, spy_builds


def _f(x):
    return torch.sigmoid(x * 2 + 1)


def _build(plan, cache_dir):
    kernels, specs, printed, _ = lower_plan(plan, "cpp", 1)
    return build_kernels(kernels, specs, build_config({"cache_dir": str(cache_dir)}), 1, printed)


def test_same_code_is_bound_not_built_again(tmp_path, monkeypatch):
    x = torch.randn(8, 5)
    first, again = plan_of(_f, x), plan_of(_f, x)
    builds = spy_builds(monkeypatch)
    compiled, _ = _build(first, tmp_path)
    assert len(builds) == 1
    compiled_again, source = _build(again, tmp_path)
    assert len(builds) == 1, "the same code was compiled twice"
    (k,) = compiled_again.values()
    assert source.startswith(f"// {k.name}: the code of ") and "extern" not in source
    assert_close(build_runner(again, compiled_again)([x]), _f(x))


def test_another_cache_dir_builds_its_own(tmp_path, monkeypatch):
    x = torch.randn(8, 5)
    builds = spy_builds(monkeypatch)
    _build(plan_of(_f, x), tmp_path / "a")
    _build(plan_of(_f, x), tmp_path / "b")
    assert len(builds) == 2


def test_backward_binds_the_forwards_layout_copies(tmp_path, monkeypatch):
    """A conv net's backward recomputes the forward's channels-last weight copies: those
    kernels are bound from the forward's libraries, and gradients match eager."""
    conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
    x = torch.randn(2, 3, 8, 8)
    fwd, bwd = check_against_eager(lambda x: torch.relu(conv(x)).sum(), x.requires_grad_(),
                                   options={"cache_dir": str(tmp_path)})
    reused = [line for line in bwd.source.splitlines() if "built earlier" in line]
    assert reused and all("clone" in line for line in reused), bwd.source[:500]
