"""The C++ printer checked as text: no compiler runs here."""
import re

import pytest
import sympy
import torch
from torch.testing import FileCheck

from brrr_compiler.codegen import cpp
from brrr_compiler.lower.group import lower_group
from brrr_compiler.runtime import toolchain
from tests.helpers import plan_of

i0, i1 = sympy.symbols("i0 i1")


def _kernel(fn, *args, use_scratch=False):
    """The one kernel brrr makes for `fn`, lowered from its fusion plan."""
    plan = plan_of(fn, *args)
    assert len(plan.groups) == 1, str(plan)
    g = plan.groups[0]
    return g, lower_group(g, g.name, use_scratch=use_scratch)


def _buffer(kernel, origin: str) -> str:
    return next(b.name for b in kernel.buffers if b.origin == origin)


def _load_index(source: str, buf: str) -> sympy.Expr:
    """The index expression of the (one) load from `buf`, parsed back into sympy."""
    found = re.findall(rf"\b{buf}\[(.*?)\];", source)
    assert len(found) == 1, f"{len(found)} loads of {buf} in:\n{source}"
    return sympy.sympify(found[0])


def _mul_exp(y, xt):
    return (y * xt).exp() + 1


def _inputs(dtype=torch.float32):
    return torch.randn(33, 17, dtype=dtype), torch.randn(17, 33, dtype=dtype).t()


def _row_inputs(dtype=torch.float32):
    """Rows longer than a tile (a loop per row): a flat tile (inner dims of 16-64, as
    _inputs') converts float16 a chunk at a time (test_cpp_flat_tile_halves.py)."""
    return torch.randn(33, 80, dtype=dtype), torch.randn(80, 33, dtype=dtype).t()


def test_function_loops_and_pragmas():
    x, y = _inputs()
    _, k = _kernel(_mul_exp, x, y.contiguous())
    src = cpp.kernel_source(k, 4)
    (FileCheck().check(f'extern "C" BRRR_WIDE void {k.name}(const float* __restrict in0')
     .check("// one thread: nwork * (n_inner < tile ? n_inner : tile) >= 32768 && nwork > 1 "
            "is false for these sizes")
     .check("for (int64_t w = 0; w < nwork; ++w)")
     .check("#pragma omp simd").check("for (int64_t i0 = lo; i0 < hi; ++i0)")
     .check("brrr_expf(").check("out0[").run(src))
    assert "omp parallel" not in src        # 561 elements: never forks, so no OpenMP region
    assert k.name.startswith("k0_")


def test_transcendental_kernels_ask_for_full_width_vectors():
    """A kernel of transcendental functions (a libm call, the inline exp) is BRRR_WIDE
    (the prelude's note); one of arithmetic keeps the compiler's preferred width."""
    x, y = _inputs()
    for fn in (lambda x, y: torch.sin(x) * y, _mul_exp):
        _, k = _kernel(fn, x, y.contiguous())
        assert f'extern "C" BRRR_WIDE void {k.name}(' in cpp.kernel_source(k, 2)
    _, k = _kernel(lambda x, y: x * y + 1, x, y.contiguous())
    assert "BRRR_WIDE" not in cpp.kernel_source(k, 2)
    assert "#define BRRR_WIDE" in cpp.prelude()


def test_parallel_pragma_when_the_work_forks():
    """Enough work (or symbolic sizes): the loop keeps its pragma and its run-time if."""
    x = torch.randn(256, 256)
    _, k = _kernel(_mul_exp, x, torch.randn(256, 256))
    (FileCheck().check("#pragma omp parallel for num_threads(4) schedule(static) if (")
     .check("for (int64_t w = 0; w < nwork; ++w)").run(cpp.kernel_source(k, 4)))


def test_one_comment_line_per_fused_node():
    group, k = _kernel(_mul_exp, *_inputs())
    src = cpp.kernel_source(k, 1)
    check = FileCheck().check(f"// {k.name}: fuses {len(group.nodes)} ATen node(s)")
    for n in group.nodes:
        check = check.check(f"//   {n.name} = {str(n.target).replace('aten::', 'aten.')}(")
    check.check('extern "C"').run(src)
    comments = [line for line in src.splitlines() if re.match(r"//   \w+ = aten\.", line)]
    assert len(comments) == len(group.nodes) == 3


