"""Profiler events (runtime/profiling.py): under torch.profiler each compiled graph is a
range `brrr::graphN_<kind>` and each generated kernel an event named after it inside that
range; without a profiler the plain runner runs and the profiled copy is never built."""
import json
import operator
from types import SimpleNamespace

import pytest
import torch
from torch.testing import assert_close

from brrr_compiler import demo
from brrr_compiler.backend import brrr_backend
from brrr_compiler.cli import build_parser, main
from brrr_compiler.runtime import profiling


def _norm_gelu(x, w):
    # a row reduction (the norm) and a pointwise chain: more than one kernel unfused
    y = x / x.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt()
    return torch.nn.functional.gelu(y * w) + 1


def _compile(tmp_path, fusion="none"):
    sink = []

    def backend(gm, inputs):
        return brrr_backend(gm, inputs, options={"cache_dir": str(tmp_path), "fusion": fusion},
                            _sink=sink)

    torch._dynamo.reset()
    return torch.compile(_norm_gelu, backend=backend), sink


def _inputs(requires_grad=False):
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(6, 32, generator=gen), torch.randn(32, generator=gen)
    return x.requires_grad_(requires_grad), w.requires_grad_(requires_grad)


def _events(prof, prefix):
    return [e for e in prof.events() if e.name.startswith(prefix)]


def test_each_kernel_is_an_event_inside_its_graph_range(tmp_path):
    compiled, sink = _compile(tmp_path)
    x, w = _inputs()
    compiled(x, w)                               # compile outside the profile
    with torch.profiler.profile(record_shapes=True) as prof:
        out = compiled(x, w)
    assert_close(out, _norm_gelu(x, w))
    (graph,) = sink
    kernels = [k.name for k in graph.kernels]
    assert len(kernels) >= 3, kernels
    events = {e.name: e for e in _events(prof, "brrr::k")}
    assert sorted(events) == sorted(f"brrr::{k}" for k in kernels)
    (rng,) = _events(prof, f"brrr::{graph.name}")
    for e in events.values():                    # nested: inside the graph's range
        assert rng.time_range.start <= e.time_range.start
        assert e.time_range.end <= rng.time_range.end
    # the event carries the kernel's inputs: record_shapes shows them
    first = events[f"brrr::{kernels[0]}"]
    assert [6, 32] in first.input_shapes, first.input_shapes


def test_backward_graph_is_a_range_too(tmp_path):
    compiled, sink = _compile(tmp_path, fusion="greedy")
    x, w = _inputs(requires_grad=True)
    compiled(x, w).sum().backward()
    with torch.profiler.profile() as prof:
        compiled(x, w).sum().backward()
    names = {e.name for e in _events(prof, "brrr::")}
    for g in sink:
        assert f"brrr::{g.name}" in names, (g.name, names)
        assert {f"brrr::{k.name}" for k in g.kernels} <= names
    assert any(g.kind == "backward" for g in sink)


def test_without_a_profiler_the_plain_runner_runs(tmp_path, monkeypatch):
    compiled, _ = _compile(tmp_path)
    built, real = [], profiling.profiled_program
    monkeypatch.setattr(profiling, "profiled_program", lambda gm: built.append(gm) or real(gm))
    x, w = _inputs()
    assert_close(compiled(x, w), _norm_gelu(x, w))
    assert built == []                           # no profiler: no profiled copy
    with torch.profiler.profile():
        compiled(x, w)
        compiled(x, w)
    assert len(built) == 1                       # built once, on the first profiled call
    assert_close(compiled(x, w), _norm_gelu(x, w))


def _fake_kernel(x):
    return [x + 1]


_fake_kernel.__module__ = "brrr"
_fake_kernel.brrr_kernel = SimpleNamespace(name="k0_add")


def test_profiled_program_reads_like_the_plain_one():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    k = graph.call_function(_fake_kernel, (x,))
    graph.output((graph.call_function(operator.getitem, (k, 0)),))
    graph.set_codegen(torch.fx.graph._BoxedCodeGen())
    plain = torch.fx.GraphModule(torch.nn.Module(), graph)
    profiled = profiling.profiled_program(plain)
    assert profiled.code == plain.code
    (call,) = [n for n in profiled.graph.nodes if n.op == "call_function"
               and profiling.is_kernel_call(getattr(n.target, "__wrapped__", None))]
    with torch.profiler.profile() as prof:
        (out,) = profiled.forward([torch.zeros(3)])
    assert_close(out, torch.ones(3))
    assert [e.name for e in _events(prof, "brrr::")] == ["brrr::k0_add"]


def test_chrome_trace_names_the_kernels(tmp_path):
    compiled, sink = _compile(tmp_path)
    x, w = _inputs()
    compiled(x, w)
    with torch.profiler.profile() as prof:
        compiled(x, w)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    names = {e.get("name") for e in json.loads(path.read_text())["traceEvents"]}
    assert {f"brrr::{k.name}" for k in sink[0].kernels} <= names
    assert f"brrr::{sink[0].name}" in names


def test_demo_trace_at_a_tiny_size(tmp_path, monkeypatch):
    monkeypatch.setenv("BRRR_CACHE_DIR", str(tmp_path / "cache"))
    torch._dynamo.reset()
    path = tmp_path / "demo.json"
    names = demo.trace(demo.Size(64, 1, 8, 16, 2), str(path))
    in_file = {e.get("name") for e in json.loads(path.read_text())["traceEvents"]}
    assert set(names) <= in_file
    assert any(n.startswith("brrr::k") for n in names), names
    assert any(n.endswith("_backward") for n in names), names   # the training step's


def test_demo_trace_option(tmp_path):
    assert build_parser().parse_args(["demo", "--trace", "t.json"]).trace == "t.json"
    assert build_parser().parse_args(["demo"]).trace is None


def test_demo_trace_into_a_missing_folder_is_one_clear_error(tmp_path, capsys):
    assert main(["demo", "--trace", str(tmp_path / "no" / "such" / "t.json")]) == 2
    err = capsys.readouterr().err
    assert "does not exist or is not writable" in err and err.count("\n") == 1


@pytest.mark.parametrize("name", ["k0_add_mul_erf", "graph0_forward"])
def test_event_names(name):
    assert profiling.event_name(name) == f"brrr::{name}"


def test_kernel_calls_keep_each_call_to_replay(tmp_path):
    """profiling.kernel_calls() keeps every kernel call of a profiled run (graph, call,
    arguments, outputs): calling it again on its arguments gives its outputs, and outside
    the block nothing is kept."""
    compiled, sink = _compile(tmp_path)
    x, w = _inputs()
    compiled(x, w)
    with profiling.kernel_calls() as calls, torch.profiler.profile():
        compiled(x, w)
    (graph,) = sink
    assert [c.call.brrr_kernel.name for c in calls] == [k.name for k in graph.kernels]
    assert {c.graph for c in calls} == {graph.name}
    for c in calls:
        assert_close(list(c.call(*c.args)), list(c.outputs))
    with torch.profiler.profile():
        compiled(x, w)
    assert len(calls) == len(graph.kernels)
