"""explain, dumps and logs speak the cost model: per kernel predicted time, bound class,
FLOPs and bytes; every decision with its reason and predictions; Graphviz text."""
import logging

import torch

import brrr_compiler
from brrr_compiler.cost import DeviceSpec, save_device_spec
from tests.cost.test_policy import V, broadcast_blowup
from tests.helpers import check_against_eager


def _inputs():
    gen = torch.Generator().manual_seed(0)
    return torch.randn(*V, generator=gen), torch.randn(2, 256, 128, generator=gen)


def test_kernels_carry_predictions_and_decisions_print():
    report = brrr_compiler.explain(broadcast_blowup, *_inputs(), options={"fusion": "cost"})
    (graph,) = report.graphs
    assert len(graph.kernels) == 2, str(report)
    for k in graph.kernels:
        assert k.predicted_s > 0 and k.bound in ("compute", "memory", "overhead")
        assert k.flops > 0 and k.bytes > 0
    text = str(report)
    assert "fusion decisions" in text and graph.decisions
    for d in graph.decisions:
        assert str(d) in text
    refused = [d for d in graph.decisions if not d.accepted]
    assert refused and "unfused_us=" in str(refused[0]) and "bytes_saved=" in str(refused[0])
    assert "-bound:" in text.splitlines()[2]            # header, totals, then kernels


def test_to_dot_draws_groups_and_bound_classes():
    dot = brrr_compiler.explain(broadcast_blowup, *_inputs(), options={"fusion": "cost"}).to_dot()
    assert dot.startswith("digraph brrr {") and dot.rstrip().endswith("}")
    assert 'subgraph "cluster_graph' in dot
    assert "fillcolor=" in dot and "-bound" in dot
    assert dot.count("->") >= 3                 # inputs -> kernels -> output


def test_debug_dump_and_log_carry_the_decision_log(tmp_path, caplog):
    # the brrr logger is torch's (registered with torch._logging): it does not propagate
    # to the root logger that caplog listens on, so caplog listens on it directly
    brrr = logging.getLogger("brrr")
    brrr.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="brrr"):
            brrr_compiler.explain(broadcast_blowup, *_inputs(),
                                  options={"fusion": "cost", "debug_dir": str(tmp_path)})
    finally:
        brrr.removeHandler(caplog.handler)
    (plan_file,) = tmp_path.glob("run_*/*/fusion_plan.txt")
    plan = plan_file.read_text()
    assert "refuse" in plan and "fused_us=" in plan and "compute +" in plan
    assert "fusion decisions" in caplog.text and "fused_us=" in caplog.text


def test_compiles_load_the_calibration_from_the_cache_dir(tmp_path):
    spec = DeviceSpec(name="calibrated-toy", kind="cpu", threads=1, flops={"float32": 1e9},
                      transcendentals=1e8, dram_bandwidth=1e9, cache_bandwidth=1e10,
                      kernel_overhead_s=1e-6, source="test")
    save_device_spec(spec, str(tmp_path))
    report = brrr_compiler.explain(lambda x: x * 2 + 1, torch.randn(1000, 1000),
                                   options={"fusion": "cost", "cache_dir": str(tmp_path)})
    (graph,) = report.graphs
    assert graph.device == "calibrated-toy"
    assert abs(graph.kernels[0].predicted_s - (8e6 / 1e9 + 1e-6)) < 1e-9


def test_device_option_picks_a_preset():
    report = brrr_compiler.explain(lambda x: x * 2 + 1, torch.randn(64, 64),
                                   options={"fusion": "cost", "device": "h100"})
    assert report.graphs[0].device == "H100-SXM5-80GB"


def test_dynamic_shapes_get_predictions_from_size_hints():
    import functools
    from brrr_compiler.backend import brrr_backend
    sink: list = []
    fn = torch.compile(lambda x: (x + x.t()).exp().sum(-1), dynamic=True,
                       backend=functools.partial(brrr_backend, options={"fusion": "cost"},
                                                 _sink=sink))
    x = torch.randn(48, 48)
    torch.testing.assert_close(fn(x), (x + x.t()).exp().sum(-1))
    (graph,) = sink
    assert graph.kernels and all(k.predicted_s for k in graph.kernels), str(graph)
    assert graph.decisions and not any("no estimate" in d.reason for d in graph.decisions)


