"""CI subset of the op coverage sweep: OpInfo samples of representative ops under brrr.

Pointwise unary and binary ops, reductions, norms, softmax, losses and views, in float32
and bfloat16, forward and (for differentiable ops) gradients, each sample compared with
eager by `check_against_eager` (see opinfo_harness.py). Every op here passes all of its
samples under aot_eager, so any failure is brrr's own. The full sweep over op_db is
benchmarks/op_sweep.py (summary in benchmarks/results/op_sweep.md).
"""
import pytest
import torch

pytest.importorskip("expecttest", reason="op_db needs the expecttest package")

from tests.coverage import opinfo_harness as h  # noqa: E402

UNARY = ["abs", "neg", "exp", "expm1", "log", "log1p", "sin", "tanh", "sigmoid", "sqrt",
         "rsqrt", "erf", "floor", "round", "reciprocal", "sign", "isnan", "nan_to_num",
         "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
         "nn.functional.hardtanh", "nn.functional.leaky_relu", "nn.functional.softplus"]
BINARY = ["add", "sub", "mul", "div.no_rounding_mode", "div.floor_rounding",
          "div.trunc_rounding", "maximum", "minimum", "pow", "atan2", "remainder", "fmod",
          "where", "clamp", "eq", "lt", "logical_and", "lerp", "addcmul"]
REDUCTIONS = ["sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "any", "all",
              "var", "std", "logsumexp", "max.reduction_with_dim"]
NORMS_LOSSES = ["softmax", "log_softmax", "nn.functional.layer_norm",
                "nn.functional.group_norm", "nn.functional.batch_norm",
                "nn.functional.rms_norm", "nn.functional.cross_entropy",
                "nn.functional.nll_loss", "nn.functional.mse_loss",
                "nn.functional.smooth_l1_loss", "gather", "nn.functional.embedding"]
VIEWS = ["view", "reshape", "permute", "transpose", "expand", "narrow", "select",
         "squeeze", "unsqueeze", "t", "contiguous", "clone", "to"]
# bfloat16 where low precision changes what a kernel does (op-math in float32, rounding
# on store, float accumulation); views and comparisons only move or test bits
LOW_PRECISION_OPS = ["add", "mul", "div.no_rounding_mode", "exp", "sigmoid", "rsqrt",
                     "nn.functional.gelu", "nn.functional.silu", "where", "pow", "sum",
                     "mean", "amax", "prod", "var", "logsumexp", "softmax", "log_softmax",
                     "nn.functional.layer_norm", "nn.functional.group_norm",
                     "nn.functional.rms_norm", "nn.functional.cross_entropy",
                     "nn.functional.mse_loss", "clone", "to"]
# ops brrr leaves to ATen by design (legality.py says why for each)
UNFUSED: list[str] = []
CASES = [(name, torch.float32) for name in UNARY + BINARY + REDUCTIONS + NORMS_LOSSES + VIEWS] \
    + [(name, torch.bfloat16) for name in LOW_PRECISION_OPS]

# samples per op, spread over its list (scalars, empty, broadcasts, strides, keepdim)
LIMIT = {torch.float32: 3, torch.bfloat16: 2}


@pytest.fixture(scope="module")
def op_table():
    return h.ops_by_key(h.load_op_db())


@pytest.mark.parametrize("name,dtype", CASES, ids=[f"{n}-{str(d)[6:]}" for n, d in CASES])
def test_op_matches_eager(op_table, name, dtype):
    op = op_table[name]
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip(f"{name} does not support {dtype}")
    grad = h.wants_grad(op, dtype)
    results = [(s, h.run_sample(op, s, None, grad))
               for s in h.samples(op, dtype, grad, LIMIT[dtype])]
    ran = [r for _, r in results if r["status"] != h.SKIP]
    failed = [f"{h.describe(s)}: {r['status']}: {r['detail']}" for s, r in results
              if r["status"] in (h.MISMATCH, h.CRASH)]
    failed += [f"{h.describe(s)}: ran through ATen instead: {r['fallback']}"
               for s, r in results if r["fallback"]]
    assert not failed, "\n".join(failed)
    assert ran, "eager rejected every sample: nothing was compared"
    if name not in VIEWS + UNFUSED:
        assert any(r["kernels"] for r in ran), f"brrr made no kernel for any sample of {name}"


def test_undefined_outputs_are_skipped_but_keep_eager_layout(op_table):
    """empty_permuted's values are uninitialized memory (the sweep once called them
    mismatches): the harness skips the value comparison, as torch's own OpInfo tests do,
    and what is defined, shape, dtype and strides, must still be eager's."""
    op = op_table["empty_permuted"]
    for sample in h.samples(op, torch.float32, False, 4):
        assert h.run_sample(op, sample, None, False)["status"] == h.SKIP
        fn, tensors = h.sample_fn(op, sample)
        torch._dynamo.reset()
        got, want = torch.compile(fn, backend="brrr")(*tensors), fn(*tensors)
        torch._dynamo.reset()
        assert (got.shape, got.dtype, got.stride()) == (want.shape, want.dtype, want.stride())
