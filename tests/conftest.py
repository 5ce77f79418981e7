"""Shared pytest setup: make the repository root importable, so `import brrr_compiler`
finds this checkout under a bare `pytest` as well as `python -m pytest`. (passes/ is
`brrr_compiler.passes`, a package-dir mapping that `pip install -e .` sets up.)"""
import os
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

# every kernel lowered under the tests is checked by the kernel-IR verifier
# (brrr_compiler/kernel_verify.py); a broken rule fails the compile that made it
os.environ.setdefault("BRRR_VERIFY_IR", "1")


@pytest.fixture(scope="session", autouse=True)
def no_calibration(tmp_path_factory):
    """Tests never read this machine's `brrr calibrate` numbers (~/.config/brrr): compiles
    see the generic CPU unless a test saves a calibration of its own."""
    old = os.environ.get("BRRR_CALIBRATION_DIR")
    os.environ["BRRR_CALIBRATION_DIR"] = str(tmp_path_factory.mktemp("brrr-calibration"))
    yield
    if old is None:
        os.environ.pop("BRRR_CALIBRATION_DIR", None)
    else:
        os.environ["BRRR_CALIBRATION_DIR"] = old


@pytest.fixture(autouse=True)
def seeded_torch(request):
    """Each test draws its unseeded random inputs from a seed of its own name, so a failure
    repeats when the test runs alone or in another order (a float32 sum whose tolerance was
    too tight failed CI on one draw in two and passed every rerun)."""
    import zlib

    import torch
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(autouse=True)
def epyc_streaming_threshold(monkeypatch):
    """Outputs stream past the caches from the LLC size sysfs reports (schedule/stream.py);
    tests pin it to 32 MB, so what a test's kernel streams does not depend on the machine
    that runs it."""
    from brrr_compiler.schedule import stream
    monkeypatch.setattr(stream, "stream_min_bytes", lambda: 32 << 20)


@pytest.fixture(autouse=True)
def untimed_conv_layouts(monkeypatch):
    """Every eligible convolution goes channels-last (passes/conv_channels_last.MEASURE off):
    what a test's graph holds does not depend on how fast this machine, under the other
    test worker's load, ran a convolution each way (a test of the weight copies' reuse
    found none where the timing chose NCHW). Tests of the timed choice turn it back on."""
    import sys

    import brrr_compiler.passes  # noqa: F401  (registers the pass modules)
    monkeypatch.setattr(sys.modules["brrr_compiler.passes.conv_channels_last"], "MEASURE",
                        False)
