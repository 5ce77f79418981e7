"""Fewer tiles of columns than threads: the threads share the rows
(schedule/columns.py `_rows_shared`, codegen/cpp_column_split.py). Which kernels take it,
and values against eager (or float64 where eager's own sum is no nearer), with NaN,
several outer tiles, bfloat16 and a batch norm's gradients."""
import pytest
import torch
import torch.nn.functional as F

from brrr_compiler.lower.group import lower_group
from brrr_compiler.schedule.cpp import choose_cpp
from tests.helpers import check_against_eager, plan_of


def _schedule(fn, *args):
    (g,) = plan_of(fn, *args).groups
    return choose_cpp(lower_group(g, g.name), 2)


def test_one_tile_of_many_rows_shares_them():
    cl = torch.randn(8, 64, 56, 56).to(memory_format=torch.channels_last)
    sched = _schedule(lambda x: x.sum((0, 2, 3)), cl)
    assert sched.kind == "columns" and sched.column_split and sched.forks, sched
    assert "rows shared by the threads" in sched.describe()
    assert not _schedule(lambda x: x.sum(0), torch.randn(1000, 64)).column_split   # few rows
    assert not _schedule(lambda x: x.sum(0), torch.randn(65536, 512)).column_split  # tiles enough
    assert not _schedule(lambda x: x.argmax(0), torch.randn(100000, 64)).column_split
    assert _schedule(lambda x: x.var(0), torch.randn(100000, 64)).column_split  # two walks


def test_a_tile_of_whole_short_rows_shares_them_too():
    """Columns of (N, 5, 5) kept apart by a load of their first (a batch norm's shifted
    sums): a tile of 5 rows of 5, one tile."""
    fn = lambda t: (t - t[:1, :, :1]).sum(0)
    x = torch.randn(40000, 5, 5, generator=torch.Generator().manual_seed(4))
    sched = _schedule(fn, x)
    assert sched.column_split and sched.column_rows == 5, sched
    check_against_eager(fn, x, grad=False, reference=True)
    check_against_eager(fn, x.to(torch.bfloat16), grad=False)


@pytest.mark.parametrize("shape", [(100000, 5), (70001, 64), (3, 40000, 20)])
def test_shared_rows_match_eager(shape):
    g = torch.Generator().manual_seed(shape[-1])
    x = torch.randn(*shape, generator=g)
    x.view(-1)[777] = float("nan")
    dim = 0 if len(shape) == 2 else 1
    check_against_eager(lambda t: (t.amax(dim), t.amin(dim, keepdim=True), t.isnan().any(dim)),
                        x, grad=False, strict=True)
    y = torch.randn(*shape, generator=g)
    check_against_eager(lambda t: (t.sum(dim), (t * t).mean(dim)), y, grad=False,
                        reference=True)
    check_against_eager(lambda t: t.sum(dim), y.to(torch.bfloat16), grad=False)


def test_a_channels_last_batch_norm_with_gradients():
    x = torch.randn(16, 32, 28, 28).to(memory_format=torch.channels_last).requires_grad_()
    w = torch.randn(32, requires_grad=True)
    g = torch.randn(16, 32, 28, 28)
    check_against_eager(lambda t, w: (F.batch_norm(t, None, None, w, None, True) * g).sum(),
                        x, w, reference=True)
