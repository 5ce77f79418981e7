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


def _run_quick(script: str, tmp_path, *extra: str, quick: bool = True) -> str:
    env = dict(os.environ, BRRR_CACHE_DIR=str(tmp_path / "brrr-cache"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor-cache"))
    proc = subprocess.run([sys.executable, str(BENCH / script), *(["--quick"] if quick else []),
                           "--results-dir", str(tmp_path / "results"), *extra],
                          capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.scripts
@pytest.mark.parametrize("script, out, headings", [
    ("bench_kernels.py", "kernels.md", ["## Targets", "## Time per call",
                                        "## Masks beside their unmasked twins",
                                        "masked kernels within 15% of their unmasked twin",
                                        "## Achieved bandwidth", "stream bandwidth"]),
    ("bench_models.py", "models.md", ["## Targets", "## Step time",
                                      "## Time outside library calls", "## Compile time",
                                      "peak MB"]),
    ("bench_norm_training.py", "norm_training.md", ["brrr:fold_across_rows=False / brrr",
                                                    "stream bandwidth"]),
    ("bench_patterns.py", "patterns.md", ["## By size class", "## Slower than eager"]),
    ("bench_sweep.py", "sweep.md", ["| dtype | kind | timed |", "## Slower than eager",
                                    "## brrr failed or disagreed with eager"]),
    ("bench_autotune.py", "autotune_runs.md", ["| case | fusion | threads | default cold s |",
                                               "| measured merges | against policy |"]),
    ("bench_epilogues.py", "epilogues.md", ["brrr / epilogues", "linear 64x32x48 + gelu"]),
    ("cost_validation.py", "cost_validation.md", ["## Fit", "## The ten worst predictions",
                                                  "| all |"]),
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


@pytest.mark.scripts
def test_call_overhead_suite_writes_its_results(tmp_path):
    """bench_call_overhead.py has no --quick mode: one workload, two short rounds."""
    _run_quick("bench_call_overhead.py", tmp_path, "--rounds", "2", "--iters", "5",
               "--only", "x", quick=False)
    text = (tmp_path / "results" / "call_overhead.md").read_text()
    assert "aot_floor" in text and (tmp_path / "results" / "call_overhead.json").exists()


# MobileNetV2 trains in the full suite only: Dynamo alone takes a minute or two to trace
# its seventeen blocks' forward and backward on a loaded 2-core machine.
@pytest.mark.scripts
@pytest.mark.parametrize("models, modes", [
    ("gpt2,bert,llama,t5,vit,resnet,convnext,mlp,norm_block", "inference1,training"),
    ("mobilenet", "inference1"),
])
def test_model_suite_runs_every_model_and_brrr_matches_eager(tmp_path, models, modes):
    """Each model of the suite, at tiny sizes, one round: brrr's first call matches eager
    (outputs; training: the loss and every parameter gradient), and every row is timed,
    profiled and written."""
    pytest.importorskip("transformers")
    import json
    _run_quick("bench_models.py", tmp_path, "--tiny", "--rounds", "1", "--backends",
               "eager,brrr", "--models", models, "--modes", modes, quick=False)
    raw = json.loads((tmp_path / "results" / "models.json").read_text())
    rows = {(r["model"], r["mode"]): r for r in raw["results"]}
    assert set(rows) == {(m, mode) for m in models.split(",") for mode in modes.split(",")}
    for key, r in rows.items():
        assert r["status"]["brrr"].startswith("ok"), (key, r["status"])
        assert set(r["times"]) == {"eager", "brrr"} and set(r["breakdown"]) == set(r["times"])
    assert "## Time outside library calls" in (tmp_path / "results" / "models.md").read_text()


def test_model_suite_says_how_to_install_transformers(monkeypatch):
    bench = _bench_module("bench_models")
    monkeypatch.setitem(sys.modules, "transformers", None)     # import raises ImportError
    assert "pip install -e '.[bench]'" in bench._missing_libraries(["mlp", "gpt2"])
    assert bench._missing_libraries(["mlp", "norm_block"]) is None


def test_library_time_counts_innermost_library_calls_once():
    """aten::linear -> aten::addmm counts addmm's interval once; a brrr kernel and the
    other ATen calls fill their own categories; the rest is what no event covers."""
    lt = _bench_module("library_time")

    class Ev:
        def __init__(self, name, start, end, parent=None):
            self.name, self.cpu_parent = name, parent
            self.time_range = type("R", (), {"start": start, "end": end,
                                             "elapsed_us": lambda self: end - start})()

    step = Ev(lt.STEP_RANGE, 0, 100)
    linear = Ev("aten::linear", 0, 30, step)
    events = [step, linear, Ev("aten::t", 0, 5, linear), Ev("aten::addmm", 5, 30, linear),
              Ev("brrr::graph0_forward", 30, 60, step), Ev("brrr::fused_gelu", 32, 40, step),
              Ev("aten::_scaled_dot_product_flash_attention_for_cpu", 40, 50, step),
              Ev("aten::convolution_backward", 60, 70, step), Ev("aten::add", 70, 75, step)]
    b = lt.breakdown(events)
    us = {k: round(v * 1e6, 6) for k, v in b.items()}
    assert us == {"gemm": 25, "conv": 10, "attention": 10, "brrr kernels": 8, "optimizer": 0,
                  "other aten": 5 + 5, "rest": 100 - 25 - 10 - 10 - 8 - 10, "step": 100}
    assert lt.union_length([(0, 10), (5, 15), (20, 25)]) == 20


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


def test_slower_than_eager_counts_brrrs_time_above_the_floor():
    """A case is slower than eager when brrr's time less Dynamo's floor (what any compiled
    call pays) exceeds 1.1x eager's; the wall-time count keeps the floor in."""
    report = _bench_module("bench_patterns_report")
    us = 1e-6

    def row(eager, floor, brrr):
        return {"times": {"eager": eager * us, "floor": floor * us, "brrr": brrr * us}}

    cold_floor = row(147, 40, 185)      # x + 1.5 of 1M floats on the Intel VM
    assert not report.slower_than_eager(cold_floor) and report.slower_wall_time(cold_floor)
    own_work = row(100, 10, 125)        # brrr's own 115 us > 110
    assert report.slower_than_eager(own_work) and report.slower_wall_time(own_work)
    below_floor = row(5, 8, 30)         # eager beats any compiled call
    assert not report.slower_than_eager(below_floor) and not report.slower_wall_time(below_floor)
    no_floor = {"times": {"eager": 100 * us, "brrr": 111 * us}}
    assert report.slower_than_eager(no_floor) and report.slower_wall_time(no_floor)


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


def test_brrr_bench_models_passes_its_choices_to_the_suite():
    from brrr_compiler.cli import _suite_options, build_parser

    args = build_parser().parse_args(["bench", "models", "--models", "gpt2,resnet", "--modes",
                                      "training", "--rounds", "3", "--tiny"])
    assert _suite_options(args) == (["--models", "gpt2,resnet", "--modes", "training",
                                     "--tiny", "--rounds", "3"], None)
    wrong = build_parser().parse_args(["bench", "compile", "--modes", "training"])
    assert _suite_options(wrong) == ([], "--modes applies to `brrr bench models`, not "
                                         "`brrr bench compile`")
    run_all = _bench_module("run_all")
    parsed = run_all.parse_args(["--quick", "models", "--", "--models", "gpt2", "--tiny"])
    assert (parsed.quick, parsed.suite, parsed.extra) == (True, "models",
                                                          ["--models", "gpt2", "--tiny"])


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
        {"backends": list(times), "results": [{"model": "gpt2", "mode": "training",
                                               "times": times,
                                               "outside": {"inductor": 2e-4, "brrr": 1e-4}}]}))
    (tmp_path / "cost_model.json").write_text(json.dumps(
        {"kernels": [{"name": "add_4MB", "meas": 2e-4, "pred": 1.9e-4, "bound": "memory"},
                     {"name": "softmax_4MB", "meas": 1.8e-3, "pred": 1.1e-3, "bound": "compute"}],
         "policies": []}))
    _bench_module("replot").main(["--results-dir", str(tmp_path)])
    for png in ("kernels_speedup.png", "kernels_bandwidth.png", "models_speedup.png",
                "models_outside.png", "cost_model.png"):
        assert (tmp_path / png).stat().st_size > 0, png
    assert not (tmp_path / "compile_scaling.png").exists()      # no compile.json


@pytest.mark.scripts
def test_vector_audit_reports_the_loops_gcc_left_scalar(tmp_path):
    """Two generated patterns, compiled and audited; seed 6 at L2 (a mask OR'd with a float
    compare beside log1p) had a scalar loop before bool stores became selects."""
    out = tmp_path / "audit.md"
    proc = subprocess.run([sys.executable, str(BENCH / "vector_audit.py"), "--seeds", "5:7",
                           "--sizes", "l2", "--out", str(out)], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "seed 6 l2: 0 scalar loop(s)" in proc.stderr
    assert out.read_text().startswith("# Scalar `omp simd` loops in generated patterns")

