"""Fusion by the numbers: how many kernels and ATen calls a compiled graph makes."""
import torch
import torch.nn.functional as F

from tests.helpers import check_against_eager, compute_calls

# the 10-op chain's backward fuses into this many kernels today (greedy policy)
CHAIN10_BACKWARD_KERNELS = 1


def chain10(x):
    y = x * 1.5
    y = y + 0.25
    y = y.exp()
    y = y * 0.5
    y = y - 1.0
    y = y.tanh()
    y = y * 3.0
    y = y + 0.5
    y = y.sigmoid()
    return y * 2.0


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), requires_grad=True)


def _graph(graphs, kind):
    found = [g for g in graphs if g.kind == kind]
    assert len(found) == 1, f"expected one {kind} graph, got {[g.kind for g in graphs]}"
    return found[0]


def test_chain10_forward_one_kernel_backward_fixed():
    graphs = check_against_eager(chain10, _x(33, 17))
    fw, bw = _graph(graphs, "forward"), _graph(graphs, "backward")
    assert len(fw.kernels) == 1, str(fw)
    assert len(fw.kernels[0].aten_ops) == 10, str(fw)
    assert compute_calls(fw) == [], str(fw)
    assert len(bw.kernels) == CHAIN10_BACKWARD_KERNELS, str(bw)
    assert compute_calls(bw) == [], str(bw)


def test_chain10_inference_one_kernel_no_aten():
    inf = _graph(check_against_eager(chain10, _x(33, 17), grad=False), "inference")
    assert len(inf.kernels) == 1 and inf.aten_nodes == [], str(inf)


def test_chain10_without_fusion_is_ten_kernels():
    inf = _graph(check_against_eager(chain10, _x(33, 17), grad=False,
                                     options={"fusion": "none"}), "inference")
    assert len(inf.kernels) == 10, str(inf)
    assert all(len(k.aten_ops) == 1 for k in inf.kernels), str(inf)
    assert inf.aten_nodes == [], str(inf)


def test_silu_times_b_one_kernel():
    fw = _graph(check_against_eager(lambda a, b: F.silu(a) * b, _x(33, 17), _x(33, 17)),
                "forward")
    assert len(fw.kernels) == 1 and compute_calls(fw) == [], str(fw)


def test_bias_gelu_one_kernel():
    fw = _graph(check_against_eager(lambda x, b: F.gelu(x + b), _x(33, 17), _x(17)), "forward")
    assert len(fw.kernels) == 1 and compute_calls(fw) == [], str(fw)
    assert "aten.erf.default" in fw.kernels[0].aten_ops, str(fw)


def test_matmul_splits_the_chain():
    def fn(x, w):
        a = (x * 2 + 1).tanh()
        return (a @ w * 3).sigmoid() + 1

    inf = _graph(check_against_eager(fn, _x(33, 17), _x(17, 9), grad=False), "inference")
    assert len(inf.kernels) == 2, str(inf)
    before, after = inf.kernels
    assert {"aten.tanh.default", "aten.mul.Tensor"} <= set(before.aten_ops), str(inf)
    assert {"aten.sigmoid.default", "aten.mul.Tensor"} <= set(after.aten_ops), str(inf)
    assert [op for _, op in compute_calls(inf)] == ["aten.mm.default"], str(inf)


def test_repeated_layers_share_compiled_code():
    """Identical blocks: later blocks' kernels are aliases in the library, and all compute."""
    lin = torch.nn.Linear(64, 64)

    def blocks(x):
        for _ in range(3):
            x = x + F.gelu(lin(F.layer_norm(x, (64,))))
        return x

    graphs = check_against_eager(blocks, _x(8, 64))
    for kind in ("forward", "backward"):
        assert "__attribute__((alias(" in _graph(graphs, kind).source, kind


def test_rotary_cat_fuses_into_one_kernel():
    """rotate-half's cat is a select between two clamped loads inside the kernel."""
    def rotary(x, cos, sin):
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    x, cos, sin = _x(2, 5, 3, 8), torch.randn(5, 1, 8), torch.randn(5, 1, 8)
    forward = _graph(check_against_eager(rotary, x, cos, sin), "forward")
    assert len(forward.kernels) == 1 and compute_calls(forward) == [], forward


def test_cat_edge_cases_match_eager():
    """An empty input, promotion across dtypes, an outer cat dim, a transposed consumer."""
    def fn(a, b, c):
        return torch.cat([a, b.int(), c[:0]], 0).t() * 0.5, torch.cat([a.exp(), a], 1).sin()

    graphs = check_against_eager(fn, torch.randn(3, 4), torch.randn(5, 4), torch.randn(2, 4),
                                 grad=False)
    assert compute_calls(graphs[0]) == [], graphs[0]
    check_against_eager(lambda a, b: torch.cat([a, b]) * 2, torch.randn(0), torch.randn(0),
                        grad=False)                            # every input empty
