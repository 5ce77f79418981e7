"""Estimates against hand-computed numbers on toy and datasheet devices; missing
information is an error, never a zero."""
import pytest
import sympy
import torch

from brrr_compiler.cost import PRESETS, CostModelError, DeviceSpec, predict
from brrr_compiler.cost.estimate import hit_fraction
from brrr_compiler.cost.stats import KernelStats, as_int, itemsize, op_cost
from brrr_compiler.codegen import cpp
from brrr_compiler.cost.from_kernel import kernel_stats
from brrr_compiler.kernel_ir import Buffer, Kernel, Phase, Stmt, loop_symbol
from brrr_compiler.lower.group import lower_group
from brrr_compiler.lowered_count import cost_policy
from brrr_compiler.schedule import choose
from tests.helpers import plan_of

# round numbers: 1 GFLOP/s, 0.1 G exp/s, 1 GB/s from memory, nothing in cache
TOY = DeviceSpec(name="toy", kind="cpu", threads=1, flops={"float32": 1e9, "float64": 0.5e9},
                 transcendentals=1e8, dram_bandwidth=1e9, cache_bandwidth=1e10,
                 l2_bytes=1 << 20, llc_bytes=0, kernel_overhead_s=1e-6,
                 parallel_min_elements=0)
N = 1000


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def estimate_group(group, device: DeviceSpec):
    """The estimate the cost policy makes for `group`'s kernel as lowering would print it
    for `device`'s target."""
    cpu = device.kind == "cpu"
    policy = cost_policy(device, "cpp" if cpu else "triton", threads=device.threads if cpu else 1)
    return policy.kernel(set(group.nodes), frozenset(), group.outputs)


def _only_group(fn, *args):
    plan = plan_of(fn, *args)
    assert len(plan.groups) == 1, str(plan)
    return plan.groups[0]


def test_pointwise_chain_is_memory_bound():
    est = estimate_group(_only_group(lambda x: x * 2 + 1, _x(N, N)), TOY)
    assert est.flops == 2 * N * N                       # a mul and an add per element
    assert est.bytes == 8 * N * N                       # 4 MB read, 4 MB written
    assert est.compute_s == pytest.approx(2e-3)
    assert est.memory_s == pytest.approx(8e-3)
    assert est.total_s == pytest.approx(8e-3 + 1e-6)
    assert est.bound == "memory"


def test_transcendental_at_its_own_rate():
    est = estimate_group(_only_group(lambda x: x.exp() * 3, _x(N, N)), TOY)
    assert est.compute_s == pytest.approx(N * N / 1e8 + N * N / 1e9)
    assert est.total_s == pytest.approx(1.1e-2 + 1e-6)
    assert est.bound == "compute"
    assert est.flops == N * N * (20 + 1)                # op-table weights: exp 20, mul 1


def test_a_transcendental_of_another_is_chained():
    """exp(-exp(x)): the outer exp waits on the inner one's latency; it costs the device's
    chained rate (here half its rate), the inner one the plain rate. Sums of independent
    exps chain nothing, and a device with no chained rate prices both alike."""
    chained = TOY.replace(functions={"transcendental_chain": 0.5e8})
    est = estimate_group(_only_group(lambda x: torch.exp(-torch.exp(x)), _x(N, N)), chained)
    assert est.compute_s == pytest.approx(N * N / 1e8 + 2 * N * N / 1e8 + N * N / 1e9)
    est = estimate_group(_only_group(lambda x: torch.exp(x) + torch.exp(-x), _x(N, N)), chained)
    assert est.compute_s == pytest.approx(2 * N * N / 1e8 + 2 * N * N / 1e9)
    est = estimate_group(_only_group(lambda x: torch.exp(-torch.exp(x)), _x(N, N)), TOY)
    assert est.compute_s == pytest.approx(2 * N * N / 1e8 + N * N / 1e9)



