"""Training graphs whose saved tensors, mutated inputs and multi-output ops have other
strides or dtypes than the plain case: each checked against eager, gradients included."""
import torch

from tests.helpers import check_against_eager


def _spd(n, batch=()):
    torch.manual_seed(0)
    a = torch.randn(*batch, n, n)
    return (a @ a.mT + n * torch.eye(n)).requires_grad_()


def test_cholesky_upper_gradient():
    # linalg's error check runs under an effect token; the transposed factor it saves for
    # the backward must keep its strides across the forward/backward boundary
    check_against_eager(lambda a: torch.linalg.cholesky(a, upper=True), _spd(5))


def test_cholesky_lower_gradient():
    check_against_eager(lambda a: torch.linalg.cholesky(a), _spd(5))


def test_effect_token_op_between_kernels():
    def f(a):
        u = torch.linalg.cholesky(a * 2.0 + 1.0, upper=True)
        return (u.sin() * 3.0).exp()
    check_against_eager(f, _spd(6, (2,)))
