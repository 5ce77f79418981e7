"""brrr in torch's logging (torch_logs.py's note): TORCH_LOGS names brrr's log and artifacts,
TORCH_TRACE gets brrr's plan and kernels per graph, TORCH_COMPILE_DEBUG gets its dumps.

torch reads TORCH_LOGS while `import torch` runs, so only a fresh interpreter with the
variable set proves it: each test runs one in a subprocess, with a fresh kernel cache.
"""
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import torch
    def f(x):
        return (x.sin() * 2 + 1).sum(-1)
    x = torch.randn(4, 8)
    torch.testing.assert_close(torch.compile(f, backend="brrr")(x), f(x))
    print("RAN_OK")
""")


def _run(tmp_path, **env):
    full = dict(os.environ, BRRR_CACHE_DIR=str(tmp_path / "cache"), **env)
    for var in ("TORCH_LOGS", "TORCH_TRACE", "TORCH_COMPILE_DEBUG", "BRRR_DEBUG_DIR"):
        if var not in env:
            full.pop(var, None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=full,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "RAN_OK" in proc.stdout, proc.stderr[-3000:]
    return proc.stderr


def test_the_autoload_entry_point_is_installed():
    points = importlib.metadata.entry_points(group="torch.backends")
    if not any(p.value == "brrr_compiler.torch_logs:register_with_torch" for p in points):
        pytest.fail("brrr's torch.backends entry point is missing: reinstall brrr "
                    "(pip install -e .) so that `import torch` registers its log names")


def test_torch_logs_brrr_prints_each_graphs_report(tmp_path):
    err = _run(tmp_path, TORCH_LOGS="brrr")
    assert "graph" in err and "_inference (inference): 1 kernel" in err, err[-3000:]
    assert "fusion decisions" in err
    assert "extern \"C\"" not in err            # artifacts stay off unless named
    assert "pass dce:" not in err               # DEBUG lines too


def test_plus_brrr_adds_debug_lines(tmp_path):
    err = _run(tmp_path, TORCH_LOGS="+brrr")
    assert "_inference (inference): 1 kernel" in err, err[-3000:]
    # brrr.passes logs each pass's node counts at DEBUG
    assert any(line.startswith("V") and "pass dce:" in line for line in err.splitlines())


def test_brrr_artifacts_by_name(tmp_path):
    err = _run(tmp_path, TORCH_LOGS="brrr_output_code,brrr_fusion,brrr_graphs")
    assert "[__brrr_output_code]" in err and re.search(r"extern \"C\" (BRRR_WIDE )?void k0_", err), \
        err[-3000:]
    assert "[__brrr_fusion]" in err and "FusionPlan" in err
    assert "[__brrr_graphs]" in err and "aten_after.py" in err
    assert "_inference (inference): 1 kernel" not in err    # the brrr log is not on


def test_torch_artifact_names_show_brrr_too(tmp_path):
    err = _run(tmp_path, TORCH_LOGS="output_code,fusion")
    assert "[__output_code]" in err and re.search(r"extern \"C\" (BRRR_WIDE )?void k0_", err), \
        err[-3000:]
    assert "[__fusion]" in err and "FusionPlan" in err


def _trace_artifacts(folder: Path) -> list[dict]:
    records = []
    for path in folder.glob("*.log"):
        for line in path.read_text().splitlines():
            start = line.find("{")
            if start >= 0 and '"artifact"' in line:
                records.append(json.loads(line[start:]))
    return records


def test_torch_trace_has_brrr_plan_and_kernels_per_graph(tmp_path):
    _run(tmp_path, TORCH_TRACE=str(tmp_path / "trace"))
    records = [r for r in _trace_artifacts(tmp_path / "trace")
               if r["artifact"]["name"].startswith("brrr_")]
    names = {r["artifact"]["name"] for r in records}
    for part in ("aten_before", "aten_after", "fusion_plan", "kernels", "runner", "runnable"):
        assert any(n.endswith(f"_inference_{part}") for n in names), (part, names)
    # each under the compile that made it, as tlparse groups them
    assert all(r.get("frame_id") == 0 and r.get("has_payload") for r in records)


def test_torch_compile_debug_puts_dumps_in_torchs_folder(tmp_path):
    _run(tmp_path, TORCH_COMPILE_DEBUG="1")
    (folder,) = (tmp_path / "torch_compile_debug").glob("run_*-pid_*/brrr/graph*_inference")
    assert (folder.parent.parent / "torchdynamo" / "debug.log").is_file()   # torch's run
    assert (folder / "fusion_plan.txt").is_file() and (folder / "kernels.cpp").is_file()
    assert (folder / f"{folder.name}.py").is_file()


def test_help_lists_brrr_names():
    from torch._logging._internal import help_message
    text = help_message(verbose=True)
    for name in ("brrr", "brrr_output_code", "brrr_fusion", "brrr_graphs"):
        assert name in text