def test_broadcast_bias_is_indexed_by_the_inner_var_only():
    _, k = _kernel(lambda x, b: torch.tanh(x + b), torch.randn(33, 17), torch.randn(17))
    src = cpp.kernel_source(k, 1)
    assert _load_index(src, _buffer(k, "b_1")) == i1
    assert _load_index(src, _buffer(k, "x_1")) == 17 * i0 + i1
    FileCheck().check("#pragma omp simd").check("for (int64_t i1").check("in1[i1]").run(src)


def test_contiguous_kernel_is_one_flat_loop():
    _, k = _kernel(_mul_exp, torch.randn(33, 17), torch.randn(33, 17))
    src = cpp.kernel_source(k, 1)
    FileCheck().check("const int64_t n_inner = 561;").check("in0[i0]").check("in1[i0]") \
        .check("out0[i0]").check_not("i1").run(src)


def _rotate_half(x, sin):
    return torch.cat((-x[..., 16:], x[..., :16]), dim=-1) * sin


def test_cat_along_the_inner_dim_splits_into_plain_loads():
    """One loop per half of the cat, each reading its input at an affine index: no
    clamp (brrr_min_i64) and no select in either loop body."""
    _, k = _kernel(_rotate_half, torch.randn(5, 32), torch.randn(32))
    src = cpp.kernel_source(k, 1)
    x = _buffer(k, "x_1")           # both halves read x itself (its slices fold in)
    (FileCheck().check("#pragma omp simd").check("for (int64_t i1 = lo; i1 < brrr_min_i64(hi, 16); ++i1)")
     .check(f"{x}[(i0*32 + i1 + 16)]").check_not(f"{x}[").check("out0[")
     .check("#pragma omp simd").check("for (int64_t i1 = brrr_max_i64(lo, 16); i1 < hi; ++i1)")
     .check(f"{x}[(i0*32 + i1 + -16)]").check("out0[").check_not("#pragma omp simd").run(src))
    body = src.partition("#pragma omp simd")[2]
    assert "brrr_min_i64(" not in "".join(ln for ln in body.splitlines() if "for (" not in ln)
    assert " ? " not in body


def test_cat_along_an_outer_dim_copies_its_clamped_loop_per_side():
    # the side is computed once per row, and each copy of the loop declares it a constant
    # (codegen/cpp_unswitch.py); the loads stay clamped
    _, k = _kernel(lambda a, b: torch.cat((a, -b), dim=0) * 2, torch.randn(3, 8), torch.randn(5, 8))
    src = cpp.kernel_source(k, 1)
    assert src.count("#pragma omp simd") == 2 and "brrr_min_i64(" in src.partition("omp simd")[2]
    (FileCheck().check("if (").check("= true;").check("omp simd").check("} else {")
     .check("= false;").check("omp simd").run(src))


@pytest.mark.parametrize("dtype,load,rnd,store", [
    (torch.bfloat16, "brrr_bf16_to_f32", "brrr_round_bf16", "brrr_bf16_bits"),
    (torch.float16, "brrr_f16_to_f32", "brrr_round_f16", "brrr_f16_bits")])
def test_low_precision_loads_and_stores_convert(dtype, load, rnd, store):
    """Both live as uint16_t bits (gcc vectorizes no _Float16 conversion)."""
    _, k = _kernel(_mul_exp, *_row_inputs(dtype))
    src = cpp.kernel_source(k, 1)
    (FileCheck().check("const uint16_t* __restrict in0").check("uint16_t* __restrict out0")
     .check("uint16_t tb0[").check(f"{load}(in0[").check(f"{load}(tb0[")
     .check("expf(").check(f"{rnd}(").check(f"= {store}(").run(src))
    assert "double" not in src and "_Float16" not in src and "brrr_half" not in src


