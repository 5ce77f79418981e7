"""A graph brrr fails to compile runs through ATen as AOTAutograd handed it: right values
and gradients, one warning, never a compile error for the user."""
import pytest
import torch

from brrr_compiler import backend
from tests.helpers import check_against_eager


def _boom(what):
    # each test its own message: brrr shows each warning once per process
    def partition(*args, **kwargs):
        raise ValueError(f"synthetic partitioner bug ({what})")
    return partition


def test_failed_compile_runs_the_graph_through_aten(monkeypatch):
    monkeypatch.setattr(backend, "partition", _boom("values"))

    def f(x):
        return (x.sin() * 2).t().contiguous().sum(0)
    with pytest.warns(RuntimeWarning, match=r"synthetic partitioner bug \(values\).*runs through ATen"):
        check_against_eager(f, torch.randn(5, 7, requires_grad=True), allow_fallback=True)


def test_failed_compile_keeps_input_mutations(monkeypatch):
    monkeypatch.setattr(backend, "partition", _boom("mutations"))

    def f(x, buf):
        buf.mul_(0.9).add_(x.mean(0))
        return x.relu() * 3
    with pytest.warns(RuntimeWarning, match="runs through ATen"):
        check_against_eager(f, torch.randn(4, 3, requires_grad=True), torch.ones(3),
                            allow_fallback=True)
