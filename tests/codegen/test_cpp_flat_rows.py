"""Loop phases that walk several reduced dims as one flat run (schedule/flat_rows.py):
group_norm's phases over (C/G, H*W) walk flat, its weight (read per channel) copied
into a table once per call; results and gradients match eager on odd, empty and split
rows, NaN and inf."""
import pytest
import torch
import torch.nn.functional as F

from brrr_compiler.codegen import cpp
from brrr_compiler.lower.group import lower_group
from brrr_compiler.schedule import choose_cpp
from tests.helpers import check_against_eager, plan_of


def _gn(x, w, b):
    return F.group_norm(x, 8, w, b)


def _kernel():
    plan = plan_of(_gn, torch.randn(64, 32, 3, 3), torch.randn(32), torch.randn(32))
    (g,) = [g for g in plan.groups if g.name.startswith("k") and "sum" in g.name]
    return lower_group(g, g.name)


def test_group_norm_walks_flat_reading_its_weight_from_a_table():
    k = _kernel()
    sched = choose_cpp(k, 2)
    assert len(sched.flat_phases) == 3, sched.describe()
    src = cpp.kernel_source(k, 2, sched)
    tables, rows = src.split("if (n_outer > 0 && n_outer < 2")
    assert "float tab_v" in tables and "[(i1*4 + r0)];" in tables    # [channel group][row]
    rows = rows[rows.index("} else if (n_outer > 0) {"):]
    assert rows.count("for (int64_t rr = cb - ro * n_red;") == 3
    assert "r0" not in rows and "= tab_v" in rows and "*36 + rr)]" in rows


def test_a_table_past_its_bound_keeps_the_segments():
    """A weight per (row, r0) of 4096 rows: its table would hold every row's."""
    x, w = torch.randn(4096, 4, 9), torch.randn(4096, 4)
    (g,) = plan_of(lambda x, w: (x * w[:, :, None]).sum((1, 2)), x, w).groups
    assert choose_cpp(lower_group(g, g.name), 2).flat_phases == ()


def _special(x):
    x = x.clone()
    if x.numel() > 4:
        x.view(-1)[:3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(30, 16, 3, 3), (7, 8, 5, 1), (0, 8, 3, 3), (3, 8, 7, 9)])
def test_group_norm_matches_eager(shape, dtype):
    grad = dtype is torch.float32
    x = torch.randn(shape).to(dtype).requires_grad_(grad)
    w, b = (torch.randn(shape[1]).to(dtype).requires_grad_(grad) for _ in range(2))
    check_against_eager(lambda x, w, b: F.group_norm(x, 4, w, b), x, w, b, grad=grad,
                        reference=True, kernels=shape[0] > 0)


def test_special_values_and_a_split_row_match_eager():
    x = _special(torch.randn(12, 8, 3, 5))
    check_against_eager(lambda x: F.group_norm(x, 2), x, grad=False)
    # one row of 2000 x 40 (fewer rows than threads: the threads share it)
    x = torch.randn(1, 2000, 40, 1, requires_grad=True)
    w, b = torch.randn(2000, requires_grad=True), torch.randn(2000, requires_grad=True)
    check_against_eager(lambda x, w, b: F.group_norm(x, 1, w, b), x, w, b)
    check_against_eager(lambda x: (x * x).sum((1, 2)) + x.amax((1, 2)),
                        _special(torch.randn(50, 6, 7)).transpose(1, 2), grad=False)
    w = torch.randn(6, requires_grad=True)      # a table of the weight per r0
    check_against_eager(lambda x, w: (x * w[:, None]).sum((1, 2)),
                        torch.randn(64, 6, 7, requires_grad=True), w)
    check_against_eager(lambda x, w: (x * w[:, None]).sum((1, 2)),
                        torch.randn(64, 6, 7).bfloat16(), w.detach().bfloat16(), grad=False,
                        reference=True)
