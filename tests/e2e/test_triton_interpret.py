"""The Triton path end to end on the CPU: options={"target": "triton"} under Triton's
interpreter (TRITON_INTERPRET=1), every result checked against eager.

The interpreter runs each program of the grid as numpy code, so inputs stay tiny. Triton
reads TRITON_INTERPRET when a kernel is decorated (our generated module's import), not
once at `import triton`, so the `interpreter` fixture sets it for this module only; the
generated modules are keyed by the mode, so nothing compiled here leaks into other tests.
Tests that need no Triton (the options' warnings) run without it.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from brrr_compiler import log as brrr_log
from brrr_compiler.backend import brrr_backend
from brrr_compiler.runtime import triton_launch
from tests.e2e import test_pointwise_zoo as zoo
from tests.e2e.test_cat_and_slices import rotary, rotary_inputs
from tests.helpers import check_against_eager

# the interpreter evaluates masked-off lanes too (log(0), 0/0): numpy warns, harmlessly
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")
TRITON = {"target": "triton"}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def interpreter():
    pytest.importorskip("triton")
    pytest.importorskip("numpy")                 # the interpreter's arrays
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    assert triton_launch.interpreting(), "Triton did not pick up TRITON_INTERPRET=1"
    yield
    if old is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = old


def check(fn, *args, **kw):
    """check_against_eager through Triton; every compiled graph must be Triton code."""
    graphs = check_against_eager(fn, *args, options=TRITON, **kw)
    assert graphs and any(g.kernels for g in graphs), "no kernel was generated"
    for g in graphs:
        assert not g.kernels or "@triton.jit" in g.source, g.source[:200]
    return graphs


def _randn(*shape, dtype=torch.float32, grad=True, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype).requires_grad_(grad)


# ---- pointwise chains -------------------------------------------------------------------

@pytest.mark.parametrize("chain", zoo.CHAINS, ids=lambda c: c.name)
def test_pointwise_chain(interpreter, chain):
    check(chain.fn, *zoo.make_inputs(chain))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16],
                         ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("name", ["scalar_arith", "tanh_erf_sigmoid", "rounding", "cast_roundtrip"])
def test_pointwise_dtypes(interpreter, name, dtype):
    chain = zoo.BY_NAME[name]
    check(chain.fn, *zoo.make_inputs(chain, dtype=dtype))


@pytest.mark.parametrize("layout", zoo.LAYOUTS[1:])
def test_broadcast_and_strided_inputs(interpreter, layout):
    chain = zoo.BY_NAME["addcmul_addcdiv"]
    check(chain.fn, *zoo.make_inputs(chain, layout))


def test_transposed_inputs_2d_tile(interpreter):
    graphs = check(lambda x, y: (x * y).exp() + y, _randn(33, 17), _randn(17, 33).t())
    assert "pointwise2d" in graphs[0].source


def test_rotary_cat_keeps_one_masked_block(interpreter):
    """The C++ printer splits cat's innermost loop (transforms/split.py); Triton keeps the one
    block of clamped loads and selects, which its masked lanes handle."""
    graphs = check(rotary, *rotary_inputs((1, 4, 2, 10)), atol=0, rtol=0)
    assert "tl.minimum(" in graphs[0].source and "tl.where(" in graphs[0].source

@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("chain", zoo.INT_CHAINS, ids=lambda c: c.name)
def test_integer_chains(interpreter, chain, dtype):
    check(chain.fn, *zoo.make_inputs(chain, dtype=dtype), grad=False)


@pytest.mark.parametrize("op", list(zoo.SPECIAL_OPS))
def test_nan_inf_negative_zero(interpreter, op):
    vals = torch.tensor(zoo.SPECIAL)
    x = vals.repeat_interleave(len(zoo.SPECIAL)).requires_grad_()
    y = vals.repeat(len(zoo.SPECIAL)).requires_grad_()

    def fn(x, y):
        out = zoo.SPECIAL_OPS[op](x, y)
        unspecified = out.isnan()
        if op in zoo.ZERO_TIE_SIGN_UNSPECIFIED:
            unspecified = unspecified | ((x == 0) & (y == 0))
        return out, torch.signbit(out) & ~unspecified
    check(fn, x, y)


# ---- reductions ------------------------------------------------------------------------

KINDS = {
    "sum": lambda x, d: x.sum(d), "mean": lambda x, d: x.mean(d),
    "prod": lambda x, d: x.prod(d), "amax": lambda x, d: x.amax(d),
    "amin": lambda x, d: x.amin(d), "var": lambda x, d: x.var(d),
}


@pytest.mark.parametrize("dim", [-1, 0, 1], ids=["inner", "outer", "middle"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_reduction_kinds(interpreter, kind, dim):
    check(functools.partial(KINDS[kind], d=dim), _randn(5, 6, 7))


def test_full_reduction_to_a_scalar(interpreter):
    check(lambda x: (x.sum(), x.amax(), x.mean()), _randn(7, 9))


def test_any_all_and_integer_sums(interpreter):
    x = torch.randint(-3, 4, (6, 10), generator=torch.Generator().manual_seed(2))
    check(lambda a: ((a > 0).any(1), (a > 0).all(0), (a > 0).sum(1), a.sum(0), a.amax(1),
                     a.prod(1)), x, grad=False)


def test_max_min_propagate_nan(interpreter):
    x = _randn(5, 12, grad=False)
    x[1, 3] = x[3, 0] = float("nan")
    check(lambda a: (a.amax(1), a.amin(1), a.amax(0), a.amin(0)), x, grad=False)


def test_argmax_argmin_first_index_and_nan(interpreter):
    x = _randn(5, 12, grad=False)
    x[1, 3] = x[1, 7] = float("nan")               # the first NaN wins
    x[2, :] = 1.0                                   # ties: the first index wins
    x[4, 2] = x[4, 9] = 50.0
    check(lambda a: (a.argmax(1), a.argmin(1), a.argmax(0), a.argmin(0), a.argmax()),
          x, grad=False)


def test_looped_reductions_over_long_rows(interpreter):
    x = _randn(3, 5000, grad=False)
    x[1, 4321] = float("nan")
    graphs = check(lambda a: (a.sum(1), a.amax(1), a.argmin(1), F.softmax(a, -1)), x, grad=False)
    assert "for roffset in range(0, rnumel, RBLOCK):" in graphs[0].source


def test_column_reduction(interpreter):
    check(lambda a: (a.sum(0), a.t().amax(1)), _randn(40, 70))


def test_long_column_sum_is_as_accurate_as_eagers(interpreter):
    """64K rows, 16 per chunk: a lane adding all 4096 chunks in float32 erred 3.2x eager's;
    in blocks of RSTEPS chunks (triton_reduce's note) within the fuzzer's 2x."""
    x = torch.rand(65536, 64, generator=torch.Generator().manual_seed(0))
    exact = x.double().sum(0)

    def error(sums):
        return float(((sums.double() - exact).abs() / exact).max())

    torch._dynamo.reset()
    sums = torch.compile(lambda a: a.sum(0), backend="brrr", options=TRITON)(x)
    torch._dynamo.reset()
    assert error(sums) <= 2 * error(x.sum(0))


# ---- norms, softmax, losses: forward and backward ------------------------------------

def test_softmax(interpreter):
    check(lambda x: F.softmax(x, -1), _randn(6, 33))


def test_log_softmax(interpreter):
    check(lambda x: F.log_softmax(x, -1) * 2, _randn(6, 33))


def test_layer_norm(interpreter):
    check(F.layer_norm, _randn(4, 5, 24), [24], _randn(24, seed=1), _randn(24, seed=2))


def test_layer_norm_bfloat16(interpreter):
    x, w, b = (_randn(*shape, dtype=torch.bfloat16, seed=s)
               for s, shape in enumerate([(4, 24), (24,), (24,)]))
    check(lambda x, w, b: F.layer_norm(x, [24], w, b), x, w, b)


def test_cross_entropy(interpreter):
    target = torch.randint(0, 11, (6,), generator=torch.Generator().manual_seed(3))
    check(lambda x, t: F.cross_entropy(x, t), _randn(6, 11), target)


def test_cross_entropy_label_smoothing(interpreter):
    target = torch.randint(0, 11, (6,), generator=torch.Generator().manual_seed(4))
    check(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), _randn(6, 11), target)


def test_small_mlp_trains_like_eager(interpreter):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                                torch.nn.LayerNorm(32), torch.nn.Linear(32, 8))
    check(model, _randn(12, 16))


# ---- runtime behaviour -----------------------------------------------------------------

def test_out_of_bounds_gather_raises_like_eager(interpreter):
    torch._dynamo.reset()
    fn = torch.compile(lambda x, i: torch.gather(x, 1, i) * 2,
                       backend=functools.partial(brrr_backend, options=TRITON))
    x = torch.randn(4, 9)
    good = torch.randint(0, 9, (4, 3))
    torch.testing.assert_close(fn(x, good), torch.gather(x, 1, good) * 2)
    with pytest.raises((IndexError, RuntimeError)):
        fn(x, good + 9)
    torch._dynamo.reset()


def test_bilinear_upsampling_and_negative_indices(interpreter):
    """aten.index's indirect loads (lower/index_rules.py `index`) through Triton."""
    torch._dynamo.reset()
    backend = functools.partial(brrr_backend, options=TRITON)
    up = torch.compile(lambda x: F.interpolate(x, size=(7, 5), mode="bilinear"), backend=backend)
    x = torch.randn(2, 3, 4, 6)
    torch.testing.assert_close(up(x), F.interpolate(x, size=(7, 5), mode="bilinear"))
    pick = torch.compile(lambda x, i: x[:, i] * 2, backend=backend)
    i = torch.tensor([-1, 0, 2])
    torch.testing.assert_close(pick(x, i), x[:, i] * 2)
    torch._dynamo.reset()


def test_dynamic_shapes(interpreter):
    torch._dynamo.reset()
    sink: list = []
    fn = torch.compile(lambda a: (F.softmax(a, -1) * 2, (a * 3).sum(0)), dynamic=True,
                       backend=functools.partial(brrr_backend, options=TRITON, _sink=sink))
    for n, m in [(5, 7), (9, 13)]:
        a = torch.randn(n, m)
        for got, want in zip(fn(a), (F.softmax(a, -1) * 2, (a * 3).sum(0))):
            torch.testing.assert_close(got, want)
    assert "int64 indexing" in sink[0].source             # sizes are kernel arguments
    torch._dynamo.reset()


def test_max_autotune_never_times_interpreted_kernels(interpreter):
    """Under max-autotune the merges the model is unsure of stay the model's choice
    on the Triton target, and each says why it was not measured."""
    def fn(v, y):
        return v.sin().exp() * y
    graphs = check_against_eager(fn, _randn(16), _randn(4, 16), options=dict(
        TRITON, mode="max-autotune", autotune_margin=1e9))
    decisions = [d for g in graphs for d in g.decisions if not d.reason.startswith("illegal")]
    assert decisions and all("not measured: Triton kernels are not measured" in d.reason
                             for d in decisions), "\n".join(map(str, decisions))
    assert all(d.accepted for d in decisions)            # greedy's verdicts stand


def test_target_triton_without_the_interpreter_uses_cpp(monkeypatch):
    monkeypatch.setattr(brrr_log, "_warned", set())     # the warning is once per process
    monkeypatch.setattr(triton_launch, "interpreting", lambda: False)
    with pytest.warns(RuntimeWarning, match="target='triton' runs CPU tensors only"):
        graphs = check_against_eager(lambda x: x.sin() * 2, torch.randn(8), options=TRITON,
                                     grad=False, allow_fallback=True)
    assert 'extern "C"' in graphs[0].source


def test_cudagraphs_on_cpu_warns_and_runs(monkeypatch):
    monkeypatch.setattr(brrr_log, "_warned", set())
    with pytest.warns(RuntimeWarning, match="cudagraphs=True ignored"):
        graphs = check_against_eager(lambda x: x.sin() * 2, torch.randn(8),
                                     options={"cudagraphs": True}, grad=False)
    assert graphs[0].kernels


@pytest.mark.scripts
def test_bench_gpu_runs_end_to_end_under_the_interpreter(interpreter, tmp_path):
    out = tmp_path / "bench.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), "--interpret", "--tiny",
         "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    text = out.read_text()
    assert "copy" in text and "brrr" in text and "softmax" in text and "failed" not in text
