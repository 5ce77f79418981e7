"""Gathers within rows prefetch the next row of their source, a share per chunk
(schedule/gather.py, codegen/cpp_stream.py NextRows): the text, the rule's limits, and
values against eager, out-of-range indices included."""
import pytest
import torch
from torch.testing import FileCheck

from tests.helpers import check_against_eager, one_kernel_source


_source = one_kernel_source


def _inputs(rows: int, cols: int, n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=g), torch.randint(0, cols, (rows, n), generator=g)


def _gather(x, i):
    return x.gather(-1, i) * 2.0


def test_the_next_row_is_asked_for_in_shares_of_each_chunk():
    FileCheck().check("for (int64_t c0 = lo; c0 < hi; c0 += 256)") \
        .check("if (i0 + 1 < n0) for (int64_t pf = c0 * 1024 / 1024; pf < c1 * 1024 / 1024; "
               "pf += 16) __builtin_prefetch(&in1[(i0*1024 + pf + 1024)], 0, 3);") \
        .check("#pragma omp simd").run(_source(_gather, *_inputs(2048, 1024, 1024)))


@pytest.mark.parametrize("rows, cols, n", [(512, 1024, 1024),    # a 2 MB source: caches hold it
                                           (8192, 1000, 1),      # one element a row
                                           (2048, 4096, 64)])    # most lines untouched
def test_small_sources_and_sparse_gathers_do_not_prefetch(rows, cols, n):
    assert "__builtin_prefetch" not in _source(_gather, *_inputs(rows, cols, n))


def test_values_match_eager_with_odd_rows_and_a_last_row():
    x, i = _inputs(1031, 1027, 1025, seed=1)
    assert "__builtin_prefetch(&in1" in _source(_gather, x, i)
    check_against_eager(_gather, x, i)
    check_against_eager(lambda x, i: torch.sigmoid(x.gather(-1, i)),
                        x.view(1031, 1, 1027).expand(1031, 3, 1027).contiguous(),
                        i[:, None].expand(1031, 3, 1025).contiguous())


def test_an_index_out_of_range_still_raises():
    x, i = _inputs(2048, 1024, 1024, seed=2)
    i[7, 5] = 1024
    with pytest.raises(Exception, match="out of bounds|index"):
        torch.compile(_gather, backend="brrr")(x, i)
