"""Runnable dumps of Triton graphs (runtime/script.py, script_triton.py): compiled with
target="triton" under Triton's interpreter, each graph's file reruns on its own in a
fresh interpreter (which it puts in TRITON_INTERPRET=1 itself: its tensors are on the
CPU), checks brrr's runner against the ATen graph and says why it does not time; a graph
of CUDA tensors on a machine without a GPU is one clear line and exit code 2."""
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from tests.e2e.test_triton_interpret import TRITON, _randn, interpreter  # noqa: F401
from tests.helpers import check_against_eager

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")


def _norm_gelu_gather(x, w, idx):
    # a row reduction, a pointwise chain with tanh (libdevice), an index input (gather)
    y = x / x.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt()
    h = F.gelu(y * w, approximate="tanh") + 1
    return h, torch.gather(h, 1, idx) * 2


@pytest.fixture(scope="module")
def dumped(interpreter, tmp_path_factory):   # noqa: F811 - the fixture imported above
    """{graph name: its runnable file} for the forward and backward of _norm_gelu_gather."""
    root = tmp_path_factory.mktemp("triton-dumps")
    x, w = _randn(8, 32), _randn(32, seed=1)
    idx = torch.randint(0, 32, (8, 4), generator=torch.Generator().manual_seed(2))
    graphs = check_against_eager(_norm_gelu_gather, x, w, idx,
                                 options=dict(TRITON, debug_dir=str(root)))
    assert all("@triton.jit" in g.source for g in graphs if g.kernels)
    (run,) = root.glob("run_*-pid_*")
    return {g.name: run / g.name / f"{g.name}.py" for g in graphs}


def _rerun(path, *args, **env):
    environ = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=600, env=dict(environ, **env), cwd=path.parent)


def test_each_triton_graph_reruns_and_matches_under_the_interpreter(dumped):
    assert sorted(name.split("_")[1] for name in dumped) == ["backward", "forward"]
    for name, path in dumped.items():
        proc = _rerun(path)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert f"{name}: match:" in proc.stdout and "tensors agree" in proc.stdout
        assert f"{name}: not timed: the kernels run through Triton's interpreter" in proc.stdout


def test_the_file_holds_the_triton_module_and_needs_no_brrr(dumped):
    text = dumped[next(n for n in dumped if n.endswith("forward"))].read_text()
    assert "class AtenGraph(torch.nn.Module):" in text and "torch.ops.aten.gather" in text
    assert "KERNELS_TRITON = " in text and "@triton.jit" in text and "LIBDEVICE_PY = " in text
    assert "triton_call(kernels, " in text and "device='cpu'" in text
    assert "from brrr_triton_libdevice import current" in text
    assert "KERNELS_CPP" not in text and "BUILD_COMMAND" not in text
    assert not re.search(r"^\s*(import|from) brrr_compiler", text, re.MULTILINE)


def test_a_changed_reference_is_a_mismatch(dumped, tmp_path):
    path = dumped[next(n for n in dumped if n.endswith("forward"))]
    changed = tmp_path / path.name
    changed.write_text(path.read_text().replace("torch.ops.aten.tanh.default",
                                                "torch.ops.aten.sin.default"))
    proc = _rerun(changed, "--rounds", "0")
    assert proc.returncode == 1 and "MISMATCH" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="says what a machine without a GPU lacks")
def test_a_cuda_graph_without_a_gpu_says_what_it_needs(dumped, tmp_path):
    path = dumped[next(n for n in dumped if n.endswith("forward"))]
    moved = tmp_path / path.name
    moved.write_text(path.read_text().replace("'cpu'", "'cuda:0'"))
    proc = _rerun(moved)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs a CUDA GPU with triton" in lines[0], proc.stderr
