"""Debug dumps (debug.py): one folder per process run, and per graph a runnable file
(runtime/script.py) that rebuilds the kernels and checks brrr's runner against the ATen
graph; run here in subprocesses, as a user would."""
import logging
import os
import re
import subprocess
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from brrr_compiler import debug
from brrr_compiler.capture import decomposition_table
from brrr_compiler.runtime import script_main
from brrr_compiler.runtime.script_inputs import input_specs
from tests.helpers import check_against_eager


def _norm_gelu_gather(x, w, idx):
    # a row reduction, a pointwise chain, and an index input (gather along dim 1)
    y = x / x.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt()
    h = torch.nn.functional.gelu(y * w) + 1
    return h, torch.gather(h, 1, idx) * 2


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    """{graph name: its runnable file} for the forward and backward of _norm_gelu_gather."""
    root = tmp_path_factory.mktemp("dumps")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 32, generator=gen, requires_grad=True)
    w = torch.randn(32, generator=gen, requires_grad=True)
    idx = torch.randint(0, 32, (8, 4), generator=gen)
    graphs = check_against_eager(_norm_gelu_gather, x, w, idx,
                                 options={"debug_dir": str(root),
                                          "cache_dir": str(root / "cache")})
    (run,) = root.glob("run_*-pid_*")
    return {g.name: run / g.name / f"{g.name}.py" for g in graphs}


def _rerun(path, *args, **env):
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, **env), cwd=path.parent)


def test_each_graph_reruns_and_matches(dumped):
    assert sorted(name.split("_")[1] for name in dumped) == ["backward", "forward"]
    for name, path in dumped.items():
        proc = _rerun(path, "--rounds", "1")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"{name}: match:" in proc.stdout and "tensors agree" in proc.stdout
        assert "us per call" in proc.stdout


def test_the_file_holds_graph_inputs_kernels_and_command(dumped):
    text = dumped[next(n for n in dumped if n.endswith("forward"))].read_text()
    assert "class AtenGraph(torch.nn.Module):" in text and "torch.ops.aten.gather" in text
    assert "((8, 4), (4, 1), 0, torch.int64, 'cpu', 32)" in text   # the index stays < 32
    assert "def brrr_runner(self, args_list):" in text and "KERNELS_CPP = " in text
    assert "BUILD_COMMAND = [" in text and "'{source}'" in text
    assert not re.search(r"^\s*(import|from) brrr", text, re.MULTILINE)   # needs no brrr


def test_a_changed_reference_is_a_mismatch(dumped, tmp_path):
    path = dumped[next(n for n in dumped if n.endswith("forward"))]
    changed = tmp_path / path.name
    changed.write_text(path.read_text().replace("torch.ops.aten.erf.default", "torch.ops.aten.sin.default"))
    proc = _rerun(changed, "--rounds", "0")
    assert proc.returncode == 1 and "MISMATCH" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("cxx, says", [("/no/such/dir/brrr-no-compiler", "no C++ compiler here"),
                                       ("false", "the kernels did not build")])
def test_without_a_working_compiler_one_clear_line(dumped, cxx, says):
    path = next(iter(dumped.values()))
    proc = _rerun(path, BRRR_CXX=cxx)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_process_run_gets_its_own_folder(tmp_path, monkeypatch):
    first = debug.run_folder(str(tmp_path))
    assert debug.run_folder(str(tmp_path)) == first           # one per process
    monkeypatch.setattr(os, "getpid", lambda: 12345)          # another process
    second = debug.run_folder(str(tmp_path))
    assert second != first and second.endswith("-pid_12345")
    assert debug.dump_folder(None, False) is None
    assert debug.dump_folder(str(tmp_path), False) == second


def test_random_inputs_keep_layout_and_index_range():
    t = script_main.random_input(((3, 4), (1, 5), 2, torch.float32, "cpu"))
    assert (t.shape, t.stride(), t.storage_offset()) == ((3, 4), (1, 5), 2)
    idx = script_main.random_input(((1000,), (1,), 0, torch.int64, "cpu", 7))
    assert idx.min() >= 0 and idx.max() < 7 and idx.unique().numel() == 7
    assert script_main.random_input(5) == 5
    copy = script_main.copy_input(t)
    assert copy.stride() == t.stride() and torch.equal(copy, t) and copy.data_ptr() != t.data_ptr()


def test_compare_reports_the_first_difference():
    a = [torch.ones(3), torch.zeros(2, dtype=torch.int64)]
    ok, summary = script_main.compare(a, [torch.ones(3), torch.zeros(2, dtype=torch.int64)])
    assert ok and "2 tensors agree" in summary
    ok, summary = script_main.compare(a, [torch.ones(3), torch.ones(2, dtype=torch.int64)])
    assert not ok and "tensor 1 differs" in summary


