"""Find a working C++ compiler and learn, once per process, which flags it accepts.

Note on the probes. Each candidate compiler compiles a tiny OpenMP translation unit into a
shared object with the first flag set it accepts (with `-march=native`, then without it);
`-Wl,--no-undefined` makes a reference nothing defines a link error instead of a failed
load later. Then a TU that declares `expf` as `omp declare simd` is linked with `-lmvec`,
loaded and called: if that works, generated kernels may call glibc's vector math.
Usually everything works, so the first try is both TUs in one, with the first flag set
and `-lmvec`: one compile instead of two (each costs 50-100 ms of a cold compile's CPU,
taken from the tracing it runs beside). Only when that fails do the steps above run.

`-mprefer-vector-width=512` is not added for a whole unit: on an AMD EPYC `-march=native`
already picks 512-bit vectors, and on an Intel Xeon arithmetic kernels gained nothing
from them. Kernels of transcendental functions ask for full width themselves (the
prelude's BRRR_WIDE; benchmarks/results/notes.md, "Full-width vectors for transcendental
kernels").

`-ffast-math` is never used: generated kernels must keep IEEE NaN, inf and -0.0.
`-fno-trapping-math` is: it changes no value, only whether floating-point exception flags
may be raised (nothing here reads them, and eager's own vector kernels do not keep them).
Without it gcc will not vectorize floor, ceil, trunc and rint (their vector forms may set
the inexact flag), and a bfloat16 ceil ran 30x slower than eager's.

`-fno-tree-sink` (gcc's; each set is tried with it first, then without, for compilers
that reject it): gcc's code sinking moves a value that only one side of a select reads
(the libm calls under softplus's threshold, a where's masked branch) into a branch of its
own, and gcc 12 if-converts no call there, so the whole `omp simd` loop stayed scalar
(float64 softplus and atan2 under a where ran at scalar libm's speed). Kept where the
printer put them, the values are computed for every lane and the loop vectorizes.

`-fno-unswitch-loops` (gcc's, tried with `-fno-tree-sink`): gcc copies a loop whose body
tests a loop-invariant value (a where on a scalar's comparison, a NaN test of a scalar
operand) into one copy per outcome, and one of the copies often stayed scalar ("control
flow in loop"). In a float sum over a chunk that is 1024 sequential adds, and results
drifted from eager's (fuzz seeds 5256 and 8091). Unswitched, the test is a select on a
broadcast mask in the one vector loop.

`-fno-code-hoisting` (gcc's): two selects on one mask (a where and a masked_fill of the
same bool) reach gcc as two branches on one condition; gcc joins them into one branch
with a copy of the loop body on each side, hoists code out of the copies, and
if-conversion then merges them with masked loads and stores. gcc 12 got an `omp simd`
reduction wrong in that shape: the NaN flag of an amin came back set with no NaN in the
row (fuzz seed 15026, NaN where eager gives -7.0; right at -O1). Without code hoisting
the shape stays right. `-fno-thread-jumps` avoided it as well, but together with
`-fno-tree-sink` and AVX2 tuning (-march=haswell or znver3, not x86-64-v3) gcc 12 then
miscompiled a concatenation of nine pieces, selects between loads at clamped indices:
one element read another input's buffer (tests/e2e/test_cat_and_slices.py,
test_cat_of_many_inputs_keeps_one_loop; right with either flag alone).

`-mno-red-zone` (x86-64; each set is tried with it first): gcc 12.2 placed a kernel's
20-byte local array (the columns printer's partials over a 5-column tile) in the red
zone at an address 8 mod 16 and zeroed it with an aligned vector store (`lea
-0x20(%rsp),%r14; vmovdqa64 %xmm21,(%r14)` with the caller's stack as the ABI has it):
a segmentation fault in a backward kernel (fuzz seed 178355; right with the flag). A
leaf kernel then moves its stack pointer once, which costs nothing measurable.
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from brrr_compiler.log import warn_once
from brrr_compiler.runtime import cache

BASE_FLAGS = ("-O3", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off",
              "-fwrapv", "-fPIC", "-shared", "-std=c++17", "-w")
NATIVE_FLAG = "-march=native"
NO_UNDEFINED = "-Wl,--no-undefined"
DEFAULT_COMPILERS = ("g++", "c++", "clang++")
GCC_FLAGS = ("-fno-tree-sink", "-fno-unswitch-loops", "-fno-code-hoisting")  # the module note
X86_FLAGS = ("-mno-red-zone",)                                               # the module note
# tried in this order: with -march=native, then without, then without -Wl,--no-undefined;
# each with GCC_FLAGS and X86_FLAGS, then either alone, then neither
_FLAG_SETS = tuple(flags + extra for flags in (
    BASE_FLAGS[:1] + (NATIVE_FLAG,) + BASE_FLAGS[1:] + (NO_UNDEFINED,),
    BASE_FLAGS + (NO_UNDEFINED,),
    BASE_FLAGS) for extra in (GCC_FLAGS + X86_FLAGS, GCC_FLAGS, X86_FLAGS, ()))
PROBE_TIMEOUT_S = 60

_OPENMP_TU = """
extern "C" int brrr_probe(float* x, int n) {
  #pragma omp parallel for simd
  for (int i = 0; i < n; ++i) x[i] = x[i] * 2.0f + 1.0f;
  return n;
}
"""

_MVEC_TU = """
#include <cstdint>
extern "C" {
#pragma omp declare simd notinbranch
float expf(float);
}
extern "C" void brrr_probe_exp(const float* __restrict x, float* __restrict y, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = expf(x[i]);
}
"""


@dataclass(frozen=True)
class Toolchain:
    cxx: str  # absolute path of the compiler
    version: str  # first line of `cxx --version`
    flags: tuple[str, ...]  # everything between the compiler and the source
    libs: tuple[str, ...]  # after the output, e.g. ("-lmvec",)
    cpu: str = ""  # fingerprint of the CPU that -march=native resolved to ("" without it)

    def command(self, source_path: str, output_path: str) -> list[str]:
        return [self.cxx, *self.flags, source_path, "-o", output_path, *self.libs]


_probed: dict[str, Toolchain | None] = {}
_probe_lock = threading.Lock()


def find_toolchain(cxx: str | None = None, cache_dir: str | None = None) -> Toolchain | None:
    """The toolchain for `cxx`, else $CXX, else g++, c++, clang++; None if none works.

    An explicit `cxx` is the only candidate. Each compiler is probed once per process;
    with a `cache_dir`, a working one's probe result is also kept there for later
    processes (keyed by the compiler binary and the CPU).
    """
    env_cxx = None if cxx is not None else os.environ.get("CXX")
    name, toolchain = _first_working(cxx, cache_dir)
    if toolchain is not None and env_cxx and name != env_cxx:
        warn_once(f"brrr-cxx:{env_cxx}", f"brrr: CXX={env_cxx!r} is not a usable C++/OpenMP "
                                         f"compiler; using {toolchain.cxx}")
    return toolchain


def prefetch(cxx: str | None = None, cache_dir: str | None = None) -> threading.Thread:
    """Start find_toolchain's probes in a background thread, so that they run (mostly in
    the compiler's processes) while the caller traces its graph; a later find_toolchain
    waits for them instead of probing again. Warnings are left to find_toolchain."""
    thread = threading.Thread(target=_first_working, args=(cxx, cache_dir),
                              name="brrr-toolchain-probe")
    thread.start()
    return thread


def _first_working(cxx: str | None, cache_dir: str | None) -> tuple[str | None, Toolchain | None]:
    """(name, toolchain) of the first candidate that works: `cxx`, else $CXX, g++, c++, clang++."""
    if cxx is not None:
        return cxx, _probe_cached(cxx, cache_dir)
    env_cxx = os.environ.get("CXX")
    for name in ([env_cxx] if env_cxx else []) + list(DEFAULT_COMPILERS):
        toolchain = _probe_cached(name, cache_dir)
        if toolchain is not None:
            return name, toolchain
    return None, None


def _probe_cached(name: str, cache_dir: str | None = None) -> Toolchain | None:
    path = shutil.which(name)
    if path is None:
        return None
    path = os.path.abspath(path)
    with _probe_lock:
        if path not in _probed:
            _probed[path] = _probe_on_disk(path, cache_dir) if cache_dir else _probe(path)
        return _probed[path]


def _probe_on_disk(cxx: str, cache_dir: str) -> Toolchain | None:
    """_probe(cxx), remembered in `cache_dir` while the binary, the CPU and the flags brrr
    tries stay the same (a record names the compiler brrr runs: it is read only from a
    trusted directory; a brrr whose flags changed must not reuse an older one's record)."""
    cache_dir = cache.usable_dir(cache_dir)
    st = os.stat(cxx)
    key = hashlib.sha256(f"{cxx}\0{st.st_mtime_ns}\0{st.st_size}\0{cpu_fingerprint()}\0"
                         f"{_FLAG_SETS!r}".encode())
    record = os.path.join(cache_dir, f"toolchain-{key.hexdigest()[:16]}.json")
    try:
        with open(record) as f:
            data = json.load(f)
        return Toolchain(data["cxx"], data["version"], tuple(data["flags"]), tuple(data["libs"]),
                         data["cpu"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    toolchain = _probe(cxx)
    if toolchain is not None:
        try:
            os.makedirs(cache_dir, exist_ok=True)
            tmp = f"{record}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump(dataclasses.asdict(toolchain), f)
            os.replace(tmp, record)
        except OSError:
            pass                 # a read-only cache: probing again next time is fine
    return toolchain


def _probe(cxx: str) -> Toolchain | None:
    version = _version(cxx)
    if version is None:
        return None
    with tempfile.TemporaryDirectory(prefix="brrr-probe-") as tmp:
        found = _flags_and_libs(cxx, tmp)
    if found is None:
        return None
    flags, libs = found
    cpu = cpu_fingerprint() if NATIVE_FLAG in flags else ""
    return Toolchain(cxx=cxx, version=version, flags=flags, libs=libs, cpu=cpu)


def _flags_and_libs(cxx: str, tmp: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(flags, libs): the first flag set and libmvec in one compile when both work (the
    module note), else the flag sets one by one and then libmvec; None: nothing works."""
    if _mvec_works(cxx, _FLAG_SETS[0], tmp, _OPENMP_TU + _MVEC_TU, "both"):
        return _FLAG_SETS[0] + ("-DBRRR_LIBMVEC",), ("-lmvec",)
    flags = _first_working_flags(cxx, tmp)
    if flags is None:
        return None
    if _mvec_works(cxx, flags, tmp):
        return flags + ("-DBRRR_LIBMVEC",), ("-lmvec",)
    return flags, ()


def _version(cxx: str) -> str | None:
    try:
        proc = subprocess.run([cxx, "--version"], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[0] if proc.returncode == 0 and lines else None


def _first_working_flags(cxx: str, tmp: str) -> tuple[str, ...] | None:
    for flags in _FLAG_SETS:
        if _compiles(cxx, flags, (), _OPENMP_TU, tmp, "openmp") is not None:
            return flags
    return None


def _mvec_works(cxx: str, flags: tuple[str, ...], tmp: str, source: str = _MVEC_TU,
                stem: str = "mvec") -> bool:
    """Link `source` (the `declare simd` expf TU) with -lmvec, load it and check a few
    values."""
    so = _compiles(cxx, flags, ("-lmvec",), source, tmp, stem)
    if so is None:
        return False
    n = 37  # not a multiple of any vector width: covers the remainder loop too
    xs = [i / 4.0 - 4.0 for i in range(n)]
    x, y = (ctypes.c_float * n)(*xs), (ctypes.c_float * n)()
    try:
        fn = ctypes.CDLL(so).brrr_probe_exp
    except (OSError, AttributeError):
        return False
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
    fn(ctypes.addressof(x), ctypes.addressof(y), n)
    return all(math.isclose(y[i], math.exp(v), rel_tol=1e-5) for i, v in enumerate(xs))


def _compiles(cxx: str, flags: tuple[str, ...], libs: tuple[str, ...], source: str,
              tmp: str, stem: str) -> str | None:
    """Compile `source` in `tmp`; the output path on success, else None."""
    src, out = os.path.join(tmp, stem + ".cpp"), os.path.join(tmp, stem + ".so")
    with open(src, "w") as f:
        f.write(source)
    toolchain = Toolchain(cxx=cxx, version="", flags=flags, libs=libs)
    try:
        proc = subprocess.run(toolchain.command(src, out), capture_output=True,
                              timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return out if proc.returncode == 0 and os.path.exists(out) else None


def cpu_fingerprint() -> str:
    """A short hash of what -march=native reads: the CPU's identity and feature flags.

    It is part of the cache key, so a cache shared between machines never hands one CPU
    code built for another's instruction set.
    """
    wanted = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags",
              "cache size", "Features", "CPU implementer", "CPU part")
    lines = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block is enough
                if line.split(":")[0].strip() in wanted:
                    lines.append(line.strip())
    except OSError:
        import platform
        lines = [platform.machine(), platform.processor()]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