def test_values_the_inner_loop_does_not_change_count_once_per_row():
    """exp of a per-row value (x broadcast along the rows' inner dim): the printer computes
    it once per row, before the inner loop (transforms/hoist.py); the schedule says so
    and the estimate counts N exps, not N * N; the multiply by y runs per element."""
    g = _only_group(lambda x, y: torch.exp(x) * y, _x(N, 1), _x(N, N))
    est = estimate_group(g, TOY)
    assert est.compute_s == pytest.approx(N / 1e8 + N * N / 1e9)
    k = lower_group(g, g.name)
    sched = choose(k, "cpp", 1)
    exp = next(s.out for s in k.body if s.op == "exp")
    assert exp in sched.per_row
    src = cpp.kernel_source(k, 1)       # over all rows before the loop (a row table)
    assert src.index("brrr_expf(") < src.index("for (int64_t w = 0;")


def test_column_walks_count_row_values_once_per_tile_row():
    """A column sum of exp(x) * y with x broadcast along the kept columns: the printer
    computes the exp once per streamed row of a column tile (transforms/hoist.py
    column_once, which the schedule records); the estimate counts R * C exps for R
    reduced rows and C rows of tiles, not one per element."""
    R, C, W = 16, 8, 256          # rows of 256: tiles of columns of one row each
    g = _only_group(lambda x, y: (torch.exp(x) * y).sum(0), _x(R, C, 1), _x(R, C, W))
    k = lower_group(g, g.name)
    sched = choose(k, "cpp", 1)
    exp = next(s.out for s in k.body if s.op == "exp")
    assert sched.kind == "columns" and exp in sched.per_row
    est = estimate_group(g, TOY)
    assert est.compute_s < 2 * R * C / 1e8 + 4 * R * C * W / 1e9      # not R * C * W exps
    src = cpp.kernel_source(k, 1)
    row_loop = src.split("for (int64_t rr = cb; rr < ce; ++rr) {", 1)[1]
    assert "brrr_expf(" in row_loop.split("#pragma omp simd", 1)[0]


def test_values_of_the_inner_index_alone_count_once_per_call():
    """exp of a per-column value (x broadcast along the outer dim): the printer computes
    it once per call into a table over the inner extent (transforms/tables.py); the
    schedule says so and the estimate counts N exps, not N * N."""
    g = _only_group(lambda x, y: torch.exp(x) * y, _x(N), _x(N, N))
    est = estimate_group(g, TOY)
    assert est.compute_s == pytest.approx(N / 1e8 + N * N / 1e9)
    k = lower_group(g, g.name)
    sched = choose(k, "cpp", 1)
    exp = next(s.out for s in k.body if s.op == "exp")
    assert sched.tables == (exp,) and exp in sched.per_call
    src = cpp.kernel_source(k, 1)
    assert f"tab_{exp}[" in src and src.index("brrr_expf(") < src.index("for (int64_t w = 0;")


def test_broadcast_operand_counts_its_own_size():
    g = _only_group(lambda x, b: x + b, _x(N, N), _x(N))
    est = estimate_group(g, TOY)
    assert est.bytes == 4 * N * N + 4 * N + 4 * N * N


def test_strided_read_moves_a_share_of_a_line_per_element():
    est = estimate_group(_only_group(lambda x: x[:, ::2] + 1, _x(N, 2 * N)), TOY)
    assert est.bytes == 8 * N * N + 4 * N * N         # every other float: half a line used


def test_tiled_transpose_reads_its_operand_once():
    """x + x.t() runs tiled (schedule/cpp.py): x.t()'s blocks are staged, each line read
    whole, and x and x.t() touch the same elements."""
    group = _only_group(lambda x: x + x.t(), _x(N, N))
    assert choose(lower_group(group, "k0", use_scratch=True), "cpp", 1).kind == "tiled"
    est = estimate_group(group, TOY)
    assert est.bytes == 4 * N * N + 4 * N * N


