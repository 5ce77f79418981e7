"""fill_constants: new_full/new_zeros/new_ones become aten.full, reading no tensor."""
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import FileCheck, assert_close

from brrr_compiler.partition import GreedyPolicy, partition
from brrr_compiler.passes import run_pipeline
from tests.helpers import aten_graph, check_against_eager


def _pass(fn, *args):
    """Trace `fn` to ATen and run the one pass under test (linted, recompiled)."""
    return run_pipeline(make_fx(fn, tracing_mode="fake")(*args), ("fill_constants",))


def test_new_fills_become_full():
    def fn(x):
        return x * x.new_full((), 0.25) + x.new_zeros((3,)) - x.new_ones((4, 3), dtype=torch.float64)

    x = torch.randn(4, 3)
    gm = _pass(fn, x)
    FileCheck().check_not("new_").check_count("aten.full.default", 3, exactly=True).run(gm.code)
    fills = [n for n in gm.graph.nodes if n.target is torch.ops.aten.full.default]
    assert all(not n.all_input_nodes for n in fills)
    assert [n.meta["val"].dtype for n in fills] == [torch.float32, torch.float32, torch.float64]
    assert_close(gm(x), fn(x))


def test_written_fill_keeps_its_values():
    def fn(x):
        y = x.new_full((4,), 2.0)
        y.add_(x)
        return y

    x = torch.randn(4)
    assert_close(_pass(fn, x)(x), fn(x))


def test_lerp_with_a_number_weight_is_one_kernel():
    """torch's lerp decomposition makes its number weight with start.new_full: the fill sat
    between the cast of a bfloat16 start and the arithmetic, splitting the kernel."""
    def fn(a, b):
        return torch.lerp(a, b, 0.25), torch.minimum(a, a.to(torch.float16))

    a = torch.randn(8, 16, 1, dtype=torch.bfloat16).expand(8, 16, 17)
    b = torch.randn(8, 16, 17, dtype=torch.bfloat16)
    gm = run_pipeline(aten_graph(lambda a, b: torch.lerp(a, b, 0.25), a, b))
    plan = partition(gm, GreedyPolicy())
    assert len(plan.groups) == 1 and "new_full" not in str(plan), str(plan)
    check_against_eager(fn, a, b)
    for w in (0.25, 0.75, -1.5):
        check_against_eager(lambda a, b: torch.lerp(a, b, w), a.double(), b.double())
