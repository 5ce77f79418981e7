"""The benchmark suites keep working: each suite's --quick mode runs in a subprocess and
writes its markdown (into pytest's tmp_path, never benchmarks/results/). No timing is
asserted: speed belongs to the suites' own results.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"


def _run_quick(script: str, tmp_path, *extra: str) -> str:
    env = dict(os.environ, BRRR_CACHE_DIR=str(tmp_path / "brrr-cache"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor-cache"))
    proc = subprocess.run([sys.executable, str(BENCH / script), "--quick",
                           "--results-dir", str(tmp_path / "results"), *extra],
                          capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("script, out, headings", [
    ("bench_kernels.py", "kernels.md", ["## Targets (issue 5)", "## Time per call",
                                        "## Masks beside their unmasked twins",
                                        "masked kernels within 15% of their unmasked twin",
                                        "## Achieved bandwidth", "stream bandwidth"]),
    ("bench_models.py", "models.md", ["## Targets (issue 5)", "## Results", "peak MB"]),
    ("bench_compile.py", "compile.md", ["## Cold and warm first call",
                                        "## Compile time vs graph size", "linear fit"]),
])
def test_quick_mode_writes_its_results(tmp_path, script, out, headings):
    _run_quick(script, tmp_path)
    text = (tmp_path / "results" / out).read_text()
    for heading in headings:
        assert heading in text
    assert "MALLOC_MMAP_MAX_=0" in text and ": set for the whole process" in text
    assert "failed:" not in text and "mismatch" not in text


def test_markdown_is_written_without_matplotlib(tmp_path, monkeypatch):
    sys.path.insert(0, str(BENCH))
    try:
        import bench_kernels
        import plots
    finally:
        sys.path.remove(str(BENCH))
    monkeypatch.setattr(plots, "plt", None)
    result = {"nbytes": 4096, "times": {"eager": 2e-6, "brrr": 1e-6},
              "spread": {"eager": 0.0, "brrr": 0.0}, "status": {}}
    notes = bench_kernels.plot({"case": result}, ["eager", "brrr"], 1e10, tmp_path)
    assert "matplotlib is not installed" in notes[0]
    assert not list(tmp_path.glob("*.png"))


def test_harness_fit_and_cache_size():
    sys.path.insert(0, str(BENCH))
    try:
        import harness
    finally:
        sys.path.remove(str(BENCH))
    (slope, intercept), r2 = harness.polyfit([1, 2, 4, 8], [1.5, 2.0, 3.0, 5.0], 1)
    assert (slope, intercept, r2) == (pytest.approx(0.5), pytest.approx(1.0), pytest.approx(1.0))
    assert harness.backend_spec("brrr:none") == ("brrr", {"fusion": "none"})
    assert harness.backend_spec("brrr:low_precision=eager") == ("brrr", {"low_precision": "eager"})
    with pytest.raises(ValueError):
        harness.backend_spec("inductor:none")
    assert harness.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert harness.llc_bytes() >= 0


def _bench_module(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(BENCH))


def test_floor_backend_returns_the_first_outputs_and_targets_name_cases_under_it():
    """The floor (Dynamo's own per-call cost) computes nothing per call; the kernel
    suite's eager target names the cases whose eager call is faster than it, and those
    where brrr less the floor is within 5% of eager."""
    import torch
    harness, bench = _bench_module("harness"), _bench_module("bench_kernels")
    torch._dynamo.reset()
    floor = torch.compile(lambda x: x * 2, backend=harness.resolve_backend(harness.FLOOR))
    x = torch.ones(3)
    first = floor(x)
    assert torch.equal(first, x * 2) and floor(torch.zeros(3)) is first
    torch._dynamo.reset()
    ms = 1e-3
    results = {
        "tiny": {"nbytes": 1, "times": {"eager": 0.006 * ms, "floor": 0.014 * ms,
                                        "inductor": 0.03 * ms, "brrr": 0.02 * ms}},
        "small": {"nbytes": 1, "times": {"eager": 0.03 * ms, "floor": 0.014 * ms,
                                         "inductor": 0.05 * ms, "brrr": 0.031 * ms}},
        "big": {"nbytes": 1, "times": {"eager": 2 * ms, "floor": 0.014 * ms,
                                       "inductor": 3 * ms, "brrr": 1 * ms}},
    }
    text = "\n".join(bench.targets(results, 30e9, 1 << 40))
    assert "MISSED on 2 of 3: tiny" in text
    assert "faster than Dynamo's own per-call cost (the `floor` column) on 1 case(s): tiny" in text
    assert "on 1 other miss(es) brrr less the floor is at most 5% over eager's time or " \
           "below it: small" in text


def test_mask_targets_compare_each_masked_case_with_its_twin():
    report = _bench_module("kernels_report")
    ms, ok = 1e-3, {"brrr": "ok", report.TWIN: "ok"}
    results = {
        "masked_softmax 4x6x512": {"status": ok, "times": {"eager": 7 * ms, "brrr": 3 * ms,
                                                          report.TWIN: 2 * ms}},
        "masked_fill 256x256": {"status": ok, "times": {"eager": 1 * ms, "brrr": 0.5 * ms,
                                                       report.TWIN: 0.48 * ms}},
        "softmax 256x1024": {"status": {"brrr": "ok"}, "times": {"eager": 1 * ms, "brrr": 1 * ms}},
    }
    text = "\n".join(report.mask_targets(results))
    assert "unmasked twin: MISSED on 1 of 2: masked_softmax 4x6x512 (1.50x)" in text
    assert "masked softmax >= 1.5x eager: MET" in text     # 7 / 3 = 2.33x
    rows = report.mask_rows(results)
    assert [r["case"] for r in rows] == ["masked_softmax 4x6x512", "masked_fill 256x256"]
    assert rows[1]["masked / no mask"] == "1.04x"


def test_brrr_bench_finds_the_checkout():
    from brrr_compiler.cli import benchmarks_dir, build_parser

    assert benchmarks_dir() == BENCH
    args = build_parser().parse_args(["bench", "kernels", "--quick"])
    assert (args.suite, args.quick) == ("kernels", True)
