"""The benchmarks' timing harness (benchmarks/harness.py): fits, backend names, and how
interleaved rounds call each function. Call counts only; no timing is asserted."""
import mmap
import time
from pathlib import Path

import pytest
import torch

from tests.test_benchmarks_smoke import _bench_module


def test_harness_fit_and_cache_size():
    harness, machine_env = _bench_module("harness"), _bench_module("machine_env")
    (slope, intercept), r2 = harness.polyfit([1, 2, 4, 8], [1.5, 2.0, 3.0, 5.0], 1)
    assert (slope, intercept, r2) == (pytest.approx(0.5), pytest.approx(1.0), pytest.approx(1.0))
    assert harness.backend_spec("brrr:none") == ("brrr", {"fusion": "none"})
    assert harness.backend_spec("brrr:low_precision=eager") == ("brrr", {"low_precision": "eager"})
    assert harness.backend_spec("brrr:fold_across_rows=False") == ("brrr", {"fold_across_rows": False})
    with pytest.raises(ValueError):
        harness.backend_spec("inductor:none")
    assert harness.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert machine_env.llc_bytes() >= 0


def test_interleaved_settles_each_fn_before_its_timed_calls():
    """Each round calls a fn untimed first (a fast fn up to 5 times, a slow one once), so
    no fn is timed in the state the fn before it left (idle cores to wake)."""
    harness = _bench_module("harness")
    calls = {"fast": 0, "slow": 0}

    def fast():
        calls["fast"] += 1

    def slow():
        calls["slow"] += 1
        time.sleep(0.003)

    times = harness.interleaved({"fast": fast, "slow": slow}, (), rounds=2, iters=3)
    # one call each first, which faults no pages: the heap is steady (steady_heap)
    assert calls == {"fast": 1 + 2 * (5 + 3), "slow": 1 + 2 * (1 + 3)}
    assert [len(t) for t in times.values()] == [2, 2]


def test_steady_heap_calls_until_a_call_faults_no_pages():
    """A fn whose first calls touch fresh pages is called again until a call faults fewer
    than STEADY_FAULTS pages; one that never settles stops at max_calls."""
    harness = _bench_module("harness")
    kept = []

    def touch_fresh_pages():         # a new anonymous mapping, every page written
        m = mmap.mmap(-1, 4 * harness.STEADY_FAULTS * mmap.PAGESIZE)
        for off in range(0, len(m), mmap.PAGESIZE):
            m[off] = 1
        kept.append(m)

    def fresh_three_times():
        if len(kept) < 3:
            touch_fresh_pages()

    assert harness.steady_heap(fresh_three_times, ()) == 4
    assert harness.steady_heap(touch_fresh_pages, (), max_calls=3) == 3


def test_bench_compile_takes_bare_model_names_and_refuses_unknown_ones(monkeypatch):
    bench_compile = _bench_module("bench_compile")
    monkeypatch.syspath_prepend(str(Path(bench_compile.__file__).parent))  # its lazy imports
    args = bench_compile.parse_args(["--models", "resnet,gpt2:training", "--scaling", "",
                                     "--workloads", ""])
    assert args.models == ["resnet:inference", "resnet:training", "gpt2:training"]
    with pytest.raises(SystemExit, match="unknown model:mode nope:inference"):
        bench_compile.parse_args(["--models", "nope"])


def test_patterns_whose_outputs_outgrow_memory_are_skipped(monkeypatch):
    """A broadcast can make a pattern's outputs far larger than its inputs (seed 16 at
    4x the LLC asked for gigabytes and the run was killed): attempts whose outputs, from
    a run on meta tensors, hold more than bench_patterns.max_output_bytes() are passed
    over."""
    import torch
    bp = _bench_module("bench_patterns")
    assert bp._output_bytes(lambda x: (x, x * 2), [torch.randn(4, 4)]) == 128
    size = bp.size_classes(["l2"], 512e6)["l2"]
    _, f, inputs = bp.pattern_at(16, size)
    big = bp._output_bytes(f, inputs)
    monkeypatch.setattr(bp, "max_output_bytes", lambda: big - 1)
    found = bp.pattern_at(16, size)
    assert found is None or bp._output_bytes(*found[1:]) < big


