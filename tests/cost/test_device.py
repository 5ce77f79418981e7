"""DeviceSpec: JSON in the calibration dir (or, as older versions kept it, the cache dir),
defaults, presets, and `brrr calibrate`."""
import json
import math

import pytest
import torch

from brrr_compiler.cli import build_parser
from brrr_compiler.cost import (PRESETS, DeviceSpec, current_device_spec, generic_cpu,
                                load_device_spec, resolve_device, save_device_spec)
from brrr_compiler.calibration import (OVERHEAD_ATOL, STABLE_SPREAD, TRIES, _Figures, _l2_sizes,
                                       _llc_sizes)
from brrr_compiler.machine import cache_sizes
from brrr_compiler.cost.device import in_float64
from brrr_compiler.calibration_kernels import (ADD, _compiled, _terms, fork_overhead,
                                               prefetch_ratio,
                                               l2_bandwidth, overheads, stream_bandwidth,
                                               transpose_cost)


def test_json_round_trip_in_the_cache_dir(tmp_path):
    spec = generic_cpu(threads=3).replace(name="mine", source="calibrated today")
    path = save_device_spec(spec, str(tmp_path))
    assert path == str(tmp_path / "device.json")
    assert load_device_spec(path) == spec
    assert current_device_spec(str(tmp_path)) == spec


def test_a_calibration_of_older_versions_has_stream_prefetch_off(tmp_path):
    """device.json files written before the field existed load with the hardware's prefetch
    alone, as the generic CPU has it; a calibration's word survives the round trip."""
    data = json.loads(generic_cpu(threads=2).to_json())
    del data["stream_prefetch"]
    assert DeviceSpec.from_json(json.dumps(data)).stream_prefetch is False
    assert generic_cpu().stream_prefetch is False
    on = generic_cpu(threads=2).replace(stream_prefetch=True)
    assert DeviceSpec.from_json(on.to_json()).stream_prefetch is True


def test_stream_prefetch_is_on_only_where_it_paid_on_each_kernel(monkeypatch):
    """calibrate's verdict: the worse of the two kernels' with/without ratio at most
    PREFETCH_PAYS; the figure settles like the others."""
    from brrr_compiler import calibration_kernels as ck
    for ratio, on in ((0.9, True), (ck.PREFETCH_PAYS, True), (1.0, False), (1.3, False)):
        monkeypatch.setattr(ck, "prefetch_ratio", lambda *a, r=ratio: r)
        lines: list = []
        assert ck.stream_prefetch("/unused", 16 << 20, None, _Figures(lines.append)) is on
        assert "stream prefetch" in lines[0] and ("on;" if on else "off;") in lines[0]


def test_prefetch_ratio_compares_the_same_kernels_with_and_without(tmp_path):
    """Both variants compile, differ only in the prefetches, and run (small inputs: the
    ratio itself is the machine's, and timing, which no test asserts)."""
    from brrr_compiler import calibration_kernels as ck
    ratio = prefetch_ratio(1 << 20, str(tmp_path), rounds=1)
    assert ratio > 0 and math.isfinite(ratio)
    variants = [ck._prefetch_variant("x * y - z", "x, y, z", str(tmp_path), flag)
                for flag in (True, False)]
    assert variants[0] is not variants[1]
    assert ck._prefetch_variant("x * y - z", "x, y, z", str(tmp_path), True) is variants[0]


def test_without_calibration_the_generic_cpu_applies(tmp_path):
    spec = current_device_spec(str(tmp_path))
    assert spec.name == "generic-cpu" and spec.threads == torch.get_num_threads()


def test_unreadable_calibration_warns_and_falls_back(tmp_path):
    (tmp_path / "device.json").write_text('{"name": "x", "bogus_field": 1}')
    with pytest.warns(RuntimeWarning, match="ignoring unreadable calibration"):
        assert current_device_spec(str(tmp_path)).name == "generic-cpu"


