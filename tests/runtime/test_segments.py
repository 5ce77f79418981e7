"""Runs of kernel calls run as one native call (runtime/segments.py), their intermediates
in an arena whose plan reuses dead intermediates' blocks; results match eager."""
import operator
from types import SimpleNamespace

import pytest
import torch

from brrr_compiler import backend
from brrr_compiler.runtime import segments
from tests.helpers import check_against_eager

NONE = {"fusion": "none"}      # one kernel per op: chains of kernels


@pytest.fixture
def runs(monkeypatch):
    """The guarded runners brrr builds while the test runs."""
    made, real = [], backend.guarded_runner

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]
    monkeypatch.setattr(backend, "guarded_runner", spy)
    return made


def _segment_calls(run) -> list:
    return [n.target for n in run.segmented.graph.nodes if hasattr(n.target, "brrr_plan")]


def _chain(x):
    for _ in range(4):
        x = x * 1.5
    return x


def test_a_chain_is_one_call_and_reuses_a_dead_intermediate(runs):
    check_against_eager(_chain, torch.randn(16), options=NONE, grad=False)
    (seg,) = _segment_calls(runs[-1])
    assert len(seg.brrr_segment) == 4
    plan = {p.name: p for p in seg.brrr_plan}
    # mul is dead once mul_1 is written: mul_2 takes its block; mul_3 is the output
    assert set(plan) == {"mul", "mul_1", "mul_2"}
    assert plan["mul_2"].offset == plan["mul"].offset != plan["mul_1"].offset
    assert seg.brrr_arena_bytes == 2 * 64
    assert "brrr_segment0(" in runs[-1].segmented.code


def _overlap(a, b) -> bool:
    return a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes


def _check_plan(seg) -> None:
    """No two intermediates live at the same kernel share a byte of the arena."""
    for i, a in enumerate(seg.brrr_plan):
        for b in seg.brrr_plan[i + 1:]:
            live_together = a.written <= b.last_read and b.written <= a.last_read
            assert not (live_together and _overlap(a, b)), (a, b)
        assert a.offset + a.nbytes <= seg.brrr_arena_bytes


def _branchy(x):
    a = x.sin()
    b = a.sum(0, keepdim=True)
    c = (a - b).t().contiguous()
    d = c.cos() * 2
    return d, c[1:].exp(), b


@pytest.mark.parametrize("grad", [False, True])
def test_branches_views_and_saved_tensors(runs, grad):
    x = torch.randn(8, 5, requires_grad=grad)
    check_against_eager(_branchy, x, options=NONE, grad=grad)
    graphs = [r for r in runs if _segment_calls(r)]
    assert graphs
    for run in graphs:
        outputs = {a.name for a in run.segmented.graph.output_node().args[0]
                   if isinstance(a, torch.fx.Node)}
        for seg in _segment_calls(run):
            _check_plan(seg)
            # graph outputs (saved tensors among them) are never arena blocks
            assert not outputs & {p.name for p in seg.brrr_plan}


def test_outputs_never_share_storage_and_later_calls_match(runs):
    f = torch.compile(_branchy, backend=backend.brrr_backend, options=NONE)
    x = torch.randn(8, 5)
    for _ in range(3):       # the checking runner's call, then the plain runner's
        outs = f(x)
        torch.testing.assert_close(outs, _branchy(x))
        ptrs = [o.untyped_storage().data_ptr() for o in outs]
        assert len(set(ptrs)) == len(ptrs)
    assert _segment_calls(runs[-1])


def test_a_kernel_reading_a_view_of_an_intermediate(runs):
    def f(x):
        a = x.exp()
        return a[1:, 2:].cos() + a[:-1, :-2].sin()

    check_against_eager(f, torch.randn(6, 7), options=NONE, grad=False)
    (seg,) = _segment_calls(runs[-1])
    assert "exp" in {p.name for p in seg.brrr_plan}


def test_reused_blocks_fit_and_dead_outputs_get_a_block():
    # a planned run without a runner: each kernel as (output bytes, readers' indices)
    plan, size = segments.plan_arena(*_fake_run([(256, [1]), (64, [2]), (128, [3]), (64, [])]))
    at = {p.name: p for p in plan}
    assert at["v2"].offset == at["v0"].offset       # 128 bytes in v0's dead 256-byte block
    assert at["v3"].offset == at["v1"].offset       # read by nothing: written, then dead
    assert size == 256 + 64


class _Node(SimpleNamespace):
    __hash__ = object.__hash__     # hashable by identity, as FX nodes are


def _fake_run(kernels):
    """A run of fake kernel calls, one output each, read by the listed later kernels."""
    calls = [_Node(name=f"k{i}") for i in range(len(kernels))]
    items = []
    for i, (nbytes, _) in enumerate(kernels):
        k = SimpleNamespace(out_specs=[((nbytes // 4,), (1,), torch.float32)])
        item = _Node(name=f"v{i}", target=operator.getitem, args=(calls[i], 0), users={})
        calls[i].target = SimpleNamespace(brrr_kernel=k)
        calls[i].users = {item: None}
        items.append(item)
    for item, (_, readers) in zip(items, kernels):
        item.users = {calls[r]: None for r in readers}
    return calls, set(items)


def test_segments_off_calls_each_kernel(runs):
    check_against_eager(_chain, torch.randn(16), options={**NONE, "segments": False},
                        grad=False)
    assert not _segment_calls(runs[-1])
    assert runs[-1].segmented is runs[-1].runner
    assert runs[-1].runner.code.count("brrr_k") == 4


def test_the_runner_dump_shows_segments_and_their_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("BRRR_DEBUG_DIR", str(tmp_path))
    check_against_eager(_chain, torch.randn(16), options=NONE, grad=False)
    (dump,) = tmp_path.glob("run_*/*/runner.py")
    text = dump.read_text()
    assert "brrr_k0_mul(" in text                     # the runner with one call per kernel
    assert "# segment0: k0_mul, k1_mul, k2_mul, k3_mul; arena 128 bytes" in text
    assert "#   mul_2: bytes [0, 64), written by k2_mul, last read by k3_mul" in text


def test_a_thread_keeps_its_arena_between_calls_and_threads_have_their_own(runs):
    """The arena is one buffer per thread, grown to the largest asked for (module note):
    a second call writes into the same memory, another thread into its own, and every
    thread's results match eager."""
    import threading
    f = torch.compile(_branchy, backend=backend.brrr_backend, options=NONE)
    x = torch.randn(64, 33)
    f(x)
    assert _segment_calls(runs[-1])
    before = f(x)
    first = segments._ARENA.buf.data_ptr()
    again = f(x)
    assert segments._ARENA.buf.data_ptr() == first
    assert all(torch.equal(a, b) for a, b in zip(again, before))
    torch.testing.assert_close(again, _branchy(x), rtol=1e-5, atol=1e-5)
    seen, results = {}, {}
    # every worker holds its arena until all have looked at theirs: a thread's arena is
    # freed when it ends, and malloc may hand the next thread the same address (CI saw
    # 3 distinct addresses of 4 once)
    all_seen = threading.Barrier(3)

    def worker(i):
        y = torch.randn(64, 33, generator=torch.Generator().manual_seed(i))
        for _ in range(20):
            results[i] = (f(y), _branchy(y))
        seen[i] = segments._ARENA.buf.data_ptr()
        all_seen.wait()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in results.values():
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert len({first, *seen.values()}) == 4
