"""The model the fault tests run (test_faults.py, test_build_faults.py, and the child
processes they start, which import it from here) and their shared fixtures."""
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from brrr_compiler import log as brrr_log

REPO = Path(__file__).resolve().parents[2]


def model(x, w):
    h = F.gelu(x * 2 + 1) @ w
    return torch.softmax(h, -1) * h.sum(-1, keepdim=True)


def inputs(seed=0, rows=16):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 12, generator=gen), torch.randn(12, 8, generator=gen)


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """warn_once is once per process: each test sees its own warnings."""
    monkeypatch.setattr(brrr_log, "_warned", set())


def brrr_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).startswith("brrr:")]
