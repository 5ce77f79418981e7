"""The Triton printer checked as text: no GPU and no Triton needed.

Each kernel comes from a real fusion plan (the same Kernel IR the C++ printer reads);
the module it prints must be valid Python (compiled here, never run).
"""
import re

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing import FileCheck

from brrr_compiler.backend import choose_target
from brrr_compiler.capture import decomposition_table
from brrr_compiler.codegen import cpp, triton_body
from brrr_compiler.schedule import triton as triton_schedule
from brrr_compiler.codegen import triton as tr
from brrr_compiler.codegen.triton_reduce import RSTEPS
from brrr_compiler.config import build_config
from brrr_compiler.lower.group import lower_group
from brrr_compiler.partition import GreedyPolicy, partition
from brrr_compiler.runtime import triton_launch
from tests.helpers import plan_of


def _kernels(fn, *args):
    plan = plan_of(fn, *args)
    return [lower_group(g, g.name) for g in plan.groups]


def _kernel(fn, *args):
    ks = _kernels(fn, *args)
    assert len(ks) == 1, [k.name for k in ks]
    return ks[0]


def _source(fn, *args) -> str:
    src = tr.kernel_source(_kernel(fn, *args))
    compile(tr.PRELUDE + "\n" + src, "<kernel>", "exec")      # valid Python
    return src


def _mul_exp(y, xt):
    return (y * xt).exp() + 1


def test_pointwise_1d_tiling_masks_and_launcher():
    k = _kernel(_mul_exp, torch.randn(33, 17), torch.randn(33, 17))
    src = tr.kernel_source(k)
    (FileCheck().check(f"# {k.name}: fuses 3 ATen node(s)")
     .check("#   schedule: pointwise, XBLOCK=").check("@triton.jit")
     .check(f"def {k.name}(in0, in1, out0, XBLOCK: tl.constexpr):")
     .check("xnumel = 561").check("xoffset = tl.program_id(0) * XBLOCK")
     .check("xindex = xoffset + tl.arange(0, XBLOCK)").check("xmask = xindex < xnumel")
     .check("tl.load(in0 + i0, mask=xmask, other=0)").check("tl.exp(")
     .check("tl.store(out0 + i0, ").check("mask=xmask)")
     .check(f"def launch_{k.name}(in0, in1, out0):").check("if xnumel <= 0:")
     .check(f"{k.name}[grid](in0, in1, out0, XBLOCK=").check("num_warps=").run(src))
    assert ".to(tl.int64)" not in src


def test_kernel_named_like_the_cpp_one_with_its_aten_nodes():
    plan = plan_of(_mul_exp, torch.randn(33, 17), torch.randn(33, 17))
    group = plan.groups[0]
    k = lower_group(group, group.name)
    src, csrc = tr.kernel_source(k), cpp.kernel_source(k, 1)
    assert f"def {k.name}(" in src and f'void {k.name}(' in csrc
    check = FileCheck()
    for n in group.nodes:
        check = check.check(f"#   {n.name} = {str(n.target).replace('aten::', 'aten.')}(")
    check.check("@triton.jit").run(src)


def test_one_ssa_value_per_line():
    src = _source(lambda x, y: torch.sigmoid(x * y + 1).tanh(), torch.randn(8, 8), torch.randn(8, 8))
    assigned = re.findall(r"^\s+(v\d+) = ", src, re.M)
    assert assigned and len(assigned) == len(set(assigned))


def test_transposed_input_gets_a_2d_tile():
    src = _source(_mul_exp, torch.randn(33, 17), torch.randn(17, 33).t())
    (FileCheck().check("#   schedule: pointwise2d, YBLOCK=32, XBLOCK=32")
     .check("YBLOCK: tl.constexpr, XBLOCK: tl.constexpr")
     .check("yindex = (pid // xtiles) * YBLOCK + tl.arange(0, YBLOCK)[:, None]")
     .check("xindex = (pid % xtiles) * XBLOCK + tl.arange(0, XBLOCK)[None, :]")
     .check("ymask = yindex < ynumel").check("xmask = xindex < xnumel")
     .check("tl.load(in0 + (i0*17 + i1), mask=ymask & xmask, other=0)")
     .check("tl.load(in1 + (i1*33 + i0), mask=ymask & xmask, other=0)")
     .check("grid = (triton.cdiv(ynumel, 32) * triton.cdiv(xnumel, 32),)").run(src))


def test_broadcast_bias_in_a_2d_tile_is_masked_by_its_own_variable():
    src = _source(lambda x, yt, b: x * yt + b, torch.randn(33, 17), torch.randn(17, 33).t(),
                  torch.randn(17))
    FileCheck().check("pointwise2d").check("tl.load(in2 + i1, mask=xmask, other=0)").run(src)


