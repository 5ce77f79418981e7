"""bench_sweep's row log: a sweep killed midway (an enlarged sample out of memory) keeps
its rows and resumes past the case it died in."""
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _row_log():
    sys.path.insert(0, str(BENCH))
    try:
        return __import__("bench_sweep").RowLog
    finally:
        sys.path.remove(str(BENCH))


def test_sweep_row_log_resumes_and_reports_a_case_the_process_died_in(tmp_path):
    RowLog = _row_log()
    path = tmp_path / "sweep.jsonl"
    log = RowLog(str(path), resume=False)
    assert log.begin("add", "float32")
    log.add([{"case": "add", "dtype": "float32", "sample": 0, "desc": "", "status": "ok"}],
            "add", "float32")
    assert log.begin("conv1d", "float32")          # and the process dies here
    resumed = RowLog(str(path), resume=True)
    assert not resumed.begin("add", "float32") and not resumed.begin("conv1d", "float32")
    assert [(r["case"], r["status"][:9]) for r in resumed.rows] == \
        [("add", "ok"), ("conv1d", "no result")]
    assert resumed.begin("mul", "float32")


def test_a_convolution_grows_its_input_batch_only():
    """conv1d's sample with an input batch equal to the weight's output channels grew
    both, and the output with their product (20 GB): convolutions grow the input only."""
    import torch
    from torch.testing._internal.opinfo.core import SampleInput
    sys.path.insert(0, str(BENCH))
    try:
        sweep = __import__("bench_sweep")
    finally:
        sys.path.remove(str(BENCH))
    assert "nn.functional.conv1d" in sweep.INPUT_ONLY
    sample = SampleInput(torch.randn(4, 4, 5), args=(torch.randn(4, 4, 3),))
    both = sweep.enlarge(sample, 4096)
    assert both.input.shape[0] == both.args[0].shape[0] > 4       # pointwise ops need both
    big = sweep.enlarge(sample, 4096, input_only=True)
    assert big.input.shape[0] > 4 and big.args[0].shape == (4, 4, 3)
    y = torch.nn.functional.conv1d(big.input, big.args[0])
    assert y.shape == (big.input.shape[0], 4, 3)
