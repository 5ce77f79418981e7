"""The cost policy's counter keeps counts by a group's structure as well as by its nodes
(lowered_count.py's note): a repeat of a counted group is not lowered again, and every
count it hands out equals the count of the group lowered afresh; a group that differs in
shape, strides, dtype, a constant or how its nodes are wired is lowered anew."""
import pytest
import torch
import torch.nn.functional as F

from brrr_compiler.cost import CostModelError, CostPolicy, generic_cpu
from brrr_compiler.lowered_count import LoweredCount
from tests.helpers import check_against_eager, plan_of

CPU2 = generic_cpu(threads=2)


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(3)).to(dtype)


class Checked(LoweredCount):
    """A counter that records how many groups it lowers and, at each ask, what a fresh
    counter (nothing cached) says of the same group."""

    def __init__(self):
        super().__init__("cpp", 2)
        self.lowered, self.pairs = 0, []

    def __call__(self, members, stored):
        cached = _outcome(super().__call__, members, stored)
        self.pairs.append((cached, _outcome(LoweredCount("cpp", 2), members, stored)))
        return super().__call__(members, stored)

    def _lowered(self, group):
        self.lowered += 1
        return super()._lowered(group)


def _outcome(count, members, stored) -> tuple:
    try:
        return ("stats", count(members, stored))
    except CostModelError as err:
        return ("error", type(err).__name__)


def blocks(x, w, m):
    """Three identical blocks, norm and GELU between matmuls: the same groups, on other
    nodes, three times."""
    for _ in range(3):
        x = F.gelu(F.layer_norm(x, (x.shape[-1],), w)) * torch.sigmoid(x)
        x = x @ m
    return x


def test_repeated_blocks_are_lowered_once_and_counted_as_if_lowered():
    count = Checked()
    plan_of(blocks, _x(64, 128), _x(128), _x(128, 128), policy=CostPolicy(CPU2, count))
    asked = len(count._counts)
    assert count.pairs and all(cached == fresh for cached, fresh in count.pairs)
    # the first block's groups are lowered; the other two blocks' repeat them
    assert 0 < count.lowered < asked / 2, (count.lowered, asked)
    check_against_eager(blocks, _x(64, 128), _x(128), _x(128, 128),
                        options={"fusion": "cost"})


def scaled(x):
    return (x * 2 + 1).exp().sum(-1)


def scaled_float(x):
    return (x * 2.0 + 1).exp().sum(-1)


def difference(x, y):
    return (x - y).abs().sum(-1)


def swapped(x, y):
    return (y - x).abs().sum(-1)


VARIANTS = {
    "dtype": (scaled, (_x(64, 128),), scaled, (_x(64, 128, dtype=torch.float64),)),
    "shape": (scaled, (_x(64, 128),), scaled, (_x(64, 256),)),
    "strides": (scaled, (_x(64, 128),), scaled, (_x(128, 64).t(),)),
    "constant": (scaled, (_x(64, 128),), scaled_float, (_x(64, 128),)),
    "wiring": (difference, (_x(64, 128), _x(64, 1)), swapped, (_x(64, 128), _x(64, 1))),
}


@pytest.mark.parametrize("what", list(VARIANTS))
def test_another_graph_that_differs_is_lowered_anew(what):
    first, first_args, second, second_args = VARIANTS[what]
    count = Checked()
    plan_of(first, *first_args, policy=CostPolicy(CPU2, count))
    before = count.lowered
    count.pairs.clear()
    plan_of(second, *second_args, policy=CostPolicy(CPU2, count))
    assert count.pairs and all(cached == fresh for cached, fresh in count.pairs)
    assert count.lowered > before, f"a group differing in {what} reused a count"


def test_the_same_graph_again_reuses_every_count():
    count = Checked()
    plan_of(scaled, _x(64, 128), policy=CostPolicy(CPU2, count))
    before = count.lowered
    plan_of(scaled, _x(64, 128), policy=CostPolicy(CPU2, count))
    assert before > 0 and count.lowered == before
    assert all(cached == fresh for cached, fresh in count.pairs)