def test_block_transposes_cost_the_devices_transpose_cost():
    """x.t()'s bytes in x + x.t() go through block transposes: at a transpose cost of 3
    they cost 3x a dense byte (x 4 N^2, out 4 N^2, x.t() the same 4 N^2 elements as x).
    An image's 3 channels going channels-last (a short inner dim: whole rows walked, no
    blocks) move at the dense rate."""
    group = _only_group(lambda x: x + x.t(), _x(N, N))
    slow = TOY.replace(transpose_cost=3.0)
    assert estimate_group(group, slow).memory_s == \
        pytest.approx(estimate_group(group, TOY).memory_s * (8 + 2 * 4) / 8)
    image = _only_group(lambda x: x.permute(0, 2, 3, 1).contiguous(), _x(2, 3, 64, 64))
    sched = choose(lower_group(image, "k0", use_scratch=True), "cpp", 1)
    assert sched.kind == "tiled" and not sched.transposes_blocks
    assert estimate_group(image, slow).memory_s == estimate_group(image, TOY).memory_s


def test_untiled_transpose_reads_a_share_of_a_line_per_element():
    """An integer operand transposed over a dim shorter than a transpose block runs
    pointwise (schedule/cpp.py _short): each element read takes 8 ints of its line."""
    x = torch.randint(0, 9, (N, 8), dtype=torch.int32)
    group = _only_group(lambda x: x.t().contiguous() + 1, x)
    assert choose(lower_group(group, "k0", use_scratch=True), "cpp", 1).kind == "pointwise"
    assert estimate_group(group, TOY).bytes == 32 * 8 * N + 4 * 8 * N


def test_float64_uses_its_rate_and_size():
    est = estimate_group(_only_group(lambda x: x * 2, _x(N, N, dtype=torch.float64)), TOY)
    assert est.compute_s == pytest.approx(N * N / 0.5e9)
    assert est.memory_s == pytest.approx(16 * N * N / 1e9)


def test_float64_functions_at_their_measured_rates():
    """libm's double functions are slower than float32's by more than the flop rates say:
    a function measured in float64 costs its own rate there; one that was not, the mean
    slowdown of those that were; a device that measured none, the flop rates' 2x."""
    x64 = _x(N, N, dtype=torch.float64)
    measured = TOY.replace(functions={"exp": 1e8, "exp.float64": 0.25e8,
                                      "tanh": 1e8, "tanh.float64": 0.1e8})
    est = estimate_group(_only_group(lambda x: x.exp() * 3, x64), measured)
    assert est.compute_s == pytest.approx(N * N / 0.25e8 + N * N / 0.5e9)
    est = estimate_group(_only_group(lambda x: x.sin() * 3, x64), measured)
    slower = (4 * 10) ** 0.5                   # geometric mean of exp's 4x and tanh's 10x
    assert est.compute_s == pytest.approx(N * N / 1e8 * slower + N * N / 0.5e9)
    est = estimate_group(_only_group(lambda x: x.exp() * 3, x64), TOY)
    assert est.compute_s == pytest.approx(N * N / 1e8 * 2 + N * N / 0.5e9)


def test_tiny_kernel_is_overhead_bound():
    est = estimate_group(_only_group(lambda x: x * 2, _x(10)), TOY)
    assert est.bound == "overhead" and est.total_s == pytest.approx(1e-6 + 80 / 1e9)


def test_no_overlap_adds_compute_and_memory():
    g = _only_group(lambda x: x * 2 + 1, _x(N, N))
    est = estimate_group(g, TOY.replace(overlap=0.0))
    assert est.total_s == pytest.approx(2e-3 + 8e-3 + 1e-6)


def test_cache_resident_kernel_runs_at_cache_bandwidth():
    g = _only_group(lambda x: x * 2 + 1, _x(N, N))
    est = estimate_group(g, TOY.replace(llc_bytes=64 << 20))
    assert est.memory_s == pytest.approx(8e-3 / 10)
    assert hit_fraction(8e6, 64 << 20) == 1.0
    assert hit_fraction(1e12, 64 << 20) == 0.0
    assert 0 < hit_fraction(100 << 20, 64 << 20) < 1


