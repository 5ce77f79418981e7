"""The flags brrr compiles kernels with: gcc's own are dropped for a compiler that rejects
them, the rest kept."""
import os

from tests.runtime.test_build import toolchain  # noqa: F401  (the fixture)


def test_gcc_only_flags_are_dropped_for_a_compiler_that_rejects_them(toolchain, monkeypatch):
    """-fno-tree-sink (toolchain.py's note) is gcc's: a compiler that rejects it keeps
    -march=native and every other flag; gcc gets it."""
    from brrr_compiler.runtime import toolchain as tc_module
    real = tc_module._compiles

    def compiles(cxx, flags, libs, source, tmp, stem):
        if any(f in tc_module.GCC_FLAGS for f in flags):
            return None
        return real(cxx, flags, libs, source, tmp, stem)

    if "g++" in os.path.basename(toolchain.cxx):
        assert set(tc_module.GCC_FLAGS) <= set(toolchain.flags)
    monkeypatch.setattr(tc_module, "_compiles", compiles)
    other = tc_module._probe(toolchain.cxx)
    assert not set(tc_module.GCC_FLAGS) & set(other.flags)
    assert [f for f in toolchain.flags if f not in tc_module.GCC_FLAGS] == list(other.flags)