def test_calibration_dir_first_then_the_cache_dir_of_older_versions(tmp_path):
    calibration, cache = tmp_path / "config", tmp_path / "cache"
    old = generic_cpu(threads=2).replace(name="old", source="calibrated long ago")
    save_device_spec(old, str(cache))
    assert current_device_spec([str(calibration), str(cache)]) == old
    new = old.replace(name="new")
    save_device_spec(new, str(calibration))
    assert current_device_spec([str(calibration), str(cache)]) == new
    assert resolve_device(None, [str(calibration), str(cache)]) == new


def test_gpu_presets_from_datasheets():
    a100, h100, h200 = PRESETS["a100"], PRESETS["h100"], PRESETS["h200"]
    assert a100.dram_bandwidth == 2.039e12 and h100.dram_bandwidth == 3.35e12
    assert h200.dram_bandwidth == 4.8e12 and h200.flops == h100.flops
    for spec in (a100, h100, h200):
        assert spec.kind == "cuda" and 3e-6 <= spec.kernel_overhead_s <= 5e-6
        assert spec.flops["float64"] < spec.flops["float32"] <= spec.flops["float16"]


def test_resolve_device_option(tmp_path):
    assert resolve_device("H200", str(tmp_path)) is PRESETS["h200"]
    assert resolve_device(None, str(tmp_path)).name == "generic-cpu"
    spec = generic_cpu(threads=1)
    assert resolve_device(spec, str(tmp_path)) is spec
    path = save_device_spec(spec, str(tmp_path))
    assert resolve_device(path, "/nonexistent") == spec
    with pytest.raises(ValueError, match="h100"):
        resolve_device("tpu", str(tmp_path))


def test_calibrate_subcommand_and_measurements(tmp_path):
    args = build_parser().parse_args(["calibrate", "--cache-dir", "/tmp/x", "--dry-run"])
    assert args.command == "calibrate" and args.dry_run and args.cache_dir == "/tmp/x"
    assert args.calibration_dir is None
    args = build_parser().parse_args(["calibrate", "--calibration-dir", "/tmp/k"])
    assert args.calibration_dir == "/tmp/k" and not args.dry_run
    l2, llc = cache_sizes()
    assert 0 < l2 <= llc
    bandwidth = stream_bandwidth(1 << 20, str(tmp_path))   # bytes/s of brrr's x + 1 on 1 MB
    assert 0 < bandwidth < float("inf")                      # no speed asserted: machines vary
    assert 0 < l2_bandwidth(str(tmp_path), (1 << 15, 1 << 16)) < float("inf")


def test_l2_sizes_fit_half_the_l2s_and_run_on_every_thread():
    lo, hi = _l2_sizes(2 << 20, 32768)              # two threads of 1 MB L2
    assert 8 * hi <= (2 << 20) // 2 and lo >= 32768 and hi > lo
    assert _l2_sizes(512 << 10, 32768) is None      # 256 KB L2s: too small to fork for


def test_llc_sizes_move_more_than_the_l2s_hold_and_fit_the_llc():
    """The cache bandwidth is timed where the cost model counts every byte in the LLC and
    none in the L2s (cost/estimate.py L2_RAMP, LLC_RAMP): sizes straddling the L2s timed
    an L2-speed point against an LLC one."""
    mib = 1 << 20
    lo, hi = _llc_sizes(4 * mib, 128 * mib)          # elements of float32, 8 bytes moved each
    assert (8 * lo, 8 * hi) == (8 * mib, 32 * mib)
    lo, hi = _llc_sizes(2 * mib, 32 * mib)           # an LLC of 32 MB caps the larger size
    assert 8 * lo == 4 * mib and 8 * hi == 16 * mib
    assert _llc_sizes(4 * mib, 16 * mib) == (3 << 16, 3 << 18)   # no room: 1.5 and 6 MB


