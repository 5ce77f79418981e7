"""On a machine whose calibration measured it paying (DeviceSpec.stream_prefetch),
streaming pointwise kernels without transcendentals prefetch their input streams, masks
included, into L2 ahead of the loop (schedule/stream.py `ahead_loads`,
codegen/cpp_stream.py); elsewhere they leave it to the hardware: the text, the device's
word reaching the printed kernel, and values against eager at a streamed size with tails."""
import functools

import pytest
import torch
from torch.testing import FileCheck

from brrr_compiler.backend import brrr_backend
from brrr_compiler.codegen.cpp_prefetch import LOCALITY
from brrr_compiler.codegen.cpp_stream import AHEAD
from brrr_compiler.cost import generic_cpu
from tests.helpers import check_against_eager, one_kernel_source

BIG = (4096, 2048)         # 32 MB of float32: its output streams


_source = functools.partial(one_kernel_source, prefetch=True)
PREFETCHING = {"device": generic_cpu().replace(stream_prefetch=True)}


def _compiled(fn, args, options):
    """(fn's result through brrr with `options`, the C++ source of its graph)."""
    torch._dynamo.reset()
    sink: list = []
    out = torch.compile(fn, backend=functools.partial(brrr_backend, options=options,
                                                      _sink=sink))(*args)
    return out, sink[0].source


def test_without_the_devices_word_streams_are_left_to_the_hardware():
    src = one_kernel_source(lambda x, y, m: torch.where(m, x, y), torch.randn(BIG),
                            torch.randn(BIG), torch.rand(BIG) < 0.5)
    assert "brrr_stream(" in src and not _prefetched(src), src


def _prefetched(src: str) -> list[str]:
    return [ln.split("__builtin_prefetch(&")[1].split("[")[0] for ln in src.splitlines()
            if "__builtin_prefetch(" in ln]


def test_a_masked_kernel_prefetches_its_float_streams_and_its_mask_into_l2():
    src = _source(lambda x, y, m: torch.where(m, x, y), torch.randn(BIG), torch.randn(BIG),
                  torch.rand(BIG) < 0.5)
    FileCheck().check(f"for (int64_t pf = c0 + {AHEAD}; pf < c1 + {AHEAD}; pf += 16) "
                      "__builtin_prefetch(&").check("#pragma omp simd").run(src)
    assert sorted(_prefetched(src)) == ["in0", "in1", "in2"], src   # the mask is in0
    assert f"pf += 64) __builtin_prefetch(&in0[pf], 0, {LOCALITY});" in src, src   # a line of bytes


def test_one_stream_is_prefetched_a_bias_is_not():
    src = _source(lambda x, b: torch.relu(x + b), torch.randn(BIG), torch.randn(BIG[1]))
    assert _prefetched(src) == ["in0"], src


def test_streams_are_prefetched_but_not_around_transcendentals_many_streams_or_small_outputs():
    assert sorted(_prefetched(_source(lambda x, y: x + y, torch.randn(BIG),
                                      torch.randn(BIG)))) == ["in0", "in1"]
    assert not _prefetched(_source(lambda x, y: torch.exp(x) + y, torch.randn(BIG),
                                   torch.randn(BIG)))
    four = [torch.randn(BIG) for _ in range(4)]         # more than MAX_AHEAD_STREAMS
    assert not _prefetched(_source(lambda a, b, c, d: a * b + c * d, *four))
    small = _source(lambda x, m: x.masked_fill(m, 0.0), torch.randn(64, 2048),
                    torch.rand(64, 2048) < 0.5)
    assert "brrr_stream" not in small and not _prefetched(small)


@pytest.mark.parametrize("prefetch", [True, False])
def test_the_devices_word_reaches_the_compiled_kernel(prefetch):
    """options["device"] (here a spec; a calibration's device.json alike) decides."""
    x, y = torch.randn(BIG), torch.randn(BIG)
    out, src = _compiled(lambda x, y: x * y - 1.0, (x, y),
                         {"device": generic_cpu().replace(stream_prefetch=prefetch)})
    torch.testing.assert_close(out, x * y - 1.0)
    assert ("__builtin_prefetch(&in0[pf]" in src) == prefetch, src


def test_prefetched_kernels_match_eager_with_tails():
    """Odd sizes: the last chunk's prefetches run past the end of the inputs (a prefetch
    does not fault) and its values are still eager's."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4099, 2049, generator=g)
    m = torch.rand(4099, 2049, generator=g) < 0.3
    for fn, args in ((lambda x, m: x.masked_fill(m, 0.0) * 2.0, (x, m)),
                     (lambda x: x * 1.5 - 2.0, (x,))):
        assert "__builtin_prefetch(&in0[pf]" in _compiled(fn, args, PREFETCHING)[1]
        check_against_eager(fn, *args, grad=False, options=PREFETCHING)