def test_data_the_l2s_hold_moves_at_their_bandwidth():
    """Up to half the threads' L2s a kernel's bytes come from them, past twice them from
    the LLC, in between a share of each; rows re-read in L2 come from it too. Without an
    L2 figure (0) the cache bandwidth serves all."""
    l2 = TOY.replace(llc_bytes=64 << 20, l2_bandwidth=4e10)
    small = _only_group(lambda x: x * 2 + 1, _x(256, 256))        # 512 KB moved
    assert estimate_group(small, l2).memory_s == pytest.approx(8 * 256 * 256 / 4e10)
    assert estimate_group(small, TOY.replace(llc_bytes=64 << 20)).memory_s == \
        pytest.approx(8 * 256 * 256 / 1e10)
    big = _only_group(lambda x: x * 2 + 1, _x(N, N))                # 8 MB: past the L2
    assert estimate_group(big, l2).memory_s == pytest.approx(8e-3 / 10)
    middle = _only_group(lambda x: x * 2 + 1, _x(300, 400))       # 0.96 MB: some of each
    assert 8 * 300 * 400 / 4e10 < estimate_group(middle, l2).memory_s < 8 * 300 * 400 / 1e10
    rows = estimate_group(_only_group(lambda x: torch.softmax(x, -1), _x(N, N)), l2)
    assert rows.memory_s == pytest.approx(8 * N * N / 1e10 + 4 * N * N / 4e10)


def test_small_kernel_runs_on_one_thread():
    """The schedule says whether a kernel forks: a small one runs on one thread, at one
    thread's rates and without the fork's overhead."""
    two = TOY.replace(threads=2, flops={"float32": 2e9}, transcendentals=2e8,
                      fork_overhead_s=5e-6)
    big = estimate_group(_only_group(lambda x: x.exp(), _x(N, N)), two)
    assert big.compute_s == pytest.approx(N * N / 2e8)
    assert big.overhead_s == pytest.approx(1e-6 + 5e-6)
    small = estimate_group(_only_group(lambda x: x.exp(), _x(64, 64)), two)
    assert small.compute_s == pytest.approx(64 * 64 / 1e8)
    assert small.overhead_s == pytest.approx(1e-6)


def test_softmax_rereads_rows_from_cache():
    g = _only_group(lambda x: torch.softmax(x, -1), _x(N, N))
    est = estimate_group(g, TOY)
    # x read once from memory and once more from cache (a row is 4 kB; the third phase
    # re-reads exp from the row's scratch), output written
    assert est.memory_s == pytest.approx(8 * N * N / 1e9 + 1 * 4 * N * N / 1e10)


def test_h200_is_h100_with_faster_memory():
    g = _only_group(lambda x: x * 2 + 1, _x(8192, 8192))      # 512 MB: 10x the L2
    h100, h200 = estimate_group(g, PRESETS["h100"]), estimate_group(g, PRESETS["h200"])
    assert h100.compute_s == h200.compute_s
    assert h100.memory_s / h200.memory_s == pytest.approx(4.8 / 3.35)
    assert h100.bound == h200.bound == "memory"


def test_missing_information_raises():
    with pytest.raises(CostModelError, match="frobnicate"):
        op_cost("frobnicate")
    with pytest.raises(CostModelError, match="element size"):
        itemsize(None)
    with pytest.raises(CostModelError, match="hint"):
        as_int(sympy.Symbol("s0"))
    stats = KernelStats(points=10, rows=10, flops={"float16": 10.0})
    with pytest.raises(CostModelError, match="float16"):
        predict(stats, TOY)
    with pytest.raises(CostModelError, match="transcendental"):
        predict(stats, TOY.replace(transcendentals=0.0))


def test_unknown_kernel_ir_op_raises():
    i0 = loop_symbol(0)
    body = [Stmt("v0", torch.float32, "load", buffer="in0", index=i0),
            Stmt("v1", torch.float32, "frobnicate", ("v0",)),
            Stmt(None, torch.float32, "store", ("v1",), "out0", i0)]
    k = Kernel("k", [], [i0], [sympy.Integer(8)],
               [Buffer("in0", torch.float32, False, "x"), Buffer("out0", torch.float32, True, "y")],
               [Phase(False, body)])
    with pytest.raises(CostModelError, match="frobnicate"):
        kernel_stats(k, choose(k, "cpp", 1))
