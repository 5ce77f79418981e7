"""A reduction walk that calls libm copies its strided float loads (a transposed or
step-sliced input) into a local array first (schedule/rows.py `strided_loads`,
codegen/cpp_staging.py): gcc 12 left such a loop scalar, one 8-lane libm call per
element. The text, and values and gradients against eager on odd rows, NaN and inf."""
import torch
from torch.testing import FileCheck

from brrr_compiler.codegen import cpp
from brrr_compiler.lower.group import lower_group
from tests.helpers import check_against_eager, plan_of


def _sources(fn, *args) -> list[str]:
    plan = plan_of(fn, *args)
    return [cpp.kernel_source(lower_group(g, g.name), 2) for g in plan.groups]


def _walk(x, y):
    """log1p and sin (libm calls) of a contiguous input and a transposed one, summed
    over rows."""
    return (torch.log1p(x.abs()) * torch.sin(y)).sum(-1)


def test_a_transposed_load_in_a_libm_walk_is_staged():
    x, y = torch.randn(40, 17), torch.randn(17, 40).t()
    (src,) = _sources(_walk, x, y)
    (FileCheck().check("float sd_v").check("[r0 - st_lo] = in1[")
     .check("#pragma omp simd reduction(+:").check("sd_v").run(src))
    assert "float sd_" not in _sources(_walk, x, torch.randn(40, 17))[0]   # contiguous: as is


def test_a_walk_without_libm_keeps_its_strided_loads():
    (src,) = _sources(lambda x, y: (x * y.exp()).sum(-1), torch.randn(40, 17),
                      torch.randn(17, 40).t())
    assert "sd_v" not in src, src


def test_values_and_gradients_match_eager():
    g = torch.Generator().manual_seed(5)
    for rows, n in ((40, 17), (3, 300), (1, 1)):
        x = torch.randn(rows, n, generator=g, dtype=torch.float64, requires_grad=True)
        y = torch.randn(n, rows, generator=g, dtype=torch.float64).t().requires_grad_()
        check_against_eager(_walk, x, y)
    x = torch.randn(33, 17, generator=g)
    x[3, 4], x[5, 6] = float("nan"), float("inf")
    check_against_eager(lambda t, u: (torch.log1p(t.abs()) + u).sum(-1), x.t()[:, ::1],
                        torch.randn(17, 33, generator=g), grad=False)
    step = torch.randn(30, 51, generator=g)[:, ::3]             # step-sliced: stride 3
    check_against_eager(lambda t: torch.sin(t).sum(-1), step, grad=False)
