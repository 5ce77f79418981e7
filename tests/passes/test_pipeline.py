"""The pass pipeline: its order, selection by name, and a full run on a small graph."""
import ast
import pathlib
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import FileCheck, assert_close

from brrr_compiler import passes
from brrr_compiler.passes import PASSES, PIPELINE, run_pipeline

aten = torch.ops.aten


def _fn(x):
    a = (x + 1).clone().view(2, 3) * 1
    b = (x + 1).view(2, 3)
    x.sin()
    return a + b, torch.rand_like(x), torch.rand_like(x)


def _trace():
    return make_fx(_fn, tracing_mode="fake")(torch.randn(2, 3))


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_order_and_names():
    names = ["conv_channels_last", "scalar_reductions", "remove_noops", "unused_factors",
             "fill_constants", "mask_index_put",
             "full_reductions", "broadcast_reductions", "short_inner_reductions", "cse", "dce"]
    assert [p.__name__ for p in PIPELINE] == names
    assert list(PASSES) == names + ["linear_epilogues"]


def test_full_pipeline():
    gm = run_pipeline(_trace())
    rand = aten.rand_like.default
    assert _targets(gm) == [aten.add.Tensor, aten.add.Tensor, rand, rand]
    FileCheck().check("aten.add.Tensor(add, add)").run(gm.code)
    assert all("val" in n.meta for n in gm.graph.nodes if n.op != "output")
    x = torch.randn(2, 3)
    out = gm(x)
    assert_close(out[0], _fn(x)[0])
    assert [t.shape for t in out[1:]] == [x.shape, x.shape]


def test_named_passes_run_alone_in_order():
    gm = run_pipeline(_trace(), ("dce",))
    FileCheck().check("aten.clone").check("aten.view").check_not("aten.sin").run(gm.code)
    gm = run_pipeline(gm, ("cse", "dce"))
    assert _targets(gm).count(aten.add.Tensor) == 2  # x+1 merged, a+b stays


def test_unknown_name_lists_valid_ones():
    with pytest.raises(ValueError, match="remove_noops"):
        run_pipeline(_trace(), ("cse", "no_such_pass"))


def test_passes_import_only_torch_stdlib_and_log():
    for path in pathlib.Path(passes.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue        # relative imports stay inside passes/
            for name in names:
                top = name.split(".")[0]
                ok = top in sys.stdlib_module_names or top == "torch"
                assert ok or name == "brrr_compiler.log", f"{path.name} imports {name}"


def test_only_the_driver_imports_passes():
    """passes/ is installed as brrr_compiler.passes; inside brrr_compiler only the driver
    (backend.py) names it."""
    package = pathlib.Path(passes.__file__).parents[1] / "brrr_compiler"
    importers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "brrr_compiler":
                names = ["brrr_compiler." + a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n.split(".")[:2] == ["brrr_compiler", "passes"] or n.split(".")[0] == "passes"
                   for n in names):
                importers.add(path.relative_to(package).as_posix())
    assert importers == {"backend.py"}