def test_reductions_over_symbolic_sizes_get_predictions():
    """The reduced size of x.sum(0) appears in no stored value, only in the kernel's loop:
    the hints come from the graph's whole shape environment."""
    import functools
    from brrr_compiler.backend import brrr_backend
    for fn in (lambda x: x.sum(0), lambda x: x.sum(), lambda x: (x * 2).sum(0)):
        sink: list = []
        compiled = torch.compile(fn, dynamic=True,
                                 backend=functools.partial(brrr_backend, _sink=sink))
        x = torch.randn(256, 1024, generator=torch.Generator().manual_seed(0))
        # x.sum() is about sqrt(2**18) = 512, where one float32 ulp is 6e-5: any two
        # summation orders differ by a few ulps, so atol 1e-4 failed about half the seeds.
        torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-3)
        (graph,) = sink
        (kernel,) = graph.kernels
        assert kernel.predicted_s > 0 and not kernel.estimate_error, str(graph)
        assert kernel.bytes >= 256 * 1024 * 4, str(graph)


def test_kernels_with_indirect_loads_get_predictions():
    """gather's index is data: its footprint is the input's extent along the gathered dim
    (the model raised 'symbolic size v1 + ... has no hint' and the report had no number)."""
    import torch.nn.functional as F
    gen = torch.Generator().manual_seed(0)
    x, t = torch.randn(64, 128, generator=gen), torch.randint(0, 128, (64,), generator=gen)
    for fn in (lambda x, t: torch.gather(x, 1, t[:, None]) * 2, F.cross_entropy):
        report = brrr_compiler.explain(fn, x, t)
        assert report.kernels and all(k.predicted_s > 0 and k.unfused_s > 0
                                      for k in report.kernels), str(report)


def test_an_embedding_is_charged_the_rows_it_reads_not_its_table():
    """An index loaded from a tensor takes one value per point its index tensor is read
    at: 1024 tokens of a 50257-row table read 1024 rows (the model charged GPT-2's whole
    154 MB table to its embedding kernel)."""
    import torch.nn.functional as F
    gen = torch.Generator().manual_seed(0)
    table, pos = torch.randn(50257, 64, generator=gen), torch.randn(1024, 64, generator=gen)
    tokens, positions = torch.randint(0, 50257, (8, 128), generator=gen), torch.arange(128)

    def embed(t, w, p, pe):
        return F.embedding(t, w) + F.embedding(p, pe)
    report = brrr_compiler.explain(embed, tokens, table, positions, pos)
    (kernel,) = report.kernels
    rows = 8 * 128 * 64 * 4 + 128 * 64 * 4                # table rows + position rows read
    out, index = 8 * 128 * 64 * 4, 8 * 128 * 8 + 128 * 8
    assert kernel.bytes == rows + out + index, str(report)
    check_against_eager(embed, tokens, table, positions, pos)


def test_kernels_the_runner_calls_from_python_are_charged_that_call():
    """A kernel alone in its graph runs as one ctypes call from Python; two in a row run
    as one segment, each at the in-segment dispatch."""
    spec = DeviceSpec(name="toy", kind="cpu", threads=1, flops={"float32": 1e9},
                      transcendentals=1e8, dram_bandwidth=1e9, cache_bandwidth=1e10,
                      kernel_overhead_s=1e-6, python_call_overhead_s=5e-6)
    x = torch.randn(1000, 1000)
    alone = brrr_compiler.explain(lambda x: x * 2 + 1, x, options={"device": spec})
    (k,) = alone.graphs[0].kernels
    assert k.called == "python" and "; called from Python" in str(alone)
    assert abs(k.predicted_s - (8e6 / 1e9 + 5e-6)) < 1e-9
    pair = brrr_compiler.explain(lambda x: x * 2 + 1, x, options={"device": spec,
                                                                  "fusion": "none"})
    kernels = pair.graphs[0].kernels
    assert [k.called for k in kernels] == ["segment", "segment"], str(pair)
    assert all(abs(k.predicted_s - (8e6 / 1e9 + 1e-6)) < 1e-9 for k in kernels)
