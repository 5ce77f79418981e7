"""brrr_compiler/ti_strides.py against eager's kernels: random layouts (transposed,
step-sliced, expanded, broadcast, size-1 dims with any stride, zero-size), dtypes (mixed
too) and Python numbers as operands, over pointwise ops of the op table."""
import random

import pytest
import torch

from brrr_compiler.eager_strides import operands
from brrr_compiler.ti_strides import output_strides

aten = torch.ops.aten
OPS = [aten.add.Tensor, aten.mul.Scalar, aten.sub.Tensor, aten.div.Tensor_mode, aten.neg.default,
       aten.exp.default, aten.maximum.default, aten.eq.Tensor, aten.lt.Scalar,
       aten.where.self, aten.clamp.Tensor, aten.pow.Tensor_Scalar, aten.logical_and.default]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def _tensor(shape, dtype, rng: random.Random) -> torch.Tensor:
    """A tensor of `shape` laid out at random: permuted, step-sliced, expanded, or dense
    with arbitrary strides in its size-1 dims."""
    kept = [n if rng.random() > 0.3 else 1 for n in shape]
    perm = list(range(len(kept)))
    rng.shuffle(perm)
    base = torch.randn([kept[p] for p in perm] + ([2] if rng.random() < 0.3 else []))
    base = base[..., 0] if base.dim() > len(kept) else base
    t = base.permute([perm.index(i) for i in range(len(kept))])
    if rng.random() < 0.4:
        t = t.expand(shape)
    elif rng.random() < 0.3 and t.numel():
        odd = [s if n > 1 else rng.choice([1, 2, 7]) for n, s in zip(t.shape, t.stride())]
        t = torch.empty_strided(t.shape, odd).copy_(t)
    if dtype is torch.bool:
        return t > 0
    return t.to(dtype) if t.dtype != dtype else t


def _args(op, shape, rng):
    args = []
    for a in op._schema.arguments:
        kind = str(a.type)
        if "Tensor" in kind:
            if "Tensor" in kind and rng.random() < 0.15 and a.name == "other":
                args.append(2.0)
                continue
            boolean = a.name == "condition" or "logical" in str(op)
            dtype = torch.bool if boolean else rng.choice(DTYPES)
            part = shape[rng.randrange(len(shape) + 1):] if rng.random() < 0.2 else shape
            args.append(_tensor(part, dtype, rng))
        elif kind == "number":
            args.append(0.5)
        elif a.name == "rounding_mode":
            args.append("floor")
    return args


@pytest.mark.parametrize("seed", range(4))
def test_output_strides_are_eagers(seed):
    rng = random.Random(seed)
    checked = 0
    for _ in range(300):
        op = rng.choice(OPS)
        shape = [rng.choice([1, 1, 2, 3, 4]) for _ in range(rng.randint(0, 4))]
        args = _args(op, shape, rng)
        try:
            out = op(*args)
        except RuntimeError:            # dtypes eager will not mix: nothing to compare
            continue
        values, promoted = operands(op, tuple(args), {})
        assert output_strides(values, torch.device("cpu"), promoted) == out.stride(), \
            (op, [(a.shape, a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a
                  for a in args])
        checked += 1
    assert checked > 150
