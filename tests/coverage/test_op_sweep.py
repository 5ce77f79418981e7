"""The op sweep (benchmarks/op_sweep.py) on a tiny slice by default: a few ops in all
four float dtypes, as the function, in place and out=, forward and with gradients, with
strides and mutated arguments compared; the whole of op_db behind the slow marker."""
import pytest
import torch

pytest.importorskip("expecttest", reason="op_db needs the expecttest package")

from benchmarks import op_sweep, op_sweep_report as report  # noqa: E402
from tests.coverage import opinfo_harness as h  # noqa: E402

SLICE = ["add", "sum"]
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


@pytest.fixture(scope="module")
def op_table():
    return h.ops_by_key(h.load_op_db())


@pytest.mark.parametrize("name", SLICE)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_op_variants_match_eager(op_table, name, dtype):
    op, failed, ran = op_table[name], [], 0
    grad = dtype in (torch.float32, torch.float64) and h.wants_grad(op, dtype)
    for variant in h.VARIANTS:
        if not h.has_variant(op, variant):
            continue
        g = grad and variant != "out"
        for s in h.samples(op, dtype, g, 1):
            r = h.run_sample(op, s, None, g, variant, strict=True)
            ran += r["status"] != h.SKIP
            if r["status"] in (h.MISMATCH, h.CRASH):
                failed.append(f"{variant} {h.describe(s)}: {r['status']}: {r['detail']}")
    assert not failed, "\n".join(failed)
    assert ran, "eager rejected every sample: nothing was compared"


def test_out_variant_writes_into_its_arguments(op_table):
    """The out= variant passes its out tensors as arguments: the comparison covers them."""
    sample = h.samples(op_table["add"], torch.float32, False, 1)[0]
    fn, tensors = h.sample_fn(op_table["add"], sample, "out")
    out = tensors[-1]
    fn(*tensors)
    assert out.abs().sum() > 0


def test_failures_are_classified():
    mism = {"status": "mismatch", "stage": "output"}
    grad = {"status": "mismatch", "stage": "gradient"}
    ok = {"status": "pass", "stage": ""}
    assert report.classify_failure(mism, ok, None) == "brrr-only"
    assert report.classify_failure(mism, dict(mism), None) == "shared"
    # aot_eager failing only later (its gradient) does not excuse brrr's wrong output
    assert report.classify_failure(mism, grad, None) == "brrr-only"
    assert report.classify_failure(grad, mism, None) == "shared"
    assert report.classify_failure(mism, ok, ok) == "drift"
    # drifted output; with eager's rounding only torch's gradient failure is left
    assert report.classify_failure(mism, dict(grad), dict(grad)) == "drift"
    # ... but a failure eager's rounding leaves at the same stage, or that aot_eager
    # does not share, stays brrr's
    assert report.classify_failure(mism, dict(grad), dict(mism)) == "brrr-only"
    assert report.classify_failure(mism, ok, dict(grad)) == "brrr-only"
    crash = {"status": "crash", "stage": "crash", "detail": "IndexError at x.py:3: tuple"}
    other = {"status": "crash", "stage": "crash", "detail": "RuntimeError: mismatch in length"}
    assert report.classify_failure(crash, dict(crash), None) == "shared"
    assert report.classify_failure(crash, other, None) == "brrr-only"
    assert report.classify_failure(crash, mism, None) == "brrr-only"
    assert report.classify_failure(mism, other, None) == "shared"


@pytest.mark.slow
def test_whole_op_db(tmp_path):
    jsonl = str(tmp_path / "sweep.jsonl")
    op_sweep.main(["--dtypes", "float32,float64,bfloat16,float16", "--grad", "--variants",
                   "op,inplace,out", "--jobs", "2", "--jsonl", jsonl,
                   "--out", str(tmp_path / "op_sweep.md")])
    bad = [r for r in report.load(jsonl) if "done" not in r and report.classify(r) == "brrr-only"]
    assert not bad, "\n".join(f"{r['op']} {r['dtype']} {r['variant']}: {r['brrr']['detail']}"
                              + f" ({report.repro_command(r)})" for r in bad[:50])