@pytest.mark.parametrize("dtype,store,literal", [(torch.bfloat16, "brrr_bf16_bits(", "1.1015625"),
                                                 (torch.float16, "brrr_f16_bits(", "1.099609375")])
def test_low_precision_store_keeps_the_rounded_bits(dtype, store, literal):
    """The cast rounds once; the store only moves the bits (no second rounding), and a
    literal is the dtype's value, so that stays exact."""
    _, k = _kernel(_mul_exp, *_row_inputs(dtype))
    lines = [ln for ln in cpp.kernel_source(k, 1).splitlines() if "out0[" in ln]
    assert len(lines) == 1 and store in lines[0] and "round" not in lines[0]
    assert cpp.const_literal(1.1, dtype) == f"((float){literal})"


def test_no_fast_math_anywhere():
    _, k = _kernel(_mul_exp, *_inputs())
    unit = cpp.translation_unit([k], 2)
    FileCheck().check("brrr_bf16_to_f32").check(f'extern "C" BRRR_WIDE void {k.name}').run(unit)
    code = re.sub(r"//[^\n]*", "", unit)          # the prelude's comments may name the flag
    for text in (code, " ".join(toolchain.BASE_FLAGS + (toolchain.NATIVE_FLAG,))):
        for unsafe in ("fast-math", "-Ofast", "unsafe-math", "finite-math", "optimize"):
            assert unsafe not in text, unsafe


def test_identical_kernels_are_compiled_once():
    """Two layers' kernels with the same code: the second is an alias of the first."""
    def two_layers(x, y):
        a = torch.nn.functional.layer_norm(x, (64,)).relu()
        return a @ y, torch.nn.functional.layer_norm(a @ y, (64,)).relu()

    plan = plan_of(two_layers, torch.randn(8, 64), torch.randn(64, 64))
    kernels = [lower_group(g, g.name) for g in plan.groups]
    assert len(kernels) == 2, str(plan)
    unit = cpp.translation_unit(kernels, 2)
    first, second = kernels[0].name, kernels[1].name
    FileCheck().check(f"void {first}(").check(f"same code as {first}").check(
        f'void {second}(').check(f'__attribute__((alias("{first}")));').run(unit)
    assert unit.count("#pragma omp") == cpp.kernel_source(kernels[0], 2).count("#pragma omp")


def test_softmax_prefetches_the_next_row_during_its_exp_phase():
    x = torch.randn(64, 300)
    _, k = _kernel(lambda t: torch.softmax(t, -1), x, use_scratch=True)
    src = cpp.kernel_source(k, 2)
    (FileCheck().check("const int64_t p_i0 = prest % n0;")
     .check("reduction(max:")                        # phase 1 reads the row: no prefetch
     .check("__builtin_prefetch(&in0[(p_i0*300 + pf)], 0, 1);")
     .check("brrr_expf_nonpos(").run(src))
    assert src.count("__builtin_prefetch") == 1


def test_exp_of_x_minus_its_row_max_is_the_nonpositive_exp():
    """transforms/signs.py: exp(a - max(a)) cannot overflow; exp(a - max(b)) can."""
    x, y = torch.randn(64, 300), torch.randn(64, 300)
    own = cpp.kernel_source(_kernel(lambda t: torch.softmax(t * 0.5, -1), x)[1], 2)
    other = cpp.kernel_source(_kernel(lambda a, b: torch.exp(a - b.amax(-1, keepdim=True)), x, y)[1], 2)
    assert "brrr_expf_nonpos(" in own and "brrr_expf(" not in own.split("// k0_")[1]
    assert "brrr_expf_nonpos(" not in other and "brrr_expf(" in other


def test_exp_of_a_negated_square_or_abs_is_the_nonpositive_exp():
    x = torch.randn(64, 300)
    for fn, marked in [(lambda t: torch.exp(t * t * -0.5), True), (lambda t: torch.exp(-t.abs()), True),
                       (lambda t: torch.exp(t.abs() - t * t), False), (lambda t: torch.exp(t * -0.5), False)]:
        src = cpp.kernel_source(_kernel(fn, x)[1], 2).split("extern")[1]
        assert ("brrr_expf_nonpos(" in src) == marked and ("brrr_expf(" in src) != marked, src


