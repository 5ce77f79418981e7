"""The tests' fallback guard (tests/helpers.py) reads each compile's own record, so every
fallback fails the test that meets it, the second identical one in a process too (brrr
warns once per process: a guard built on warnings let that one pass)."""
import pytest
import torch

from brrr_compiler import backend
from tests.helpers import check_against_eager


def _never_lowers(*args, **kwargs):
    raise NotImplementedError("brrr: forced by the test")


@pytest.mark.parametrize("attempt", [0, 1])
def test_each_fallback_fails_the_check_even_when_its_warning_was_shown(monkeypatch, attempt):
    monkeypatch.setattr(backend, "lower_group", _never_lowers)
    x = torch.randn(8, 8)
    for _ in range(2):              # the same fallback twice in one process
        with pytest.raises(AssertionError, match="(?s)fell back to ATen:.*forced by the test"):
            check_against_eager(lambda x: (x + 1).relu(), x, grad=False)


def test_allowed_fallbacks_still_compare_values(monkeypatch):
    monkeypatch.setattr(backend, "lower_group", _never_lowers)
    x = torch.randn(8, 8)
    reports = check_against_eager(lambda x: (x + 1).relu(), x, grad=False, allow_fallback=True)
    assert [why for r in reports for why in r.fallbacks]
    assert not any(r.kernels for r in reports)


def test_a_program_without_kernels_fails_unless_it_says_so():
    x = torch.randn(4, 4)
    with pytest.raises(AssertionError, match="made no kernel"):
        check_against_eager(lambda x: x @ x, x, grad=False)
    check_against_eager(lambda x: x @ x, x, grad=False, kernels=False)


def test_outputs_are_compared_with_their_strides(monkeypatch):
    from tests import helpers
    with pytest.raises(AssertionError, match="strides"):
        helpers._compare([torch.randn(3, 4).t().contiguous()], [torch.randn(3, 4).t()],
                         1e9, 1e9, "output", strides=True)
