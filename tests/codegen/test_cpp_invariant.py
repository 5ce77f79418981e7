"""Values that depend on the innermost loop variable alone (codegen/cpp_invariant.py): a
channels-last BatchNorm's per-channel factor is computed once per call into a table, not
per element; checked as text (no compiler), and run against eager in
tests/e2e/test_batch_norm_inference.py."""
import functools
import torch
import torch.nn.functional as F
from torch.testing import FileCheck

from tests.helpers import one_kernel_source


_source = functools.partial(one_kernel_source, threads=1, whole=True)


def _bn_relu(x, mean, var, w, b):
    return F.relu(F.batch_norm(x, mean, var, w, b, training=False))


def _params(c):
    return torch.randn(c), torch.rand(c) + 0.5, torch.randn(c), torch.randn(c)


def test_channels_last_batch_norm_computes_its_scale_once_per_channel():
    x = torch.randn(2, 17, 5, 5).contiguous(memory_format=torch.channels_last)
    src = _source(_bn_relu, x, *_params(17))
    table, loops = src.split("for (int64_t w = 0;")
    (FileCheck().check("float tab_v").check("for (int64_t i1 = 0; i1 < 17; ++i1)")
     .check("__builtin_sqrtf(").check("tab_v").run(table))
    assert "sqrtf" not in loops and "(float)1 /" not in loops   # the element loop reads the table
    FileCheck().check("= tab_v").check("brrr_maximum(").run(loops)


def test_contiguous_batch_norm_needs_no_table():
    """NCHW: the channel is an outer loop variable, constant across the inner loop."""
    src = _source(_bn_relu, torch.randn(2, 13, 5, 5), *_params(13))
    assert "tab_" not in src


def test_cheap_per_channel_values_stay_in_the_loop():
    """A plain per-channel load (a bias) is no cheaper read from a table (over channels
    that fill a cache line: fewer are flattened with their rows, transforms/period.py)."""
    x = torch.randn(4, 24, 3, 3).contiguous(memory_format=torch.channels_last)
    src = _source(lambda x, b: (x + b.view(-1, 1, 1)).relu(), x, torch.randn(24))
    assert "tab_" not in src