def test_cross_entropy_folds_max_and_sum_in_one_walk():
    """cpp_online.py: the running max rescales the sum; no second walk, no prefetch."""
    x, t = torch.randn(64, 3000), torch.randint(0, 3000, (64,))
    src = cpp.kernel_source(_kernel(lambda a, b: torch.nn.functional.cross_entropy(a, b), x, t)[1], 2)
    (FileCheck().check("reduction(max:c_").check("if (c_v1 > acc_v1) {")
     .check("if (acc_v5 != 0)")      # a row's first chunk has no sum to rescale
     .check("*= (double)brrr_libm_exp((double)acc_v1 - (double)c_v1);")
     .check("const float v1 = acc_v1;").check("reduction(+:c_").check("brrr_expf_nonpos(")
     .run(src))
    assert src.count("for (int64_t cb = 0;") == 1 and "__builtin_prefetch" not in src


def test_single_pass_reduction_has_no_prefetch():
    _, k = _kernel(lambda t: t.sum(-1), torch.randn(64, 300))
    assert "__builtin_prefetch" not in cpp.kernel_source(k, 2)


def test_softmax_keeps_its_exp_row_in_the_output_row():
    _, k = _kernel(lambda t: torch.softmax(t, -1), torch.randn(64, 300), use_scratch=True)
    assert k.scratch                                # the IR keeps a scratch row...
    src = cpp.kernel_source(k, 2)
    assert "malloc" not in src and "scratch" not in src   # ...printed as the output row
    (FileCheck().check("brrr_expf_nonpos(").check("out0[(i0*300 + r0)] = v")
     .check("= out0[(i0*300 + r0)];").check("out0[(i0*300 + r0)] = v").run(src))


def test_bfloat16_softmax_keeps_a_float_scratch_row():
    _, k = _kernel(lambda t: torch.softmax(t, -1), torch.randn(64, 300, dtype=torch.bfloat16),
                   use_scratch=True)
    src = cpp.kernel_source(k, 2)
    assert "float* scratch0 = (float*)malloc(" in src


def test_outputs_larger_than_the_cache_stream_past_it():
    """Stores of a 32 MB output go through a staging array and brrr_stream; a small
    output stores directly (cpp_stream.py)."""
    big = cpp.kernel_source(_kernel(lambda x: x * 2 + 1, torch.randn(4096, 2048))[1], 2)
    (FileCheck().check("__typeof__(out0[0]) sb_out0[256];").check("sb_out0[i0 - c0] =")
     .check("brrr_stream(&out0[").check("brrr_stream_fence();").run(big))
    f64 = cpp.kernel_source(_kernel(lambda x: x * 2, torch.randn(2048, 2048, dtype=torch.float64))[1], 2)
    FileCheck().check("__typeof__(out0[0]) sb_out0[256];").check("brrr_stream(&out0[").run(f64)
    bf16 = cpp.kernel_source(_kernel(lambda x: x * 2, torch.randn(4096, 4096, dtype=torch.bfloat16))[1], 2)
    assert "brrr_stream" not in bf16                # see cpp_stream.STREAM_DTYPES
    small = cpp.kernel_source(_kernel(lambda x: x * 2 + 1, torch.randn(64, 2048))[1], 2)
    assert "brrr_stream" not in small