def _graph(fn, *args):
    # brrr's decompositions: cross_entropy's target reaches a gather through a where
    return make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args).graph


@pytest.mark.parametrize("fn, args, high", [
    (lambda w, i: torch.nn.functional.embedding(i, w), (torch.randn(50, 3), torch.zeros(4, 6, dtype=torch.long)), 50),
    (lambda x, t: torch.nn.functional.nll_loss(x, t), (torch.randn(4, 9), torch.zeros(4, dtype=torch.long)), 9),
    (lambda x, t: torch.nn.functional.cross_entropy(x, t), (torch.randn(4, 9), torch.zeros(4, dtype=torch.long)), 9),
    (lambda x, i: x[i.view(-1)], (torch.randn(20, 2), torch.zeros(2, 3, dtype=torch.long)), 20),
    (lambda x, i: x.index_select(1, i), (torch.randn(30, 11), torch.zeros(5, dtype=torch.long)), 11),
    (lambda x, i: x + i, (torch.randn(6, 4), torch.zeros(6, 4, dtype=torch.long)), 4),   # no index: smallest dim
])
def test_integer_inputs_stay_inside_what_they_index(fn, args, high):
    specs = input_specs(_graph(fn, *args))
    (int_spec,) = [s for s in specs if s[3] == torch.int64]
    assert int_spec[5] == high


def test_a_graph_name_dumped_twice_keeps_both(tmp_path):
    for text in ("first", "second"):
        dump = debug.GraphDump(str(tmp_path), "graph0_forward")
        dump.write("fusion_plan.txt", text)
        dump.write("runner.py", lambda: text + " runner")
    assert (tmp_path / "graph0_forward" / "fusion_plan.txt").read_text() == "first"
    assert (tmp_path / "graph0_forward.1" / "fusion_plan.txt").read_text() == "second"
    assert (tmp_path / "graph0_forward.1" / "runner.py").read_text() == "second runner"


def test_a_text_that_cannot_be_made_is_skipped_with_a_warning(tmp_path, caplog):
    def cannot():
        raise NotImplementedError("no reason at all")

    brrr = logging.getLogger("brrr")
    brrr.addHandler(caplog.handler)         # brrr's logger is torch's: it does not propagate
    try:
        debug.GraphDump(str(tmp_path), "graph1_forward").write("graph1_forward.py", cannot)
    finally:
        brrr.removeHandler(caplog.handler)
    assert not (tmp_path / "graph1_forward" / "graph1_forward.py").exists()
    assert "graph1_forward/graph1_forward.py not written: no reason at all" in caplog.text


def _masked_softmax_with_constant(x, m):
    # a tensor constant (get_attr), a bool input, a bfloat16 output
    return torch.where(m, x * torch.tensor([1., 2., 3.]), 0.).softmax(-1).to(torch.bfloat16)


def test_a_graph_with_a_constant_and_a_mask_reruns(tmp_path):
    gen = torch.Generator().manual_seed(0)
    x, m = torch.randn(5, 3, generator=gen), torch.rand(5, 3, generator=gen) > 0.5
    (graph,) = check_against_eager(_masked_softmax_with_constant, x, m, grad=False,
                                   options={"debug_dir": str(tmp_path),
                                            "cache_dir": str(tmp_path / "cache")})
    (path,) = tmp_path.glob(f"run_*/{graph.name}/{graph.name}.py")
    assert "self._tensor_constant0 = torch.tensor([1.0, 2.0, 3.0]" in path.read_text()
    proc = _rerun(path, "--rounds", "0")
    assert proc.returncode == 0 and f"{graph.name}: match:" in proc.stdout, proc.stdout + proc.stderr


def test_a_graph_that_updates_its_input_in_place_reruns(tmp_path):
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(6, 5, generator=gen), torch.randn(6, 5, generator=gen)
    (graph,) = check_against_eager(lambda x, y: x.mul_(y).add_(1), x, y, grad=False,
                                   options={"debug_dir": str(tmp_path),
                                            "cache_dir": str(tmp_path / "cache")})
    assert "aten.copy_" not in graph.runner_code          # stored in place (inplace.py)
    (path,) = tmp_path.glob(f"run_*/{graph.name}/{graph.name}.py")
    proc = _rerun(path, "--rounds", "0")
    assert proc.returncode == 0 and f"{graph.name}: match:" in proc.stdout, proc.stdout + proc.stderr
