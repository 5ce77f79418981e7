"""brrr_compiler.explain as a user reads it: totals per graph, a reason for every ATen
call, the user's source lines, graph breaks, keyword arguments for the function, no side
effects, numbering per call, readable units."""
import inspect
import warnings

import pytest
import torch

import brrr_compiler
from brrr_compiler.report import fmt_bytes, fmt_flops, fmt_time


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _chain_after_mm(x, w):
    y = (x @ w).t()
    return (y.sin() * 2 + 1).relu()


def _mm_inputs():
    gen = torch.Generator().manual_seed(0)
    return torch.randn(64, 32, generator=gen), torch.randn(32, 48, generator=gen)


def test_totals_count_kernels_aten_calls_and_views_apart():
    def f(x, w):
        return ((x @ w).sin() * 2 + 1).relu().t()

    (graph,) = brrr_compiler.explain(f, *_mm_inputs()).graphs
    t = graph.totals()
    assert (t["kernels"], t["aten_calls"], t["views"]) == (1, 1, 1), str(graph)
    assert [c.op for c in graph.compute_calls] == ["aten.mm.default"]
    assert [c.op for c in graph.views] == ["aten.t.default"]
    # fusing four pointwise ops saves three round trips and three launches
    assert 0 < t["fused_s"] < t["unfused_s"] and 0 < t["fused_bytes"] < t["unfused_bytes"]
    text = str(graph)
    assert text.splitlines()[0] == f"{graph.name} (inference): 1 kernel, 1 ATen call, 1 view"
    assert f"{fmt_time(t['fused_s'])} fused vs {fmt_time(t['unfused_s'])} unfused" in text
    assert f"{fmt_bytes(t['fused_bytes'])} vs {fmt_bytes(t['unfused_bytes'])}" in text


def test_every_aten_call_has_a_reason():
    def f(x, w):
        a = torch.cumsum(x, 0)                        # no lowering
        b = (x.to(torch.complex64) * 2).real          # a dtype kernels do not take
        return (a @ w).exp() + b.sum()                # a library op, then a kernel

    graph = brrr_compiler.explain(f, *_mm_inputs()).graphs[0]
    reasons = {c.op: c.reason for c in graph.aten_calls}
    assert all(c.reason for c in graph.aten_calls), str(graph)
    assert "library op" in reasons["aten.mm.default"]
    assert "does not lower" in reasons["aten.cumsum.default"]
    assert "complex64" in reasons["aten._to_copy.default"]
    text = str(graph)
    for c in graph.compute_calls:
        assert c.reason in text


def test_a_group_that_does_not_lower_says_why(monkeypatch):
    import brrr_compiler.backend as backend
    real = backend.lower_group

    def refuse_sin(group, *args, **kwargs):
        if any("sin" in n.name for n in group.nodes):
            raise NotImplementedError("brrr: no rule for this test's sin")
        return real(group, *args, **kwargs)

    monkeypatch.setattr(backend, "lower_group", refuse_sin)
    with pytest.warns(RuntimeWarning, match="no rule for this test's sin"):
        graph = brrr_compiler.explain(_chain_after_mm, *_mm_inputs()).graphs[0]
    reasons = {c.op: c.reason for c in graph.aten_calls}
    assert "did not lower: no rule for this test's sin" in reasons["aten.sin.default"]


def test_a_kernel_on_a_cycle_says_why(tmp_path):
    """The plan test_faults builds by hand: a group feeding itself through cumsum."""
    from brrr_compiler.backend import kernels_and_fallbacks, lower_plan
    from brrr_compiler.config import build_config
    from brrr_compiler.graph_report import graph_report
    from brrr_compiler.partition.plan import FusionPlan, Group
    from brrr_compiler.runtime.kernels import build_kernels
    from tests.helpers import aten_graph

    def f(x):
        return torch.cumsum(x + 1, 0) * 2

    gm = aten_graph(f, torch.randn(5, 3))
    add, cumsum, mul = [n for n in gm.graph.nodes if n.op == "call_function"]
    plan = FusionPlan(gm, [Group(0, [add, mul], [add, mul], [add.args[0], cumsum], (5, 3))],
                      [], "by hand")
    kernels, specs, *_ = lower_plan(plan)
    compiled, _ = build_kernels(kernels, specs, build_config({"cache_dir": str(tmp_path)}), 1)
    not_run: dict = {}
    with pytest.warns(RuntimeWarning, match="on a cycle"):
        run = kernels_and_fallbacks(plan, kernels, compiled, not_run)
    graph = graph_report("g", "inference", plan, run, "", "", kernels, None, not_run=not_run)
    assert not graph.kernels
    reasons = {c.name: c.reason for c in graph.aten_calls}
    assert "on a cycle" in reasons[add.name] and "on a cycle" in reasons[mul.name]


def test_kernels_name_the_user_lines_they_come_from():
    (graph,) = brrr_compiler.explain(_chain_after_mm, *_mm_inputs()).graphs
    (kernel,) = graph.kernels
    first, last = _line_of(_chain_after_mm, "(x @ w)"), _line_of(_chain_after_mm, "relu()")
    view, chain = kernel.sources                 # the transpose it reads through; the chain
    assert view.endswith(f"test_explain.py:{first}  y = (x @ w).t()"), view
    assert chain.endswith(f"test_explain.py:{last}  return (y.sin() * 2 + 1).relu()"), chain
    assert f"from {chain}" in str(graph)
    (mm,) = graph.compute_calls
    assert mm.source == view


def test_to_dot_says_why_each_call_runs_through_aten():
    dot = brrr_compiler.explain(lambda x, w: (x @ w).sin().t(), *_mm_inputs()).to_dot()
    assert 'tooltip="library op' in dot
    assert "style=dashed" in dot and "aten.t.default" in dot        # the view