def test_short_rows_stream_where_they_follow_one_another_in_whole_lines():
    """A pointwise output's rows shorter than MIN_RUN stream where each row is whole cache
    lines and the next row follows it (schedule/stream.py); rows of 100 floats share lines
    with their neighbours and keep ordinary stores. Row kernels stream such rows from
    MIN_ROW_RUN on."""
    from brrr_compiler.schedule.stream import MIN_ROW_RUN

    lines = cpp.kernel_source(_kernel(lambda x: x[:, :128] * 2, torch.randn(65536, 256))[1], 2)
    FileCheck().check("__typeof__(out0[0]) sb_out0[256];").check("brrr_stream(&out0[").run(lines)
    shared = cpp.kernel_source(_kernel(lambda x: x[:, :100] * 2, torch.randn(90000, 128))[1], 2)
    assert "brrr_stream" not in shared

    def centred(x):
        return x - x.mean(-1, keepdim=True)

    rows = cpp.kernel_source(_kernel(centred, torch.randn(16384, MIN_ROW_RUN))[1], 2)
    FileCheck().check("brrr_stream(&out0[").check("brrr_stream_fence();").run(rows)
    short = cpp.kernel_source(_kernel(centred, torch.randn(32768, MIN_ROW_RUN // 2))[1], 2)
    assert "brrr_stream" not in short


def test_tiled_transpose_streams_each_tile_row():
    x = torch.randn(4096, 2048)
    src = cpp.kernel_source(_kernel(lambda a, b: a + b.t(), x, torch.randn(2048, 4096))[1], 2)
    (FileCheck().check("brrr_transpose16(").check("for (int64_t c0 = b_lo; c0 < b_hi; c0 += 256)")
     .check("sb_out0[i1 - c0] =").check("brrr_stream(&out0[").check("brrr_stream_fence();")
     .run(src))


def test_row_kernels_stream_their_last_phase():
    def rms(x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)

    src = cpp.kernel_source(_kernel(rms, torch.randn(4096, 2048))[1], 2)
    (FileCheck().check("#pragma omp for schedule(static) nowait").check("brrr_fold_lanes<64>(")
     .check("brrr_stream(&out0[").check("brrr_stream_fence();").run(src))
    assert src.count("brrr_stream_fence();") == 2   # once per thread, in both row schedules


def test_column_folds_keep_partial_rows_per_thread_and_add_them_in_order():
    """A row kernel's sums over the rows (codegen/cpp_columns.py): each thread adds its
    rows into a private partial row, flushed into its double row every BLOCK_ROWS rows;
    after all rows each column adds the threads' rows in thread order, then stores."""
    from brrr_compiler.codegen.cpp_columns import BLOCK_ROWS

    g, k = _kernel(lambda x: (x.softmax(-1), x.sum(0) * 2), torch.randn(512, 128))
    assert k.folds_columns and not k.folds_across and len(g.columns) == 1
    (c,) = [s for s in k.body if s.op == "column_reduce"]
    src = cpp.kernel_source(k, 4)
    (FileCheck().check(f"double* cs_{c.out} = (double*)calloc((size_t)4 * (n_red > 0 ? n_red : 1)")
     .check("#pragma omp parallel num_threads(4)")
     .check(f"float* cp_{c.out} = (float*)calloc(")
     .check("#pragma omp for schedule(static) nowait")
     .check("#pragma omp simd").check(f"cp_{c.out}[r0] += ")
     .check(f"if (++col_rows == {BLOCK_ROWS}) {{")
     .check(f"row[j] += (double)cp_{c.out}[j]; cp_{c.out}[j] = 0;")
     .check(f"free(cp_{c.out});")
     .check("// one thread: n_red * 4 >= 32768 is false for these sizes")
     .check("for (int64_t rr = 0; rr < n_red; ++rr)")
     .check(f"for (int t = 0; t < 4; ++t) t_{c.out} += cs_{c.out}[(int64_t)t * n_red + r0];")
     .check(f"const float {c.out} = (float)t_{c.out};")
     .check("out1[r0] = ").check(f"free(cs_{c.out});").run(src))


def test_column_folds_of_a_split_row_add_straight_into_one_double_row():
    """Rows too few to spread: each loop phase's slice of the row is one thread's, so its
    columns go straight to thread 0's double row."""
    _, k = _kernel(lambda x: (x.softmax(-1), x.sum(0)), torch.randn(2, 70000))
    (c,) = [s for s in k.body if s.op == "column_reduce"]
    src = cpp.kernel_source(k, 4)
    FileCheck().check("n_red >= 65536").check(f"cs_{c.out}[r0] += (double)").run(src)
