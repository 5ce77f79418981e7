"""The `brrr` command line: `brrr demo --size small` end to end, and the parser.

The demo runs in a subprocess through the console script that `pip install -e .` puts next
to this interpreter (or `python -m brrr_compiler.cli` where there is none), with the glibc
malloc variables removed from its environment (so that its re-exec is exercised too) and
a fresh kernel cache under pytest's tmp_path (never ~/.cache).
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from brrr_compiler.cli import MALLOC_ENV, build_parser, main

REPO = Path(__file__).resolve().parents[1]


def _brrr_command() -> list[str]:
    script = Path(sys.executable).with_name("brrr")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "brrr_compiler.cli"]


def _demo_env(cache_dir) -> dict:
    """This environment less the malloc settings (so the demo re-execs), with a fresh cache."""
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_ENV}
    env.pop("BRRR_CLI_REEXEC", None)
    env["BRRR_CACHE_DIR"] = str(cache_dir)
    return env


def test_demo_small_runs_and_reports(tmp_path):
    proc = subprocess.run(_brrr_command() + ["demo", "--size", "small", "--rounds", "2"],
                          capture_output=True, text=True, timeout=600, cwd=REPO,
                          env=_demo_env(tmp_path / "brrr-cache"))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "set for the whole process (re-executed to set it)" in out
    # the kernel table: a graph header, then kernel lines naming the ATen ops they fuse
    assert re.search(r"graph\d+_inference \(inference\): [1-9]\d* kernels?\b", out), out
    assert re.search(r"^  k\d+_\w+ +aten\.", out, re.MULTILINE), out
    assert "graph" in out and "(backward):" in out, out
    # the speed table and its speedup column, one row per case
    assert "speedup" in out
    for case in ("transformer_block", "bias_gelu", "silu_mul", "chain10"):
        assert re.search(rf"^  {case} +[\d.]+ +[\d.]+ +[\d.]+x", out, re.MULTILINE), out
    assert "MISMATCH" not in out and "every check matched eager" in out


def test_module_entry_point_prints_help():
    proc = subprocess.run([sys.executable, "-m", "brrr_compiler.cli", "--help"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout


def test_no_subcommand_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["demo", "--size", "huge"], ["demo", "--rounds", "0"],
                                  ["no_such_command"]])
def test_bad_arguments_exit_2(argv):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2


def test_demo_defaults():
    args = build_parser().parse_args(["demo"])
    assert (args.size, args.rounds) == ("full", 15)
