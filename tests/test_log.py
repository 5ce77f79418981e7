"""brrr's warnings: each shows once, through `warnings` only (no second copy from the
logging module), pointing at the user's line; fallbacks become errors under strict."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from brrr_compiler import BrrrFallbackError, BrrrWarning
from brrr_compiler import log as brrr_log

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(brrr_log, "_warned", set())


def test_warn_once_is_one_warning_and_no_log_output(recwarn, capsys):
    for _ in range(3):
        brrr_log.warn_once("k", "brrr: something ran through ATen instead")
    assert [str(w.message) for w in recwarn] == ["brrr: something ran through ATen instead"]
    assert recwarn[0].category is BrrrWarning and issubclass(BrrrWarning, RuntimeWarning)
    assert recwarn[0].filename == __file__          # the caller outside brrr, not log.py
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_fallback_warns_or_raises_under_strict(recwarn):
    brrr_log.fallback("f", "brrr: kernel k0 failed; its ops run through ATen instead", False)
    assert len(recwarn) == 1
    with pytest.raises(BrrrFallbackError, match="kernel k0 failed.*strict"):
        brrr_log.fallback("g", "brrr: kernel k0 failed", True)
    assert len(recwarn) == 1


def test_a_users_program_sees_each_warning_once(tmp_path):
    """What a user sees on stderr, default filters and no logging set up: the message once,
    attributed to the user's own line."""
    script = tmp_path / "user_model.py"
    script.write_text(textwrap.dedent("""\
        import torch
        f = torch.compile(lambda x: (x * 2).sin(), backend="brrr", options={"target": "triton"})
        for n in (8, 8, 9):
            f(torch.randn(n))
        """))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(REPO), BRRR_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("target='triton' runs CPU tensors only") == 1, proc.stderr
    assert f"{script}:4: BrrrWarning" in proc.stderr, proc.stderr
