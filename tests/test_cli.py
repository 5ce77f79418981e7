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


# ---- brrr --version, brrr cache --------------------------------------------------------

def test_version_prints_the_one_version():
    import brrr_compiler
    proc = subprocess.run(_brrr_command() + ["--version"], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert proc.returncode == 0 and proc.stdout.strip() == f"brrr {brrr_compiler.__version__}"


def _fill_cache(root: Path) -> None:
    (root / "ab").mkdir(parents=True)
    for ext in (".so", ".cpp", ".sha256"):
        (root / "ab" / ("ab" + "0" * 62 + ext)).write_bytes(b"x" * 1000)


def test_cache_info_and_clear(tmp_path, capsys, monkeypatch):
    cache_dir, calibration = tmp_path / "cache", tmp_path / "config"
    _fill_cache(cache_dir)
    calibration.mkdir()
    (calibration / "device.json").write_text("{}")
    monkeypatch.setenv("BRRR_CALIBRATION_DIR", str(calibration))
    monkeypatch.setenv("BRRR_CACHE_MAX_BYTES", "2G")
    assert main(["cache", "info", "--cache-dir", str(cache_dir)]) == 0
    out = capsys.readouterr().out
    assert f"location:    {cache_dir}" in out and "entries:     1" in out
    assert "size:        2.9 KiB (cap 2.0 GiB" in out
    assert f"calibration: {calibration / 'device.json'}" in out
    monkeypatch.setenv("BRRR_CACHE_DIR", str(cache_dir))
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert f"removed 1 entries (2.9 KiB) from {cache_dir}" in out
    assert f"calibration kept: {calibration / 'device.json'}" in out
    assert list(cache_dir.iterdir()) == [] and (calibration / "device.json").exists()
    assert main(["cache", "clear", "--cache-dir", str(tmp_path / "none")]) == 0
    assert "nothing to clear" in capsys.readouterr().out


def test_cache_info_says_when_the_dir_is_not_trusted(tmp_path, capsys):
    _fill_cache(tmp_path / "cache")
    os.chmod(tmp_path / "cache", 0o777)
    assert main(["cache", "info", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "not trusted: the directory is writable by group and others" in capsys.readouterr().out


@pytest.mark.parametrize("argv,env,message", [
    (["cache", "info", "--cache-dir", "FILE"], {}, "is not a directory"),
    (["cache", "clear", "--cache-dir", "FILE"], {}, "is not a directory"),
    (["cache", "info"], {"BRRR_NUM_THREADS": "abc"}, "BRRR_NUM_THREADS='abc': expected an integer"),
    (["cache", "info"], {"BRRR_CACHE_MAX_BYTES": "big"}, "BRRR_CACHE_MAX_BYTES='big'"),
])
def test_cache_bad_input_is_one_line_and_exit_2(argv, env, message, tmp_path, capsys, monkeypatch):
    (tmp_path / "FILE").write_text("a file")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    argv = [str(tmp_path / "FILE") if a == "FILE" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"brrr {argv[0]}: error: ") and message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cache_needs_an_action():
    for argv in (["cache"], ["cache", "purge"]):
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args(argv)
        assert exc.value.code == 2
