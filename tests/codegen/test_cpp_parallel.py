"""codegen/cpp_parallel.py: a parallel loop whose if clause is false for a kernel's
constant sizes is printed without its OpenMP pragma; at the boundary it keeps it."""
import functools
import pytest
import torch

from brrr_compiler.schedule_ir import PARALLEL_MIN_NUMEL
from tests.helpers import one_kernel_source


_source = functools.partial(one_kernel_source, whole=True)


@pytest.mark.parametrize("cols, forks", [(PARALLEL_MIN_NUMEL // 2, True),
                                         (PARALLEL_MIN_NUMEL // 2 - 1, False)])
def test_row_reduction_at_the_boundary(cols, forks):
    """A row walked once (amax); a softmax walks its rows three times and forks at a
    third of the elements (schedule/rows.py `_walks`)."""
    src = _source(lambda x: x.amax(-1), torch.randn(2, cols))
    cond = "n_outer * n_red >= 32768 && n_outer > 1"
    assert (f") if ({cond})" in src) == forks, src     # the rows' pragma
    assert (f"// one thread: {cond} is false for these sizes" in src) != forks


@pytest.mark.parametrize("cols, forks", [(PARALLEL_MIN_NUMEL // 4, True),
                                         (PARALLEL_MIN_NUMEL // 4 - 1, False)])
def test_a_softmax_forks_at_half_the_elements(cols, forks):
    """Its max and sum of exps fold in one walk (cpp_online.py), the scale in a second:
    two walks, so it forks at half the elements of a one-walk row."""
    src = _source(lambda x: torch.softmax(x, -1), torch.randn(2, cols))
    cond = f"n_outer * n_red >= {PARALLEL_MIN_NUMEL // 2} && n_outer > 1"
    assert (f") if ({cond})" in src) == forks, src
    assert (f"// one thread: {cond} is false for these sizes" in src) != forks, src


@pytest.mark.parametrize("rows, cols, forks", [(4096, 256, True), (32, 256, False),
                                               (4096, 10, False)])   # one tile of columns
def test_sum_over_rows(rows, cols, forks):
    src = _source(lambda x: x.sum(0), torch.randn(rows, cols))
    assert ("#pragma omp parallel" in src) == forks, src
    assert ("// one thread:" in src) != forks


@pytest.mark.parametrize("n, forks", [(256, True), (16, False)])
def test_transposed_copy(n, forks):
    src = _source(lambda x: x.t().contiguous() * 2, torch.randn(n, n))
    assert ("#pragma omp parallel" in src) == forks, src
    assert ("// one thread:" in src) != forks
