"""The schedule stage: one value per (kernel, target, threads), printed as chosen and
counted by the cost model."""
import dataclasses

import pytest
import torch

from brrr_compiler.codegen import cpp
from brrr_compiler.codegen import triton as triton_printer
from brrr_compiler.cost import kernel_stats
from brrr_compiler.lower.group import lower_group
from brrr_compiler.schedule import choose
from brrr_compiler.schedule_ir import CppSchedule, TritonSchedule
from tests.helpers import check_against_eager, plan_of


def _kernel(fn, *args, use_scratch=True):
    (g,) = plan_of(fn, *args).groups
    return lower_group(g, g.name, use_scratch=use_scratch)


CASES = {   # name: (fn, inputs, the C++ kind)
    "pointwise": (lambda x: x * 2 + 1, (torch.randn(64, 256),), "pointwise"),
    "tiled": (lambda a, b: a + b.t(), (torch.randn(256, 128), torch.randn(128, 256)), "tiled"),
    "rows": (lambda x: torch.softmax(x, -1), (torch.randn(64, 1024),), "rows"),
    "columns": (lambda x: x.sum(0), (torch.randn(512, 256),), "columns"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_loop_nest_is_chosen_and_printed_as_chosen(name):
    fn, args, kind = CASES[name]
    k = _kernel(fn, *args)
    sched = choose(k, "cpp", 2)
    assert isinstance(sched, CppSchedule) and sched.kind == kind and sched.threads == 2
    assert cpp.print_kernel(k, sched) == cpp.kernel_source(k, 2)
    assert hash(sched) == hash(choose(k, "cpp", 2))          # a value: frozen, comparable
    with pytest.raises(dataclasses.FrozenInstanceError):
        sched.kind = "rows"
    assert sched.describe().startswith(kind)


@pytest.mark.parametrize("shape,dtype,tile_a", [
    ((64, 32, 3, 3), torch.float32, 9), ((8, 16, 4, 4), torch.float32, 128),
    ((64, 32, 3, 3), torch.float64, None)])
def test_a_transposed_dim_shorter_than_a_transpose_block(shape, dtype, tile_a):
    """A conv weight's channels-last copy (OIHW -> OHWI) transposes (I, kh * kw): with
    kh * kw = 9 each float tile spans the 9 taps whole (staged 16 x 9 at a time); other
    types walk the output, reading each line's few strided values while it is in L1."""
    k = _kernel(lambda w: w.clone(memory_format=torch.channels_last),
                torch.randn(shape, dtype=dtype))
    sched = choose(k, "cpp", 2)
    assert sched.kind == ("pointwise" if tile_a is None else "tiled"), sched
    assert tile_a is None or sched.tile[0] == tile_a, sched


def test_the_printer_reads_the_schedule_not_the_kernel():
    k = _kernel(lambda x: x * 2 + 1, torch.randn(64, 4096))
    sched = choose(k, "cpp", 2)
    assert "const int64_t tile = 8192;" in cpp.print_kernel(k, sched)
    other = dataclasses.replace(sched, inner_tile=1024, forks=True)
    src = cpp.print_kernel(k, other)
    assert "const int64_t tile = 1024;" in src and "#pragma omp parallel for" in src


def test_a_cat_splits_and_does_not_stream():
    k = _kernel(lambda a, b: torch.cat([a, b], 1) * 2, torch.randn(8, 48), torch.randn(8, 80))
    sched = choose(k, "cpp", 1)
    assert sched.pieces == ((0, 48), (48, 128)) and not sched.stream
    assert "split in 2 at 48" in sched.describe()


def test_softmax_rows_keep_scratch_in_the_output_and_prefetch():
    k = _kernel(lambda x: torch.softmax(x, -1), torch.randn(64, 1024))
    sched = choose(k, "cpp", 2)
    assert sched.scratch_rows and sched.scratch_rows[0][1].startswith("out")
    assert sched.prefetch and sched.forks is True


def test_rows_fork_by_the_elements_they_walk():
    """A softmax walks each row three times (max, exps, scale): 64 rows of 256 fork at a
    third of the elements a one-walk sum of the same rows needs, and the printed clause
    says the same for sizes known only at run time."""
    x = torch.randn(64, 256)
    softmax = choose(_kernel(lambda t: torch.softmax(t, -1), x), "cpp", 2)
    total = choose(_kernel(lambda t: t.sum(-1), x), "cpp", 2)
    assert softmax.forks is True and softmax.min_parallel == -(-32768 // 3)
    assert total.forks is False and total.min_parallel == 32768
    k = _kernel(lambda t: torch.softmax(t, -1), x)
    assert f"n_outer * n_red >= {softmax.min_parallel}" in cpp.print_kernel(k, softmax)


@pytest.mark.parametrize("shape", [(64, 256), (992, 32), (100, 100)])
def test_rows_forked_by_their_walks_match_eager(shape):
    g = torch.Generator().manual_seed(shape[1])
    x = torch.randn(shape, generator=g, requires_grad=True)
    check_against_eager(lambda t: t.masked_fill(t > 0.3, float("-inf")).softmax(-1), x)
    check_against_eager(lambda t: torch.nn.functional.layer_norm(t, (shape[1],)) * 2, x)


def test_triton_schedules_come_from_the_same_stage():
    k = _kernel(lambda x: x.sum(0), torch.randn(512, 256), use_scratch=False)
    sched = choose(k, "triton", sm_count=132)
    assert isinstance(sched, TritonSchedule) and sched.columns
    assert triton_printer.kernel_source(k, sched=sched) == triton_printer.kernel_source(k, 132)
    with pytest.raises(ValueError, match="no schedule for target"):
        choose(k, "metal")


def test_the_cost_model_counts_the_schedule_it_is_given():
    """A column sum's folds are counted as the column kind exactly when its schedule tiles
    columns: the counter reads the schedule instead of working the rule out again."""
    k = _kernel(lambda x: x.amax(0), torch.randn(512, 256))
    sched = choose(k, "cpp", 2)
    assert sched.columns
    as_rows = kernel_stats(k, dataclasses.replace(sched, kind="rows"))
    as_columns = kernel_stats(k, sched)
    assert as_columns.special != as_rows.special
    assert any(op.endswith("@columns") for _, op in as_columns.special)


def test_a_column_walk_counts_a_line_per_element_of_a_doubly_strided_operand():
    """A column walk stages a load strided along both its columns and the reduced dim (an
    operand transposed in its last two dims, reduced over dim 0) one element per cache
    line, in each phase reading it (cost/from_kernel._gathered); a load contiguous along
    the reduced dim reads whole lines as it walks, and counts as dense."""
    def f(a, b):
        return (a + b).amax(0)

    u = torch.randn(8, 4, 16, 128)
    doubly = torch.randn(8, 4, 128, 16).transpose(-1, -2)
    along_rows = torch.randn(4, 16, 128, 8).permute(3, 0, 1, 2)
    counted = []
    for b in (doubly, along_rows):
        k = _kernel(f, u, b)
        sched = choose(k, "cpp", 2)
        assert sched.kind == "columns", sched
        counted.append(kernel_stats(k, sched).gathered_bytes)
    assert counted == [8 * 4 * 16 * 128 * (64 - 4), 0]     # a line each, less the dense 4
    check_against_eager(f, u, doubly)


def test_short_masked_rows_stage_their_masks():
    """A masked softmax's sum over short rows copies the mask to int32 lanes first
    (codegen/cpp_staging.py); over long rows it keeps the byte loads."""
    def masked(x, m):
        return torch.softmax(x.masked_fill(m, float("-inf")), -1)

    def staged(cols):
        x, m = torch.randn(16, cols), torch.rand(16, cols) > 0.5
        k = _kernel(masked, x, m)
        sched = choose(k, "cpp", 2)
        return sched.staged, cpp.print_kernel(k, sched)

    short, src = staged(128)
    assert [b for _, b in short] == [32] and "int32_t st_" in src
    long_, src = staged(1024)
    assert not long_ and "int32_t st_" not in src


def _norm_over_outer_dims(x, y):
    """x is expanded along the kept (columns) dim, so its load steps only along the
    reduced dims; the full-size maximum that the norm reads, and stores, steps along
    the columns (generated pattern seed 15)."""
    v = torch.maximum(x, y)
    return v.norm(dim=(1, 0)), v * 2 - x


def test_a_load_the_columns_do_not_move_leaves_the_choice_to_the_others():
    x = torch.randn(20, 16, 1, dtype=torch.float64).expand(20, 16, 128)
    y = torch.randn(20, 16, 128, dtype=torch.float64)
    k = _kernel(_norm_over_outer_dims, x, y)
    assert choose(k, "cpp", 2).kind == "columns"
    check_against_eager(_norm_over_outer_dims, x, y, grad=False)


def _max_over_a_middle_dim(a, b):
    return (a - b).amax(1), (a * 2).abs()


def test_a_strided_load_walks_the_dim_it_steps_least_along():
    """b steps 2 along the kept columns and 128 along the reduced dim: the columns
    schedule reads it at the short stride (generated pattern seed 29 walked rows 128
    floats apart, 2-6x slower than eager)."""
    a = torch.randn(32, 32, 1).expand(32, 32, 64)
    b = torch.randn(32, 128)[:, ::2].unsqueeze(0).expand(32, 32, 64)
    k = _kernel(_max_over_a_middle_dim, a, b)
    assert choose(k, "cpp", 2).kind == "columns"
    check_against_eager(_max_over_a_middle_dim, a, b, grad=False)


def _rotary(q, c):
    return q * torch.cos(c) + torch.sin(c), torch.exp(c) > 1.5


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_values_of_an_input_expanded_along_an_outer_dim_are_computed_once(dtype):
    """c is the same for every head (dim 1): its cos, sin and exp are computed once per
    (batch, position, feature) and stored for each head (codegen/cpp_replicate.py); q
    reads along the heads, so a kernel reading it computes per element as before."""
    c = torch.randn(2, 1, 16, 24, dtype=dtype).expand(2, 8, 16, 24)
    k = _kernel(lambda c: torch.cos(c) * torch.sin(c), c)
    sched = choose(k, "cpp", 2)
    assert sched.replicate == 1 and "stored along dim 1" in sched.describe()
    src = cpp.print_kernel(k, sched)
    assert src.count("brrr_libm_cos") == 1 and "for (int64_t i1 = 0; i1 < n1; ++i1)" in src
    stats = kernel_stats(k, sched)
    plain = kernel_stats(k, dataclasses.replace(sched, replicate=None))
    assert sum(stats.transcendentals.values()) * 8 == sum(plain.transcendentals.values())
    check_against_eager(lambda c: (torch.cos(c), torch.exp(c) > 1.5), c, grad=False)
    q = torch.randn(2, 8, 16, 24, dtype=dtype)
    check_against_eager(_rotary, q, c, grad=False)
    assert choose(_kernel(lambda q, c: q * torch.cos(c), q, c), "cpp", 2).replicate is None


def test_a_cheap_body_is_not_replicated():
    c = torch.randn(2, 1, 16, 24).expand(2, 8, 16, 24)
    assert choose(_kernel(lambda c: c * 2 + 1, c), "cpp", 2).replicate is None


@pytest.mark.parametrize("dim", [1, 2], ids=["dim1", "dim2"])
def test_a_select_on_an_outer_index_unswitches_its_loop(dim):
    # a cat along an outer dim chooses by the outer index: gcc vectorizes that select only
    # with the inner loop copied per side (schedule/cpp.py: outer_index_select)
    parts = (torch.randn(2, 3, 4, 16), torch.randn(2, 5, 4, 16)) if dim == 1 else \
        (torch.randn(2, 3, 4, 16), torch.randn(2, 3, 6, 16))
    k = _kernel(lambda a, b: torch.cat((a, b), dim) * 0.5, *parts)
    sched = choose(k, "cpp", 2)
    assert len(sched.unswitch) == 1, sched
    src = cpp.print_kernel(k, sched)
    assert src.count("#pragma omp simd") == 2 and f"if ({sched.unswitch[0]})" in src
    check_against_eager(lambda a, b: torch.cat((a, b), dim) * 0.5, *parts, grad=False)


def test_a_select_on_the_inner_index_or_on_values_keeps_one_loop():
    inner = _kernel(lambda a, b: torch.cat((a, b), -1) * 0.5, torch.randn(4, 16), torch.randn(4, 8))
    values = _kernel(lambda x, y: torch.where(x > 0, x, y), torch.randn(8, 32), torch.randn(8, 32))
    assert not choose(inner, "cpp", 2).unswitch and not choose(values, "cpp", 2).unswitch


def test_more_outer_selects_than_copies_allow_keep_one_loop():
    # five pieces along dim 0: four conditions, 16 copies; past MAX_CONDITIONS the loop
    # stays one (selects on the row's values)
    parts = [torch.randn(n, 8) for n in (1, 2, 3, 1, 2)]
    k = _kernel(lambda *xs: torch.cat(xs, 0) * 2, *parts)
    sched = choose(k, "cpp", 2)
    assert sched.unswitch == () and cpp.print_kernel(k, sched).count("#pragma omp simd") == 1
    check_against_eager(lambda *xs: torch.cat(xs, 0) * 2, *parts, grad=False)


def test_a_select_on_a_bool_read_once_per_row_unswitches_its_loop():
    # a row's mask value is loop-invariant too; next to a libm call gcc kept the select a
    # branch ("control flow in loop") and the loop scalar (generated seed 46: a float64
    # lerp, whose scalar weight's test is a 0-dim bool, beside a tanh: 1.7x eager)
    def fn(x, m):
        return torch.where(m[:, None], torch.tanh(x * x), x)

    x, m = torch.randn(16, 40, dtype=torch.float64), torch.rand(16) > 0.5
    sched = choose(_kernel(fn, x, m), "cpp", 2)
    assert len(sched.unswitch) == 1, sched
    check_against_eager(fn, x, m, grad=False)
    y = torch.randn(16, 1, dtype=torch.float64).expand(16, 40)
    check_against_eager(lambda x, y: (torch.lerp(x, y, 0.25), torch.tanh(x * x)), x, y)


@pytest.mark.parametrize("shape", [(40000, 5, 5), (7, 3, 320)])
def test_a_column_tile_is_no_wider_than_the_columns(shape):
    """A max over the middle dim of (40000, 5, 5) kept and initialized 2048-wide tile
    arrays for 5 columns per row (6x the kernel's time); values match eager either way."""
    from tests.helpers import check_against_eager
    x = torch.randn(shape)
    k = _kernel(lambda t: t.amax(1), x)
    sched = choose(k, "cpp", 2)
    assert sched.kind == "columns" and sched.column_tile <= shape[-1]
    assert "b < bn; ++b) acc_" in cpp.print_kernel(k, sched)
    check_against_eager(lambda t: (t.amax(1), t.sum(1)), x.clone().requires_grad_())
