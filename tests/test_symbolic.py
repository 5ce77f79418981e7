"""Sizes as sympy expressions: static sizes become Integers (made once per size tuple),
symbolic ones their SymInt's expression; neither path hands back another tensor's sizes."""
import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import (DimDynamic, ShapeEnv,
                                                   StatelessSymbolicContext)

from brrr_compiler.symbolic import shape, strides


def test_static_sizes_are_integers_of_each_tensor():
    for t in (torch.empty(4, 5), torch.empty(5, 4), torch.empty(4, 5).t(), torch.empty(())):
        assert shape(t) == tuple(sympy.Integer(s) for s in t.shape)
        assert strides(t) == tuple(sympy.Integer(s) for s in t.stride())
        assert all(isinstance(s, sympy.Integer) for s in shape(t) + strides(t))


def test_symbolic_sizes_are_their_expressions():
    mode = FakeTensorMode(shape_env=ShapeEnv())
    context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
    t = mode.from_tensor(torch.empty(4, 5), symbolic_context=context)
    rows = t.shape[0].node.expr
    assert isinstance(rows, sympy.Symbol)
    assert shape(t) == (rows, sympy.Integer(5))
    assert strides(t) == (sympy.Integer(5), sympy.Integer(1))
    assert shape(torch.empty(4, 5)) == (sympy.Integer(4), sympy.Integer(5))
