"""Splitting a graph's kernels over translation units, checked as text."""
import torch
from torch.testing import FileCheck

from brrr_compiler.codegen import cpp
from brrr_compiler.codegen.cpp_units import translation_units
from brrr_compiler.lower.group import lower_group
from tests.helpers import plan_of


def _three_layers(x, y):
    """Three kernels: two with the same code (layer norm + relu), one softmax."""
    a = torch.nn.functional.layer_norm(x, (64,)).relu()
    b = torch.nn.functional.layer_norm(a @ y, (64,)).relu()
    return torch.softmax(b @ y, -1)


def _kernels():
    plan = plan_of(_three_layers, torch.randn(8, 64), torch.randn(64, 64))
    kernels = [lower_group(g, g.name) for g in plan.groups]
    assert len(kernels) == 3, str(plan)
    return kernels


def test_small_graph_stays_one_unit():
    kernels = _kernels()
    (unit,) = translation_units(kernels, 2, None, max_units=2, min_lines=10**6)
    assert unit == (kernels, cpp.translation_unit(kernels, 2))


def test_same_code_shares_a_unit_and_every_unit_is_whole():
    first, second, softmax = kernels = _kernels()
    units = translation_units(kernels, 2, None, max_units=4, min_lines=1)
    assert len(units) == 2                       # two distinct codes, so two units at most
    by_kernel = {k.name: i for i, (members, _) in enumerate(units) for k in members}
    assert by_kernel[first.name] == by_kernel[second.name] != by_kernel[softmax.name]
    for members, source in units:
        assert source == cpp.translation_unit(members, 2)
        FileCheck().check("brrr_error_flag").check('extern "C"').check(' void k').run(source)
    alias_unit = units[by_kernel[first.name]][1]
    FileCheck().check(f"void {first.name}(").check(
        f'__attribute__((alias("{first.name}")));').run(alias_unit)


def test_printed_sources_are_used():
    kernels = _kernels()
    printed = {k.name: cpp.kernel_source(k, 2).replace("fuses", "FUSES") for k in kernels}
    units = translation_units(kernels, 2, printed, max_units=2, min_lines=1)
    assert all(s.count("FUSES") == len(members) for members, s in units)