def test_each_size_of_a_timed_chain_compiles_its_own_function(tmp_path):
    """A chain timed on many sizes (calibrate's x + 1 on a dozen) would reach Dynamo's
    recompile limit, past which Dynamo runs ATen's op instead of brrr's kernel."""
    cache = str(tmp_path)
    assert _compiled(ADD, 1, cache_dir=cache, size=10) is _compiled(ADD, 1, cache_dir=cache,
                                                                    size=10)
    assert _compiled(ADD, 1, cache_dir=cache, size=10) is not _compiled(ADD, 1, cache_dir=cache,
                                                                        size=11)


def test_transpose_cost_compares_a_transposed_copy_with_x_plus_1(tmp_path):
    assert 0 < transpose_cost(str(tmp_path), 1 << 14) < float("inf")   # no speed asserted


def test_a_replayed_figure_whose_kernel_did_not_build_is_not_measurable(tmp_path, monkeypatch):
    """Where x + 1's kernel failed to build, ATen ran it and nothing is replayed: the
    figure is None (calibrate then keeps the generic one and says so), not a crash."""
    from brrr_compiler.runtime import replay
    monkeypatch.setattr(replay, "capture", lambda run: (run(), [])[1])
    assert l2_bandwidth(str(tmp_path), (1 << 15, 1 << 16)) is None
    assert transpose_cost(str(tmp_path), 1 << 14) is None


def test_function_rates_are_timed_on_independent_terms():
    """calibrate's transcendental rates: a sum of independent evaluations, each at its own
    scale (a chain x = f(x) would time their latency instead)."""
    x = torch.rand(100)
    fn = _terms("torch.exp(x * -{c})", 3)
    expected = torch.exp(x * -1.0) + torch.exp(x * -1.125) + torch.exp(x * -1.25)
    torch.testing.assert_close(fn(x), expected)


def test_a_kernels_call_from_python_is_measured_with_segments_off(tmp_path):
    per_kernel, per_call = overheads(str(tmp_path), segments=False)
    assert 0 < per_kernel < 1e-3 and 0 <= per_call < 1e-2   # no speed asserted: machines vary


