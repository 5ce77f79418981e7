"""float16 conversions priced as the printers print them (cost/conversions.py): the
target's instructions where the printer converts a chunk at a time, the prelude's
integer code elsewhere; bfloat16 stores as float16's where the CPU rounds bfloat16 in one
instruction, bfloat16 loads never (a shift either way)."""
import torch

from brrr_compiler import machine, scalar_ops
from brrr_compiler.cost.conversions import HARDWARE_COST, hardware_converted
from brrr_compiler.cost.from_kernel import kernel_stats
from brrr_compiler.lower.group import lower_group
from brrr_compiler.schedule import choose
from tests.helpers import plan_of


def _kernel(fn, *args):
    (g,) = plan_of(fn, *args).groups
    return lower_group(g, g.name)


def _flops(fn, *args, target="cpp"):
    k = _kernel(fn, *args)
    return kernel_stats(k, choose(k, target, 2)).flops


def _converted(fn, *args) -> list[tuple]:
    k = _kernel(fn, *args)
    sched = choose(k, "cpp", 2)
    return [(s.op, s.dtype) for i, p in enumerate(k.phases)
            for s in p.body if (s.op, s.out, s.buffer, str(s.index))
            in hardware_converted(k, sched, i, p)]


def test_row_walks_and_pointwise_loops_convert_float16_in_hardware():
    # softmax: the three walks' loads, the last walk's store and the cast only it reads
    got = _converted(lambda x: x.softmax(-1), torch.randn(64, 1024).half())
    assert got.count(("load", torch.float16)) == 3 and ("store", torch.float16) in got
    assert ("cast", torch.float16) in got
    got = _converted(lambda x: x * 2 + 1, torch.randn(64, 1024).half())
    assert {("load", torch.float16), ("store", torch.float16)} <= set(got)


def test_strided_and_bfloat16_accesses_keep_their_integer_conversion(monkeypatch):
    monkeypatch.setattr(machine, "rounds_bfloat16", lambda: False)
    assert _converted(lambda x: x.softmax(-1), torch.randn(64, 1024).bfloat16()) == []
    # a column walk copies a transposed float16 input's bits; the walk converts them
    x, y = torch.randn(8, 7, 8, 16).half(), torch.randn(8, 7, 16, 8).half()
    got = _converted(lambda x, y: (x - y.mT).amax(0), x, y)
    assert got.count(("load", torch.float16)) == 1     # x's, contiguous


def test_bfloat16_stores_convert_in_hardware_where_the_cpu_rounds_them(monkeypatch):
    """AVX512-BF16 (machine.rounds_bfloat16): the row walk's and the pointwise loop's
    stores and the casts only they read, never the loads (a shift either way)."""
    monkeypatch.setattr(machine, "rounds_bfloat16", lambda: True)
    x = torch.randn(64, 1024).bfloat16()
    for fn in (lambda x: x.softmax(-1), lambda x: x * 2 + 1):
        got = _converted(fn, x)
        assert set(got) == {("store", torch.bfloat16), ("cast", torch.bfloat16)}, got


def test_hardware_conversions_cost_less():
    x = torch.randn(256, 1024)
    f16 = _flops(lambda t: t.sum(-1), x.half())["float32"]
    bf16 = _flops(lambda t: t.sum(-1), x.bfloat16())["float32"]
    assert HARDWARE_COST == scalar_ops.CONVERSION_COST[("load", torch.bfloat16)]
    # the same but for each row's one float16 store of its sum (integer code)
    assert 0 < f16 - bf16 <= 256 * (scalar_ops.CONVERSION_COST[("store", torch.float16)]
                                    + scalar_ops.CONVERSION_COST[("cast", torch.float16)])


def test_triton_converts_every_float16_access_in_hardware():
    k = _kernel(lambda t: (t * 2).sum(-1), torch.randn(64, 128).half())
    sched = choose(k, "triton", 1)
    halves = {(s.op, s.out, s.buffer, str(s.index)) for p in k.phases for s in p.body
              if s.dtype is torch.float16 and s.op in ("load", "store", "cast")}
    assert halves and halves == set().union(*(hardware_converted(k, sched, i, p)
                                              for i, p in enumerate(k.phases)))


def test_a_bool_cast_to_float16_costs_no_rounding():
    """The printer casts a bool with a select of 1 or 0 (codegen/cpp.py cast_expr), never a
    rounding: pricing one made the cost policy refuse `(x > 0).half() * x` fused (generated
    pattern 2 at the LLC size, 0.54 -> 0.99 ms)."""
    x = torch.randn(64, 1024).half()
    n = x.numel()
    masked = _flops(lambda t: (t > 0).half() * t, x)["float32"]
    plain = _flops(lambda t: t * t, x)["float32"]
    assert masked - plain < n * scalar_ops.CONVERSION_COST[("cast", torch.float16)]


def test_a_flat_tile_converts_its_tile_loads_and_stores_in_hardware():
    # rows of 31 whole in each tile, every access flat across them (codegen/cpp_tiled.py)
    x = torch.randn(64, 32, 31).half()
    got = _converted(lambda x: torch.where(x.mT > -0.5, -1.5, x.mT).contiguous(), x)
    assert ("load", torch.float16) in got and ("store", torch.float16) in got
    # rows longer than a tile loop per row: the prelude's integer conversions stay
    assert _converted(lambda x: (x.t() + 1).contiguous(), torch.randn(96, 80).half()) == []