def test_patterns_with_a_dead_value_outgrowing_memory_are_skipped():
    """Eager computes values no output reads: seed 55 at 32 MB broadcast a 4M-element
    tensor into 16 GB that nothing returned, and the pattern search was killed for
    memory. The meta run measures the largest storage any op makes (an expand's view
    counts as its base)."""
    import torch
    bp = _bench_module("bench_patterns")

    def dead(x):
        _ = x.unsqueeze(1) * x.reshape(1, -1, 1)     # (8, 32, 4) of float32, never returned
        return (x.sum(),)
    x = torch.randn(8, 4)
    assert bp._output_bytes(dead, [x]) == 4
    assert bp._largest_value(dead, [x]) == 8 * 32 * 4 * 4
    assert bp._largest_value(lambda t: (t.expand(1000, 8, 4),), [x]) == 128
    found = bp.pattern_at(55, 32 << 20)
    assert found is None or bp._largest_value(*found[1:]) <= bp.max_output_bytes()


def test_llc_size_classes_scale_the_cache_this_process_gets(monkeypatch):
    """The llc classes scale the measured share of the last-level cache (a VM's sysfs
    names its chip's whole cache), or --llc-bytes; the smaller classes measure nothing."""
    bp = _bench_module("bench_patterns")

    def measured():
        raise AssertionError("measured without an llc class")
    monkeypatch.setattr(bp, "measured_llc", measured)
    assert set(bp.size_classes(["l1", "l2"], 512e6)) == {"l1", "l2"}
    sizes = bp.size_classes(["llc", "4llc", "16llc"], 512e6, llc=64 << 20)
    assert sizes == {"llc": 64 << 20, "4llc": 256 << 20, "16llc": 512e6}
    monkeypatch.setattr(bp, "measured_llc", lambda: 8 << 20)
    assert bp.size_classes(["4llc"], 512e6) == {"4llc": 32 << 20}


def test_the_bandwidth_line_counts_the_cases_the_cost_model_calls_memory_bound():
    """Issue 16's yardstick is the large memory-bound cases: a compute-bound one (float64
    atan2 over 33M elements) would pull the geomean down with bytes it cannot move
    faster; the line gives both."""
    report = _bench_module("bench_patterns_report")
    rows = [{"size": "4llc", "nbytes": 8e8, "times": {"brrr": 0.1},
             "predicted": {"compute_s": 0.01, "memory_s": 0.03}},
            {"size": "4llc", "nbytes": 1e8, "times": {"brrr": 0.5},
             "predicted": {"compute_s": 0.4, "memory_s": 0.01}},
            {"size": "llc", "nbytes": 1e8, "times": {"brrr": 1.0}}]
    assert [report.memory_bound(r) for r in rows] == [True, False, False]
    line = report.bandwidth_line(rows, 10e9)
    assert "13% of the streaming bandwidth (10.0 GB/s) in geomean over 2 cases" in line
    assert "the 1 of 2 the cost model calls memory-bound" in line and "at 80%" in line


def test_an_ill_conditioned_step_passes_only_if_its_float64_step_is_eagers():
    """model_check.verdict: a gradient off float64 by 4x eager's error (outside the fair
    rules) passes where the backend's own float64 step matches eager's, not otherwise,
    and one off by 20x eager's fails without running the float64 step."""
    mc = _bench_module("model_check")
    g = torch.Generator().manual_seed(0)
    r64 = [torch.randn(64, generator=g, dtype=torch.float64)]
    noise = torch.randn(64, generator=g, dtype=torch.float64)
    eager = [(r64[0] + 1e-2 * noise).float()]
    asked = []

    def step64(same):
        def run():
            asked.append(same)
            return [r64[0] + (0 if same else 1e-6)]
        return run

    def judge(scale, same):
        out = [(r64[0] + scale * 1e-2 * noise.flip(0)).float()]
        return mc.verdict(out, eager, lambda: r64, None, step64(same))[1]

    assert judge(4, True).startswith("ok in float64")
    assert judge(4, False) == "mismatch"
    assert judge(20, True) == "mismatch" and asked == [True, False]