def test_fork_overhead_is_a_parallel_regions_cost_and_none_on_one_thread(tmp_path):
    """calibrate's fork figure: an empty parallel region, built like a kernel; a kernel on
    one thread forks nothing."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert 0 < fork_overhead(str(tmp_path)) < 1e-3      # no speed asserted beyond sanity
        torch.set_num_threads(1)
        assert fork_overhead(str(tmp_path)) == 0.0
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_calibrate_saves_a_spec_later_compiles_load(tmp_path):
    import brrr_compiler
    # force: on a busy test machine some figure may not settle, which would refuse the save
    spec = brrr_compiler.calibrate(str(tmp_path / "cache"), calibration_dir=str(tmp_path),
                                   force=True)
    assert isinstance(spec, DeviceSpec) and spec.source.startswith("calibrated")
    for value in (spec.dram_bandwidth, spec.cache_bandwidth, spec.transcendentals,
                  spec.flops["float32"], spec.flops["float64"], spec.kernel_overhead_s):
        assert value > 0
    assert current_device_spec(str(tmp_path)) == spec


def _tries(values):
    it = iter(values)
    return lambda: next(it)


def test_a_figure_is_measured_until_its_last_three_tries_settle():
    figures = _Figures(lambda m: None)
    # the first tries wander (a busy moment), then three agree within STABLE_SPREAD
    assert figures.settle("rate", _tries([5.0, 1.0, 1.02, 0.99, 7.0]), default=1.0) == 1.0
    assert figures.spread["rate"] <= STABLE_SPREAD and figures.noisy == []
    assert "spread" in figures.note("rate") and "NOISY" not in figures.note("rate")


def test_a_figure_that_never_settles_is_noisy():
    figures = _Figures(lambda m: None)
    values = [1.0, 2.0] * TRIES
    assert figures.settle("rate", _tries(values), default=1.0) in (1.0, 2.0)
    assert figures.noisy == ["rate"] and "NOISY" in figures.note("rate")


def test_a_tiny_figure_settles_within_its_absolute_tolerance():
    """A per-kernel overhead of a tenth of a microsecond whose tries differ by 30 ns
    settles (calibrate refused to save a 2-vCPU VM's figures over such spreads); without
    the tolerance the same tries are noisy."""
    tries = [0.10e-6, 0.07e-6, 0.09e-6, 0.10e-6, 0.07e-6, 0.09e-6]
    figures = _Figures(lambda m: None)
    assert figures.settle("kernel overhead", _tries(tries), default=0.3e-6,
                          atol=OVERHEAD_ATOL) == pytest.approx(0.09e-6)
    assert figures.noisy == []
    strict = _Figures(lambda m: None)
    strict.settle("kernel overhead", _tries(tries), default=0.3e-6)
    assert strict.noisy == ["kernel overhead"]


def test_implausible_tries_do_not_count_and_the_generic_value_stands_in():
    log = []
    figures = _Figures(log.append)
    assert figures.settle("rate", _tries([1e6] * TRIES), default=1.0) == 1.0
    assert figures.doubtful == ["rate"] and figures.note("rate") == "generic"
    assert any("implausible" in m for m in log)


def test_a_figure_whose_micro_kernel_does_not_build_keeps_the_generic_value():
    log = []
    figures = _Figures(log.append)
    assert figures.settle("fork overhead", lambda: None, default=1.5e-6) == 1.5e-6
    assert figures.doubtful == ["fork overhead"] and figures.note("fork overhead") == "generic"
    assert any("did not build" in m for m in log)


def test_fork_overhead_is_none_where_its_kernel_cannot_build(tmp_path, monkeypatch):
    from brrr_compiler.runtime import build

    def fail(*a, **k):
        raise build.BuildError("no compiler")
    monkeypatch.setattr(build, "build_and_load", fail)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert fork_overhead(str(tmp_path)) is None
    finally:
        torch.set_num_threads(before)


def test_a_noisy_calibration_is_not_saved_unless_forced(tmp_path, monkeypatch):
    from brrr_compiler import calibration
    noisy = calibration.Calibration(generic_cpu(threads=1), {"rate": 0.5}, ["rate"])
    monkeypatch.setattr(calibration, "measure", lambda cache_dir, log: noisy)
    log = []
    result, saved = calibration.run(str(tmp_path), calibration_dir=str(tmp_path), log=log.append)
    assert saved is None and not (tmp_path / "device.json").exists()
    assert any("not saved: rate" in m and "--force" in m for m in log)
    result, saved = calibration.run(str(tmp_path), calibration_dir=str(tmp_path),
                                    log=log.append, force=True)
    assert saved == str(tmp_path / "device.json") and load_device_spec(saved) == noisy.spec
    args = build_parser().parse_args(["calibrate", "--force"])
    assert args.force


def test_functions_not_measured_by_name_get_the_libm_calls_rate(monkeypatch):
    """exp and erf are brrr's inline polynomials; a function without a rate of its own
    (cos, log1p, ...) is a libm call like sin and log, and gets their mean rate; a chain
    keeps its own (slower) rate. Micro-benchmarks stubbed: rates by function name."""
    from brrr_compiler import calibration
    rates = {"exp": 16e9, "sin": 10e9, "tanh": 11e9, "erf": 20e9, "sigmoid": 12e9, "log": 8e9}
    monkeypatch.setattr(calibration, "terms_rate", lambda template, *a, dtype=torch.float32,
                        **k: rates[template.split("(")[0][6:]] / (4 if dtype == torch.float64 else 1))
    monkeypatch.setattr(calibration, "chain_rate", lambda step, steps, dtype, *a, **k:
                        8e11 if step == calibration.FMA else 7e9)
    monkeypatch.setattr(calibration, "reduce_rate", lambda *a, **k: 30e9)
    monkeypatch.setattr(calibration, "scalar_transcendental_rate", lambda *a, **k: 5e9)
    figures = calibration._Figures(lambda message: None)
    flops, functions, other = calibration._compute_figures("unused", None, generic_cpu(2),
                                                           figures)
    cheap = 2 / flops["float32"]                 # each term's scale and add, taken out
    assert functions["exp"] == pytest.approx(1 / (1 / 16e9 - cheap))
    assert other == pytest.approx((functions["sin"] + functions["log"]) / 2)
    assert other < functions["exp"] and functions["transcendental_chain"] < functions["exp"]
    # each function measured in float64 too (libm's double functions), its own key
    assert functions[in_float64("tanh")] == pytest.approx(
        1 / (4 / 11e9 - 2 / flops["float64"]))


def test_llc_share_is_sysfs_or_what_x_plus_1_keeps_cached(monkeypatch):
    """A VM on a large chip reads the chip's whole LLC in sysfs (480 MB on a 2-vCPU
    Xeon): calibrate keeps the share where x + 1 still beats the streaming rate."""
    from brrr_compiler import calibration
    asked = []

    def kept(cache_dir, moved, dram, clock):
        asked.append(list(moved))
        return kept.value

    monkeypatch.setattr(calibration, "cached_extent", kept)
    lines = []
    kept.value = 64 << 20
    assert calibration._llc_share("/x", 4 << 20, 480 << 20, 27e9, None, lines.append) == 64 << 20
    assert asked[-1][0] == 16 << 20 and asked[-1][-1] == 512 << 20, asked
    assert all(b == 2 * a for a, b in zip(asked[-1], asked[-1][1:])) and "sysfs 480" in lines[-1]
    assert calibration._llc_share("/x", 2 << 20, 32 << 20, 40e9, None, lines.append) == 32 << 20
    assert asked[-1] == [8 << 20, 16 << 20, 32 << 20, 64 << 20], asked   # twice sysfs at most
    kept.value = 0                     # even 4x the L2s streams: the L2s are all there is
    assert calibration._llc_share("/x", 2 << 20, 32 << 20, 40e9, None, lines.append) == 2 << 20


def test_cached_extent_times_the_kernel_not_the_graph_call(monkeypatch):
    """The cache share is decided on x + 1's kernel replayed natively: through the
    graph's call (Dynamo, the runner, a fresh output: 160-180 us at 8 MB moved on a slow
    VM, the kernel 89) 8 MB moved ran under 1.3x the stream and 32 MB of L3 read as
    none. The graph call is timed only where the kernel cannot be replayed (ATen ran
    it)."""
    from brrr_compiler import calibration_kernels as ck
    rate = {8 << 20: 94e9, 16 << 20: 90e9, 32 << 20: 48e9, 64 << 20: 34e9}
    monkeypatch.setattr(ck, "_compiled", lambda *a, **k: (lambda x: x + 1))
    monkeypatch.setattr(ck, "_replayed_per_call",
                        lambda fn, x, cache_dir, clock: x.numel() * 8 / rate[x.numel() * 8])
    through_call = []

    def per_call(fn, args, calls, rounds, clock):
        through_call.append(args[0].numel() * 8)
        return 110e-6 + args[0].numel() * 8 / rate[args[0].numel() * 8]
    monkeypatch.setattr(ck, "_per_call", per_call)
    moved = sorted(rate)
    assert ck.cached_extent("/x", moved, 34e9) == 32 << 20 and not through_call
    monkeypatch.setattr(ck, "_replayed_per_call", lambda fn, x, cache_dir, clock: None)
    assert ck.cached_extent("/x", moved, 34e9) == 0       # the call's 110 us count
    assert through_call == [8 << 20]
