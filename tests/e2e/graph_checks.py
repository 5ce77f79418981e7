"""Helpers end-to-end tests share: seeded inputs and assertions on the graphs brrr
compiled (check_against_eager's reports)."""
import torch

from tests.helpers import compute_calls

FLOAT_DTYPES = [torch.float32, torch.float64, torch.bfloat16]


def randn(*shape, dtype=torch.float32, seed=0, grad=True):
    """Seeded normal values; requiring grad when `grad` and the dtype can."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=dtype).requires_grad_(
        grad and dtype.is_floating_point)


def graph_of(graphs, kind):
    found = [g for g in graphs if g.kind == kind]
    assert len(found) == 1, f"expected one {kind} graph, got {[g.kind for g in graphs]}"
    return found[0]


def forward_graph(graphs):
    """The forward graph, or the inference graph when nothing needs grad."""
    return next(g for g in graphs if g.kind in ("forward", "inference"))


def one_kernel(graph) -> None:
    assert len(graph.kernels) == 1 and compute_calls(graph) == [], str(graph)


def fused(graphs) -> None:
    """The forward (or inference) graph runs in kernels only."""
    graph = forward_graph(graphs)
    assert graph.kernels and compute_calls(graph) == [], str(graph)


def dtype_id(d):
    return str(d)[6:]


def has_kernel(graphs) -> bool:
    return any(g.kernels for g in graphs)
