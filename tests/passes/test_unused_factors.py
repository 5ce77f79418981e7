"""passes/unused_factors.py: factorizations whose factors nothing reads stop computing
them; the values read match eager, and a graph that reads the factors keeps them."""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from brrr_compiler.passes import run_pipeline
from tests.helpers import check_against_eager

aten = torch.ops.aten


def _pass(fn, *args):
    gm = make_fx(fn, tracing_mode="fake")(*args)
    return run_pipeline(gm, ("unused_factors", "dce"))


def _calls(gm, target):
    return [n for n in gm.graph.nodes if n.target is target]


def test_singular_values_alone_ask_for_no_factors():
    gm = _pass(lambda a: aten._linalg_svd.default(a)[1] * 2, torch.randn(6, 4))
    (svd,) = _calls(gm, aten._linalg_svd.default)
    assert svd.args[2] is False
    a = torch.randn(6, 4)
    torch.testing.assert_close(gm(a), torch.linalg.svdvals(a) * 2)


def test_eigenvalues_alone_ask_for_no_eigenvectors():
    gm = _pass(lambda a: aten._linalg_eigh.default(a)[0].sum(), torch.randn(5, 5))
    (eigh,) = _calls(gm, aten._linalg_eigh.default)
    assert eigh.args[1:] == ("L", False)


def test_factors_that_are_read_are_kept():
    gm = _pass(lambda a: aten._linalg_svd.default(a)[0].abs(), torch.randn(6, 4))
    (svd,) = _calls(gm, aten._linalg_svd.default)
    assert len(svd.args) == 1 or svd.args[2] is not False


@pytest.mark.parametrize("fn", [torch.linalg.cond, torch.linalg.svdvals, torch.linalg.eigvalsh,
                                lambda a: torch.linalg.matrix_norm(a, "nuc"),
                                lambda a: torch.linalg.matrix_rank(a, hermitian=True)],
                         ids=["cond", "svdvals", "eigvalsh", "nuc", "rank_hermitian"])
def test_linalg_functions_against_eager(fn):
    a = torch.randn(3, 6, 6, generator=torch.Generator().manual_seed(0))
    a = a + a.mT
    check_against_eager(fn, a, grad=False, kernels=False, atol=1e-4, rtol=1e-4)


def test_gradients_through_svd_keep_the_factors():
    a = torch.randn(5, 3, generator=torch.Generator().manual_seed(1), requires_grad=True)
    check_against_eager(lambda a: torch.linalg.svdvals(a).sum() * 2, a, kernels=False,
                        atol=1e-4, rtol=1e-4)
