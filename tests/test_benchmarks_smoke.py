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
    ("bench_norm_training.py", "norm_training.md", ["brrr:fold_across_rows=False / brrr",
                                                    "stream bandwidth"]),
    ("bench_autotune.py", "autotune_runs.md", ["| case | fusion | threads | default cold s |",
                                               "| measured merges | against policy |"]),
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
    assert harness.backend_spec("brrr:fold_across_rows=False") == ("brrr", {"fold_across_rows": False})
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


# ---- plots: drawn from tiny synthetic results, read back through matplotlib's objects ------

def _drawn(draw, *args, **kwargs):
    """A fresh figure and axes with `draw(ax, ...)` on it, drawn (tick texts are set then)."""
    plt = pytest.importorskip("matplotlib.pyplot")
    fig, ax = plt.subplots()
    out = draw(ax, *args, **kwargs)
    fig.canvas.draw()
    return fig, ax, out


def test_speedup_bars_are_ticked_in_x_and_labelled_with_their_values():
    plots = _bench_module("plots")
    fig, ax, _ = _drawn(plots.draw_grouped_barh, ["a", "b", "c"],
                        {"vs eager": [0.8, 1.6, 3.2], "vs inductor": [1.1, float("nan"), 2.0]},
                        title="t", xlabel="speedup", lines={"1x": 1.0}, speedup=True)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["1x", "1.25x", "1.5x", "2x", "3x"], ticks
    assert not ax.get_xticklabels(minor=True) or \
        all(not t.get_text() for t in ax.get_xticklabels(minor=True))
    values = {t.get_text() for t in ax.texts}
    assert {"0.8x", "1.6x", "3.2x", "1.1x", "2x"} <= values, values
    bars = [b for c in ax.containers for b in c]
    assert len(bars) == 5                                     # the NaN bar is left out
    assert all(b.get_x() == 1.0 for b in bars)                # from 1x: a slowdown points left
    fig.clf()


def test_speedup_ticks_stay_few_and_readable():
    plots = _bench_module("plots")
    for lo, hi in ((0.3, 7.0), (0.9, 1.1), (1.0, 60.0), (0.05, 200.0)):
        ticks = plots.speedup_ticks(lo, hi)
        assert 1 in ticks and len(ticks) <= plots.MAX_TICKS, (lo, hi, ticks)
    assert [plots.times_label(v) for v in (0.5, 1, 1.5, 12)] == ["0.5x", "1x", "1.5x", "12x"]


def test_bandwidth_bars_read_in_percent():
    plots = _bench_module("plots")
    fig, ax, _ = _drawn(plots.draw_grouped_barh, ["a", "b"], {"brrr": [0.5, 0.92]},
                        title="t", xlabel="x", lines={"75%": 0.75}, percent=True)
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ticks and all(t.endswith("%") for t in ticks), ticks
    assert {"50%", "92%"} <= {t.get_text() for t in ax.texts}
    fig.clf()


def test_scatter_labels_do_not_overlap():
    plots = _bench_module("plots")
    # a tight cluster and a few loners, as the cost-model suite's kernels fall
    points = [(f"kernel_{i}_64MB", 1e-3 * (1 + 0.02 * i), 1e-3 * (1 + 0.03 * (i % 4)),
               "memory" if i % 2 else "compute") for i in range(12)]
    points += [("add_256KB", 30e-6, 29e-6, "memory"), ("softmax_256MB", 0.1, 0.07, "compute")]
    fig, ax, texts = _drawn(plots.draw_predicted_vs_measured, points, title="t")
    renderer = fig.canvas.get_renderer()
    boxes = [plots.text_box(t, renderer) for t in texts]
    assert sorted(t.get_text() for t in texts) == sorted(p[0] for p in points)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert plots._overlap(a, b) == 0, (a, b)
    fig.clf()


def test_compile_scaling_plots_inductor(tmp_path):
    pytest.importorskip("matplotlib")
    scaling = _bench_module("compile_scaling")
    ns = [1, 2, 4, 8]
    times = {"brrr": [0.5, 0.6, 0.8, 1.2], "aot_eager": [0.3, 0.35, 0.45, 0.65],
             "inductor": [2.0, 3.1, 5.0, 9.2]}
    own = [b - a for b, a in zip(times["brrr"], times["aot_eager"])]
    result = {"ns": ns, "times": times, "own": own, "fits": scaling._fits(ns, times["brrr"], own),
              "inductor_fit": {"slope": 1.0, "intercept": 1.0, "r2": 1.0, "line": [1.0, 1.0]}}
    assert scaling.plot_scaling(result, tmp_path) == "Plot: `compile_scaling.png`"
    assert (tmp_path / "compile_scaling.png").stat().st_size > 0
    assert "| inductor s |" in scaling.scaling_section(result, "") and \
        "linear fit of inductor's time" in scaling.scaling_section(result, "")
    plots = _bench_module("plots")
    fig, ax, _ = _drawn(plots.draw_scaling, ns, times, {"brrr": [0.1, 0.4], "inductor": [1, 1]},
                        title="t", xlabel="N", ylabel="s")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "inductor" in legend and "inductor: linear fit" in legend, legend
    fig.clf()


def test_replot_redraws_every_suite_from_its_json(tmp_path):
    import json
    pytest.importorskip("matplotlib")
    times = {"eager": 2e-3, "inductor": 1.5e-3, "brrr": 1e-3}
    case = {"nbytes": 64 << 20, "times": times, "stream": 20e9, "status": {}}
    (tmp_path / "kernels.json").write_text(json.dumps(
        {"bandwidths": [20e9, 22e9], "llc_bytes": 32 << 20, "backends": list(times),
         "cases": {"bias_gelu 4096x4096": case, "softmax 256x256": {**case, "nbytes": 1 << 20}}}))
    (tmp_path / "models.json").write_text(json.dumps(
        {"backends": list(times), "results": [{"model": "gpt", "mode": "training",
                                               "times": times}]}))
    (tmp_path / "cost_model.json").write_text(json.dumps(
        {"kernels": [{"name": "add_4MB", "meas": 2e-4, "pred": 1.9e-4, "bound": "memory"},
                     {"name": "softmax_4MB", "meas": 1.8e-3, "pred": 1.1e-3, "bound": "compute"}],
         "policies": []}))
    _bench_module("replot").main(["--results-dir", str(tmp_path)])
    for png in ("kernels_speedup.png", "kernels_bandwidth.png", "models_speedup.png",
                "cost_model.png"):
        assert (tmp_path / png).stat().st_size > 0, png
    assert not (tmp_path / "compile_scaling.png").exists()      # no compile.json