def test_outer_dims_decode_from_the_flat_index():
    src = _source(lambda x, b: torch.tanh(x + b), torch.randn(4, 8, 16), torch.randn(8, 1))
    (FileCheck().check("i2 = xindex % 16").check("i1 = (xindex // 16) % 8")
     .check("i0 = (xindex // 128)").check("tl.load(in1 + i1, mask=xmask, other=0)")
     .check("libdevice.tanh(").run(src))


def test_persistent_softmax_reduces_along_the_row():
    src = _source(lambda x: torch.softmax(x, -1), torch.randn(8, 37))
    (FileCheck().check("#   schedule: persistent, XBLOCK=").check("RBLOCK=64")
     .check("xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
     .check("rbase = tl.arange(0, RBLOCK)[None, :]").check("rmask = rindex < rnumel")
     .check("tl.load(in0 + (i0*37 + r0), mask=xmask & rmask, other=0)")
     .check('tl.reduce(tl.where(xrmask, v0, float("-inf")), 1, _brrr_max)[:, None]')
     .check('float("nan")')                        # a NaN in the row propagates
     .check("tl.reduce(tl.where(xrmask, v4, 0), 1, _brrr_sum)[:, None]")
     .check("tl.store(out0 + (i0*37 + r0), ")
     .check("mask=xmask & rmask)").run(src))
    assert "for roffset" not in src


def test_long_rows_loop_over_reduction_blocks():
    src = _source(lambda x: torch.softmax(x, -1), torch.randn(4, 10000))
    (FileCheck().check("#   schedule: looped, XBLOCK=1, RBLOCK=1024")
     .check('acc_v1 = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)')
     .check("for roffset in range(0, rnumel, RBLOCK):").check("rindex = roffset + rbase")
     .check("acc_v1 = tl.where(xrmask, tl.maximum(acc_v1, v0), acc_v1)")
     .check("m_v1 = tl.reduce(acc_v1, 1, _brrr_max)[:, None]")
     .check("for roffset in range(0, rnumel, RBLOCK):")
     .check("acc_v5 = tl.where(xrmask, acc_v5 + v4, acc_v5)")
     .check("v5 = tl.reduce(acc_v5, 1, _brrr_sum)[:, None]")
     .check("for roffset in range(0, rnumel, RBLOCK):").check("tl.store(out0 + ").run(src))


def test_column_sum_tiles_columns():
    src = _source(lambda x: x.sum(0), torch.randn(100, 256))
    FileCheck().check("#   schedule: looped, XBLOCK=64, RBLOCK=16").run(src)
    assert "for rblock" not in src            # 7 chunks: one loop, no blocks


def test_long_float_sums_add_their_lanes_in_blocks():
    """More than RSTEPS chunks: each lane adds a block of chunks into blk_, then the
    block into acc_ (triton_reduce's note); a max needs no blocks."""
    src = _source(lambda x: (x.sum(0), x.amax(0)), torch.randn(4096, 64))
    (FileCheck().check("acc_v1 = tl.full([XBLOCK, RBLOCK], 0, tl.float32)")
     .check(f"for rblock in range(0, rnumel, RBLOCK * {RSTEPS}):")
     .check("blk_v1 = tl.full([XBLOCK, RBLOCK], 0, tl.float32)")
     .check(f"rend = tl.minimum(rblock + RBLOCK * {RSTEPS}, rnumel)")
     .check("for roffset in range(rblock, rend, RBLOCK):")
     .check("blk_v1 = tl.where(xrmask, blk_v1 + v0, blk_v1)")
     .check("acc_v2 = tl.where(xrmask, tl.maximum(acc_v2, v0), acc_v2)")
     .check("acc_v1 = acc_v1 + blk_v1").check("v1 = tl.reduce(acc_v1, 1, _brrr_sum)").run(src))
    assert "blk_v2" not in src


def test_argmax_folds_value_index_pairs():
    src = _source(lambda x: x.argmax(-1), torch.randn(4, 37))
    (FileCheck().check("(r0).to(tl.int64)").check('tl.where(xrmask, v0, float("-inf"))')
     .check("tl.reduce((a_v2, ai_v2), 1, _brrr_argmax)").run(src))
    FileCheck().check("def _brrr_argmax(a, ai, b, bi):").check("(ai < bi)").run(tr.PRELUDE)


@pytest.mark.parametrize("kind", ["sum", "prod", "amax", "amin", "any", "all", "argmin"])
def test_every_reduction_kind_prints_and_compiles(kind):
    def fn(x):
        v = x > 0 if kind in ("any", "all") else x
        return getattr(v, kind)(-1)
    for shape in ((4, 37), (2, 9000)):                 # persistent, then looped
        _source(fn, torch.randn(*shape))


def test_bfloat16_is_computed_in_float32_and_rounded_on_store():
    src = _source(_mul_exp, torch.randn(33, 17, dtype=torch.bfloat16),
                  torch.randn(33, 17, dtype=torch.bfloat16))
    (FileCheck().check("tl.load(in0 + i0, mask=xmask, other=0).to(tl.float32)")
     .check("tl.exp(").check("_brrr_round_bf16(").check(".to(tl.bfloat16), mask=xmask)").run(src))
    assert "tl.bfloat16)" not in src.split("tl.store")[0]        # no narrowing before the store


def test_float16_cast_rounds_in_registers():
    src = _source(lambda x: x.half().float() * 2, torch.randn(8, 8))
    FileCheck().check(".to(tl.float16).to(tl.float32)").run(src)


def test_int64_offsets_when_the_domain_needs_them():
    big = torch.randn(1).expand(2**16, 2**16 + 1)          # 4G logical elements, 4 bytes real
    k = _kernel(lambda x: x * 2, big)
    assert triton_schedule.needs_int64(k)
    src = tr.kernel_source(k)
    (FileCheck().check("int64 indexing").check("xoffset = tl.program_id(0).to(tl.int64) * XBLOCK")
     .run(src))
    small = tr.kernel_source(_kernel(lambda x: x * 2, torch.randn(64)))
    assert "tl.int64" not in small and "int32 indexing" in small


def test_int64_reduction_aranges():
    big = torch.randn(1, 1).expand(2**16, 2**16 + 1)
    src = tr.kernel_source(_kernel(lambda x: x.sum(-1), big))
    FileCheck().check("tl.program_id(0).to(tl.int64)").check(
        "rbase = tl.arange(0, RBLOCK)[None, :].to(tl.int64)").run(src)


def test_block_rule():
    s = triton_schedule.choose_triton(_kernel(lambda x: x + 1, torch.randn(1 << 22)), sm_count=132)
    assert (s.kind, s.xblock, s.num_warps) == ("pointwise", 1024, 4)
    s = triton_schedule.choose_triton(_kernel(lambda x: x + 1, torch.randn(1000)), sm_count=132)
    assert (s.xblock, s.num_warps) == (128, 1)
    s = triton_schedule.choose_triton(_kernel(lambda x: x.softmax(-1), torch.randn(4096, 128)), sm_count=132)
    assert (s.kind, s.rblock, s.xblock) == ("persistent", 128, 8)
    s = triton_schedule.choose_triton(_kernel(lambda x: x.softmax(-1), torch.randn(8, 100000)), sm_count=132)
    assert (s.kind, s.rblock, s.xblock, s.num_warps) == ("looped", 2048, 1, 8)


def test_whole_module_is_valid_python():
    ks = _kernels(lambda x, w, b: (F.layer_norm(x, [24], w, b), x.amax(0)),
                  torch.randn(6, 24), torch.randn(24), torch.randn(24))
    src = tr.module_source(ks)
    compile(src, "<module>", "exec")
    assert src.count("@triton.jit") == len(ks) + src[:src.index("# k0")].count("@triton.jit")
    FileCheck().check("import triton.language as tl").check("libdevice = ").run(src)


def test_gather_checks_its_index():
    src = _source(lambda x, i: torch.gather(x, 1, i), torch.randn(4, 9),
                  torch.randint(0, 9, (4, 3)))
    (FileCheck().check(", err, ").check("ok_").check("tl.store(err + ").check("tl.where(ok_")
     .run(src))


def test_integer_pow_has_no_triton_rule():
    with pytest.raises(NotImplementedError, match="no rule for scalar op 'pow'"):
        triton_body.op_expr("pow", ["a", "b"], torch.int64)


def _cuda_graph(fn, *shapes):
    """`fn` traced to ATen with fake CUDA tensors (works on a machine without a GPU)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        args = [torch.empty(s, device="cuda") for s in shapes]
    return make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)


def test_cuda_graphs_go_to_triton_and_fuse_on_the_gpu(monkeypatch):
    gm = _cuda_graph(lambda x, b: torch.softmax(x + b, -1), (8, 32), (32,))
    monkeypatch.setattr(triton_launch, "available", lambda: True)
    target, device = choose_target(build_config({}), gm)
    assert (target, device.type) == ("triton", "cuda")
    assert choose_target(build_config({"target": "cpp"}), gm) == (None, None)
    cpu_plan = partition(gm, GreedyPolicy())                 # default: the CPU's kernels
    assert cpu_plan.groups == []
    plan = partition(gm, GreedyPolicy(), device=device)
    assert len(plan.groups) == 1
    k = lower_group(plan.groups[0], plan.groups[0].name)
    compile(tr.module_source([k]), "<cuda module>", "exec")


def test_cuda_tensors_without_triton_warn_and_run_through_aten(monkeypatch):
    gm = _cuda_graph(lambda x: x.sin() + 1, (4, 4))
    monkeypatch.setattr(triton_launch, "available", lambda: False)
    with pytest.warns(RuntimeWarning, match="need Triton"):
        assert choose_target(build_config({}), gm) == (None, None)


def test_target_option_is_validated():
    assert build_config({}).target == "auto"
    assert build_config({"target": "triton", "cudagraphs": True}).cudagraphs
    with pytest.raises(ValueError, match="'auto', 'cpp' or 'triton'"):
        build_config({"target": "cuda"})