def test_module_kernels_name_their_modules():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.GELU())
    report = brrr_compiler.explain(model, torch.randn(4, 8))
    sources = [s for k in report.kernels for s in k.sources]
    assert any("(LayerNorm)" in s for s in sources) and any("(GELU)" in s for s in sources)


def test_graph_breaks_are_reported_with_their_reasons():
    def f(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos() * 2

    report = brrr_compiler.explain(f, torch.randn(16))
    (brk,) = report.graph_breaks
    assert "graph_break" in brk.reason
    assert brk.location.endswith(f"test_explain.py:{_line_of(f, 'graph_break()')}")
    assert len(report.graphs) == 2
    assert "graph breaks (1):" in str(report) and str(brk) in str(report)


def test_keyword_arguments_go_to_the_function():
    def f(x, mode="cos"):
        return x.sin() * 2 if mode == "sin" else x.cos() * 2

    report = brrr_compiler.explain(f, torch.randn(16), mode="sin")
    assert [op for k in report.kernels for op in k.aten_ops] == \
        ["aten.sin.default", "aten.mul.Tensor"]


def test_options_go_in_options_and_the_old_keywords_still_work():
    def f(x):
        return x.sin() * 2

    x = torch.randn(16)
    assert brrr_compiler.explain(f, x, options={"fusion": "none"}).graphs[0].totals()["kernels"] == 2
    with pytest.warns(FutureWarning, match="options="):
        old = brrr_compiler.explain(f, x, fusion="none")
    assert old.graphs[0].totals()["kernels"] == 2
    with pytest.raises(ValueError, match="fusoin.*neither keyword arguments of"):
        brrr_compiler.explain(f, x, fusoin="none")
    with pytest.raises(TypeError, match="options="):
        brrr_compiler.explain(f, x, options={"fusion": "none"}, fusion="cost")


def test_no_side_effects_on_modules_inputs_or_random_streams():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8),
                                torch.nn.Dropout(0.5))
    model.train()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(16, 8, requires_grad=True)
    rng = torch.get_rng_state()
    report = brrr_compiler.explain(model, x)
    assert report.graphs and report.kernels
    for k, v in model.state_dict().items():
        assert torch.equal(v, state[k]), k          # running stats, num_batches_tracked
    assert all(p.grad is None for p in model.parameters()) and x.grad is None
    assert torch.equal(torch.get_rng_state(), rng)


GLOBAL_NORM = torch.nn.BatchNorm1d(4)


def test_inputs_and_global_modules_mutated_in_place_are_restored():
    def f(x, buf):
        buf.add_(1)                                 # an in-place update of an input
        return GLOBAL_NORM(x) * buf

    x, buf = torch.randn(8, 4), torch.zeros(4)
    base = torch.zeros(2, 4)
    view = base[1]                                  # a view: its base must not change
    mean = GLOBAL_NORM.running_mean.clone()
    brrr_compiler.explain(f, x, buf)
    brrr_compiler.explain(f, x, view)
    assert torch.equal(buf, torch.zeros(4)) and torch.equal(base, torch.zeros(2, 4))
    assert torch.equal(GLOBAL_NORM.running_mean, mean)
    assert int(GLOBAL_NORM.num_batches_tracked) == 0


def test_each_call_numbers_graphs_afresh_and_compiles_again():
    def f(x):
        return x.sum(0)

    names = []
    for rows in (64, 256, 64, 256, 64, 256, 64, 256, 64, 256):     # past the recompile limit
        report = brrr_compiler.explain(f, torch.randn(rows, 1024))
        names.append([g.name for g in report.graphs])
        (kernel,) = report.kernels
        assert kernel.predicted_s > 0, str(report)      # static shapes: the model has hints
        assert kernel.domain == [rows, 1024]
    assert all(n == ["graph0_inference"] for n in names), names


def test_units_read_naturally():
    assert fmt_time(3e-6) == "3 us" and fmt_time(0.0125) == "12.5 ms" and fmt_time(2e-9) == "2 ns"
    assert fmt_bytes(512) == "512 B" and fmt_bytes(4096) == "4.1 KB" and fmt_bytes(3e6) == "3 MB"
    assert fmt_flops(2.5e9) == "2.5 GFLOP"
    report = brrr_compiler.explain(lambda x: x * 2 + 1, torch.randn(1000, 1000))
    assert "MB" in str(report.graphs[0].kernels[0].cost_summary())


def test_decisions_are_recorded_once():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU(), torch.nn.MaxPool2d(2))
    x = torch.randn(2, 3, 16, 16, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = brrr_compiler.explain(model, x)
    for graph in report.graphs:
        texts = [str(d) for d in graph.decisions]
        assert texts and len(texts) == len(set(texts)), graph.name


def test_a_graph_brrr_fails_on_is_reported_with_the_error(monkeypatch):
    import brrr_compiler.backend as backend

    def partition(*args, **kwargs):
        raise ValueError("synthetic partitioner bug (explain)")

    monkeypatch.setattr(backend, "partition", partition)
    with pytest.warns(RuntimeWarning, match="synthetic partitioner bug"):
        (graph,) = brrr_compiler.explain(lambda x: (x.sin() * 2).t(), torch.randn(4, 3)).graphs
    assert graph.name == "graph0_inference" and not graph.kernels
    reasons = {c.op: c.reason for c in graph.aten_calls}
    assert "synthetic partitioner bug (explain)" in reasons["aten.sin.default"]
    assert [c.op for c in graph.views] == ["aten.t.default"]
