"""The two counters agree: KernelStats from a group's FX nodes (what the partitioner asks
before lowering) equal KernelStats from the kernel IR the group lowers to."""
import pytest
import torch
import torch.nn.functional as F

from brrr_compiler.cost import group_stats, kernel_stats
from brrr_compiler.lower.group import lower_group
from brrr_compiler.schedule import choose
from tests.helpers import plan_of


def _r(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)


CASES = {
    "chain": (lambda x: ((x * 2 + 1).exp() - x).tanh(), (_r(64, 32),)),
    "bias_gelu": (lambda x, b: F.gelu(x + b), (_r(64, 32), _r(32))),
    "silu_mul": (lambda a, b: F.silu(a) * b, (_r(64, 32), _r(64, 32))),
    "softmax": (lambda x: torch.softmax(x, -1), (_r(64, 32),)),
    "log_softmax_f64": (lambda x: torch.log_softmax(x.double(), -1), (_r(64, 32),)),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (32,), w, b), (_r(64, 32), _r(32), _r(32))),
    "rms_norm": (lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), (_r(64, 32),)),
    "column_sum": (lambda x: (x * 2).sum(0), (_r(64, 32),)),
    "slices": (lambda x: x[:, :16] * 2 + x[:, 16:].exp(), (_r(64, 32),)),
    "transpose": (lambda x: x + x.t(), (_r(32, 32),)),
    "broadcast_producer": (lambda v, y: v.sin().exp() * y, (_r(32), _r(64, 32))),
    "half": (lambda x: (x * 2).sigmoid(), (_r(64, 32, dtype=torch.float16),)),
    "permute": (lambda x, y: x.permute(0, 2, 1) * 2 + y, (_r(4, 16, 8), _r(4, 8, 16))),
    "every_other_column": (lambda x: x[:, ::2].exp(), (_r(64, 32),)),
    "two_layouts_out": (lambda x: (x.t() * 2, x * 3), (_r(32, 32),)),
    "amax_of_sin": (lambda x: x.sin().amax(-1), (_r(64, 32),)),          # scalar loop
    "argmax_of_exp": (lambda x: x.exp().argmax(-1), (_r(64, 32),)),
    "column_amax_of_sin": (lambda x: x.sin().amax(0), (_r(64, 32),)),    # vectorized tiles
    "softmax_dim0": (lambda x: torch.softmax(x, 0), (_r(64, 32),)),     # columns: no scratch
    "softmax_of_erf": (lambda x: torch.softmax(x.erf() * 3, -1), (_r(64, 32),)),
    # folds across rows: a loss's full sum after a row sum; column folds and what a
    # column computes from them
    "layer_norm_loss": (lambda x, g: (F.layer_norm(x, (32,)) * g).sum(), (_r(64, 32), _r(64, 32))),
    "layer_norm_mean_loss": (lambda x: F.layer_norm(x, (32,)).exp().mean(), (_r(64, 32),)),
    "row_and_column_sums": (lambda x, y: ((x * y).softmax(-1), (x * y).sum(0),
                                          (x * 2).mean(0, keepdim=True) / 3), (_r(64, 32), _r(64, 32))),
    # an indirect load: the index is data, the footprint the input's whole extent
    "gather": (lambda x, i: torch.gather(x, 1, i) * 2,
               (_r(64, 32), torch.randint(0, 32, (64, 4), generator=torch.Generator().manual_seed(0)))),
    "cross_entropy": (lambda x, t: F.cross_entropy(x, t),
                      (_r(64, 32), torch.randint(0, 32, (64,), generator=torch.Generator().manual_seed(0)))),
    "embedding": (lambda i, w, p: F.embedding(i, w) * 2 + p,
                  (torch.randint(0, 100, (4, 16)), _r(100, 32), _r(16, 32))),
    "masked_softmax": (lambda s, m: torch.where(m, s, float("-inf")).softmax(-1),
                       (_r(4, 32, 32), torch.ones(32, 32, dtype=torch.bool).tril())),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_group_and_kernel_ir_agree(name):
    fn, args = CASES[name]
    plan = plan_of(fn, *args)
    assert plan.groups, str(plan)
    for g in plan.groups:
        for scratch in (True, False):          # the C++ target keeps rows, Triton does not
            k = lower_group(g, g.name, use_scratch=scratch)
            from_ir = kernel_stats(k, choose(k, "cpp" if scratch else "triton", 2))
            from_fx = group_stats(g.nodes, g.outputs, g.inputs, g.domain, g.reduced_dims,
                                  scratch=scratch, across=g.across, columns=g.columns)
            assert from_fx == from_ir, f"{g.name} {scratch=}:\n  FX {from_fx}\n  IR {from_ir}"
            assert from_ir.bytes > 0 and from_ir.total_flops > 0


def test_softmax_rereads_its_row_twice():
    plan = plan_of(lambda x: torch.softmax(x, -1), _r(64, 32))
    (g,) = plan.groups
    k = lower_group(g, g.name, use_scratch=True)
    stats = kernel_stats(k, choose(k, "cpp", 2))
    # amax, then sum(exp(x - max)) keeping exp in the row's scratch, then scratch / sum:
    # two loop phases read x, the third reads the scratch row
    assert stats.bytes_read == 64 * 32 * 4 and stats.bytes_written == 64 * 32 * 4
    assert stats.reread_bytes == 1 * 64 * 32 * 4 and stats.reread_row_bytes == 32 * 4
    # exp is computed once per element
    assert stats.transcendentals == {"float32": 64 * 32}
