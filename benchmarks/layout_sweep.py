"""Layout sweep: the ops brrr decomposes (capture.py), over inputs laid out as op_db's
samples rarely are, compiled with brrr and checked against eager.

    python benchmarks/layout_sweep.py [--ops gelu,softmax0] [--dtypes float32,bfloat16]

A decomposition is written in ops that follow their inputs' strides, or ends in the
layout of torch's Python reference; eager's kernel may lay its result out otherwise
(TensorIterator's rule, a contiguous copy, the input's suggested memory format). So
every op runs on a transposed, an expanded and a step-sliced input (and, for two-input
ops, with a second, transposed operand), in float32, bfloat16 and float16, with
gradients in float32, through tests/helpers.py:check_against_eager(strict=True,
reference=True): values, dtypes, strides and gradients. It prints each failure and the
count; exit status 1 if any.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import warnings
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def cases() -> dict:
    """name -> fn(x) over a (6, 9) input x."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    w, b, w3 = torch.randn(9, generator=g), torch.randn(9, generator=g), torch.randn(6, generator=g)
    t = torch.randn(9, 6, generator=g).t()          # a transposed second operand
    target = torch.tensor([1, 0, 3, 8, 2, 5])
    other = {"logaddexp": torch.logaddexp, "logaddexp2": torch.logaddexp2,
             "hypot": torch.hypot, "xlogy": lambda x, y: torch.xlogy(x, y.abs() + 0.5),
             "lerp": lambda x, y: torch.lerp(x, y, 0.25),
             "lerp_tensor": lambda x, y: torch.lerp(x, y, y.sigmoid()),
             "addcmul": lambda x, y: torch.addcmul(x, y, y, value=0.5),
             "addcdiv": lambda x, y: torch.addcdiv(x, y, y.abs() + 1, value=0.5),
             "mse_loss": lambda x, y: F.mse_loss(x, y, reduction="none"),
             "huber_loss": lambda x, y: F.huber_loss(x, y, reduction="none"),
             "smooth_l1_loss": lambda x, y: F.smooth_l1_loss(x, y, reduction="none", beta=0.5),
             "masked_fill": lambda x, y: x.masked_fill(y > 0, -1.5),
             "clamp_min": lambda x, y: torch.clamp_min(x, y)}
    unary = {"gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
             "silu": F.silu, "softplus": F.softplus, "hardtanh": F.hardtanh,
             "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish,
             "leaky_relu": F.leaky_relu, "elu": F.elu, "mish": F.mish, "celu": F.celu,
             "selu": F.selu, "relu6": F.relu6, "threshold": lambda x: F.threshold(x, 0.1, -2.0),
             "logit": lambda x: torch.logit(x.sigmoid(), eps=1e-3), "nan_to_num": torch.nan_to_num,
             "square": torch.square, "sgn": torch.sgn, "deg2rad": torch.deg2rad,
             "sinc": torch.sinc, "softshrink": F.softshrink, "hardshrink": F.hardshrink,
             "logsigmoid": F.logsigmoid, "rsub": lambda x: 2.0 - x,
             "softmax0": lambda x: x.softmax(0), "softmax1": lambda x: x.softmax(1),
             "log_softmax0": lambda x: x.log_softmax(0),
             "logsumexp1": lambda x: torch.logsumexp(x, 1),
             "layer_norm": lambda x: F.layer_norm(x, (9,), w.to(x.dtype), b.to(x.dtype)),
             "rms_norm": lambda x: F.rms_norm(x, (9,), w.to(x.dtype)),
             "group_norm": lambda x: F.group_norm(x.unsqueeze(0), 3, w3.to(x.dtype), w3.to(x.dtype)),
             "var_mean0": lambda x: torch.var_mean(x, 0), "std1": lambda x: x.std(1),
             "batch_norm_eval": lambda x: F.batch_norm(
                 x, torch.zeros(9, dtype=x.dtype), torch.ones(9, dtype=x.dtype), w.to(x.dtype),
                 b.to(x.dtype)),
             "batch_norm_train": lambda x: F.batch_norm(x, None, None, w.to(x.dtype),
                                                        b.to(x.dtype), training=True),
             "cross_entropy": lambda x: F.cross_entropy(x, target, reduction="none"),
             "max_dim": lambda x: x.max(1)}
    out = dict(unary)
    out.update({k: (lambda f: lambda x: f(x, t.to(x.dtype)))(f) for k, f in other.items()})
    return out


def layouts(dtype):
    import torch
    g = torch.Generator().manual_seed(1)
    yield "transposed", torch.randn(9, 6, generator=g).to(dtype).t()
    yield "expanded", torch.randn(1, 9, generator=g).to(dtype).expand(6, 9)
    yield "step-sliced", torch.randn(6, 18, generator=g).to(dtype)[:, ::2]


def run(names: list[str], dtypes: list[str]) -> list[tuple]:
    import torch
    from tests.helpers import check_against_eager

    table, failed = cases(), []
    for dt, name in itertools.product(dtypes, names):
        dtype = getattr(torch, dt)
        for (layout, x), grad in itertools.product(layouts(dtype), (False, True)):
            if grad and dtype is not torch.float32:
                continue
            arg = x.detach().requires_grad_() if grad else x
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    check_against_eager(table[name], arg, grad=grad, strict=True,
                                        reference=True, kernels=False)
            except Exception as err:  # noqa: BLE001  (reported, the sweep goes on)
                first = (str(err).strip().splitlines() or [""])[0][:160]
                failed.append((name, dt, layout, grad, f"{type(err).__name__}: {first}"))
            torch._dynamo.reset()
    return failed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default="", help="comma-separated case names (default: all)")
    p.add_argument("--dtypes", default="float32,bfloat16,float16")
    args = p.parse_args(argv)
    names = [n for n in args.ops.split(",") if n] or list(cases())
    unknown = sorted(set(names) - set(cases()))
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; known: {sorted(cases())}")
    failed = run(names, [d for d in args.dtypes.split(",") if d])
    for f in failed:
        print("FAIL", *f)
    print(f"{len(names)} ops x {args.dtypes}: {len(failed)} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
