"""A reduction walk that calls libm copies its strided float loads (a transposed or
step-sliced input) into a local array first (schedule/rows.py `strided_loads`,
codegen/cpp_staging.py): gcc 12 left such a loop scalar, one 8-lane libm call per
element. A pointwise loop that calls libm copies such loads a chunk at a time
(schedule/cpp.py `strided_libm_loads`, codegen/cpp_strided.py). The text, and values
and gradients against eager on odd rows, NaN and inf."""
import torch
from torch.testing import FileCheck

from tests.helpers import check_against_eager, kernel_sources


_sources = kernel_sources


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


def _atan2_row(x, row):
    """atan2 of a tensor and a step-sliced row broadcast over it (a libm loop)."""
    return torch.atan2(x, row)


def test_a_pointwise_libm_loop_copies_its_step_sliced_row():
    """A pointwise loop that calls libm copies a load that steps along its inner loop
    (CppSchedule.copy_strided, codegen/cpp_strided.py), converting bfloat16 to float as
    it copies; a loop without libm keeps the load."""
    x = torch.randn(8, 64)
    for dtype, convert in ((torch.float32, "in1[i1*2]"),
                           (torch.bfloat16, "brrr_bf16_to_f32(in1[i1*2])")):
        row = torch.randn(128).to(dtype)[::2]
        (src,) = _sources(_atan2_row, x, row)
        (FileCheck().check("float sd_v").check(f"[i1 - c0] = {convert};")
         .check("#pragma omp simd").check("sd_v").check("brrr_libm_atan2f").run(src))
        (plain,) = _sources(lambda a, b: a * b, x, row)
        assert "sd_v" not in plain, plain
    (contiguous,) = _sources(_atan2_row, x, torch.randn(64))
    assert "sd_v" not in contiguous, contiguous


def test_copied_strided_loads_match_eager():
    g = torch.Generator().manual_seed(7)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for rows, n in ((5, 300), (1, 1), (3, 257)):
            x = torch.randn(rows, n, generator=g).to(dtype)
            row = torch.randn(3 * n, generator=g).to(dtype)[1::3]
            row[0] = float("nan") if n > 1 else row[0]
            check_against_eager(_atan2_row, x, row, grad=dtype is torch.float64)
    big = torch.randn(8, 1 << 20, generator=g)        # 32 MB out: streamed (schedule/stream.py)
    row = torch.randn(2 << 20, generator=g)[::2]
    (src,) = _sources(lambda a, b: torch.sin(a) * b, big, row)
    FileCheck().check("sd_v").check("brrr_stream(").run(src)
    check_against_eager(lambda a, b: torch.sin(a) * b, big, row, grad=False)
