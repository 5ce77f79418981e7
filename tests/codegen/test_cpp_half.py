"""codegen/cpp_half.py: float16 loads and stores of pointwise loops convert through the
prelude's brrr_f16_load / brrr_f16_store (F16C or AVX-512 where the target has them): a
bare cast converts straight from input to output, other loops stage chunks in local float
arrays. Values bit for bit against eager on odd sizes, tails and strided inputs."""
import pytest
import torch
from torch.testing import FileCheck

from tests.e2e.test_f16_bits import ALL_HALVES, _assert_same_bits, _compiled, _float_sweep
from tests.helpers import one_kernel_source

F16 = torch.float16


_source = one_kernel_source


def test_a_bare_cast_converts_straight_from_input_to_output():
    x = torch.randn(5000)
    for fn, helper in [(lambda t: t.half(), "brrr_f16_store(&out0["),
                       (lambda t: t.half().float() + 0, None)]:
        src = _source(fn, x)
        assert (helper in src) if helper else "float hs" not in src, src
    src = _source(lambda t: t.float(), x.half())
    assert "brrr_f16_load(&out0[" in src and "#pragma omp simd" not in src, src


def test_arithmetic_stages_its_loads_and_stores_in_chunks():
    x, y = torch.randn(5000).half(), torch.randn(5000).half()
    src = _source(lambda a, b: a * 2 + b, x, y)
    assert src.count("brrr_f16_load(hl") == 2 and "brrr_f16_store(&out0[c0], hs" in src, src
    assert "brrr_f16_to_f32(" not in src, src


def test_a_gathered_load_keeps_the_integer_conversion():
    w, i = torch.randn(300, 16).half(), torch.randint(0, 16, (300, 5))
    src = _source(lambda w, i: torch.gather(w, 1, i) * 2, w, i)
    assert "brrr_f16_to_f32(" in src, src


@pytest.mark.parametrize("n", [1, 7, 8, 15, 16, 17, 255, 256, 257, 1000, 8193])
def test_odd_lengths_and_tails_keep_eagers_bits(n):
    h = ALL_HALVES[torch.randperm(len(ALL_HALVES), generator=torch.Generator().manual_seed(n))[:n]]
    f = _float_sweep()[:n]
    # (ops whose float32 result rounds once as eager's does: brrr's default keeps
    # intermediates in float32, tests/e2e/test_f16_bits.py rounds each op)
    for fn, arg in [(lambda t: t * 2 + 1, h), (lambda t: t.float(), h), (lambda t: t.half(), f),
                    (lambda t: (t * 0.5).half(), f)]:
        _assert_same_bits(_compiled(fn, arg), fn(arg))


def test_strided_and_transposed_halves_keep_eagers_bits():
    h = ALL_HALVES[:4096].reshape(64, 64)
    for arg in (h.t(), h[:, ::2], h[::3]):
        for fn in (lambda t: t * 2 + 1, lambda t: t.float(), lambda t: t.abs().half()):
            _assert_same_bits(_compiled(fn, arg), fn(arg))


def test_a_short_sum_walk_stages_its_half_loads_as_floats():
    """A float16 or bfloat16 load in a walk that sums a short row made gcc's vectors 32
    16-bit lanes wide and fold them in order after each row (cpp_staging.py): the walk
    now converts its chunk into a local float array first. Rows longer than
    STAGE_MAX_ROW keep their loads; values against eager on odd rows, NaN and inf.
    Contiguous float16 rows convert with brrr_f16_load (F16C or AVX-512), bfloat16 with
    its shift in explicit vectors (brrr_bf16_load: a plain loop of 16-bit loads is sized
    at 32 lanes, and rows of 24 ran scalar)."""
    from tests.helpers import check_against_eager

    def fn(x):
        return torch.nn.functional.layer_norm(x, x.shape[-1:]), x.float().sum(-1)

    for dtype, convert in ((F16, "brrr_f16_load(sh_v"), (torch.bfloat16, "brrr_bf16_load(sh_v")):
        src = _source(fn, torch.randn(64, 100).to(dtype))
        assert "float sh_v" in src and convert in src and "= sh_v" in src, src
        # longer bfloat16 rows keep their loads; float16 ones convert at any length
        assert ("float sh_v" in _source(fn, torch.randn(8, 300).to(dtype))) == (dtype is F16)
        for shape in ((64, 100), (3, 7, 33), (5, 256), (2, 1), (0, 40), (77, 24), (9, 47)):
            x = torch.randn(shape).to(dtype)
            if x.numel() >= 2:
                x.view(-1)[:2] = torch.tensor([float("nan"), float("inf")])
            if x.numel() >= 4:        # subnormal halves
                x.view(-1)[2:4] = torch.tensor([3e-6, -6e-8])
            check_against_eager(fn, x, grad=False, kernels=x.numel() > 0)
        x = torch.randn(100, 64).to(dtype).t()          # rows at a stride of 64
        check_against_eager(fn, x, grad=False)


def test_long_float16_rows_convert_their_loads_and_stores_a_chunk_at_a_time():
    """A row walk's float16 loads and stores along the row, at any row length, go
    through brrr_f16_load / brrr_f16_store (schedule/rows.py `_float16_rows`): a sum's
    walk keeps its block of lanes, and a rounding cast only a staged store reads prints
    none of its own (the store rounds). Values and gradients against eager on long odd
    rows with NaN, inf and subnormals."""
    from tests.helpers import check_against_eager

    src = _source(lambda x: x.sum(-1), torch.randn(16, 1024).half())
    FileCheck().check("brrr_f16_load(sh_v").check("c_v2[lane] +=").run(src)
    src = _source(lambda x: x.softmax(-1), torch.randn(16, 1024).half())
    FileCheck().check("float hs_v").check("= ((float)v").check("hs_v") \
        .check("brrr_f16_store(&out0[").run(src)
    g = torch.Generator().manual_seed(11)
    for shape in ((3, 1500), (2, 1025), (4, 3, 600)):
        x = torch.randn(shape, generator=g).half()
        x.view(-1)[:4] = torch.tensor([float("nan"), float("-inf"), 3e-6, -6e-8])
        for fn in (lambda t: t.sum(-1), lambda t: t.softmax(-1),
                   lambda t: torch.nn.functional.layer_norm(t, t.shape[-1:]) * 2):
            check_against_eager(fn, x, grad=False)
        y = torch.randn(shape, generator=g).half().requires_grad_()
        check_against_eager(lambda t: torch.nn.functional.layer_norm(t, t.shape[-1:]).softmax(-1), y)
