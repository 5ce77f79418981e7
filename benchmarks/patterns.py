"""Random graphs of fusable ops, as Python source: the patterns the fuzzer checks against
eager and that timing sweeps measure.

A Pattern is a function `f(x0, x1, ...)` of one statement per line (pointwise ops,
broadcasts, reductions over any dims with or without keepdim, views, transposes, slices,
masks, casts, in-place updates of intermediates and inputs) and the code making its
inputs (any float dtype; bool masks and int64 indices; transposed, step-sliced or
expanded layouts; zero-size and size-1 dims; sizes up to `max_numel`, some requiring
grad). Everything follows from the seed: `generate(seed)` always gives the same Pattern,
and `Pattern.script()` is a runnable copy-paste repro.

Generating: each candidate statement runs on meta tensors first (patterns_ops.py writes
them); one that torch rejects (shapes that do not broadcast, a view of incompatible
strides) is dropped, so shapes and dtypes are torch's own, never re-derived here.
"""
from __future__ import annotations

import dataclasses
import math
import random

import torch
import torch.nn.functional as F

from benchmarks import patterns_ops as ops

FLOAT_DTYPES = ("float32", "float64", "bfloat16", "float16")
LAYOUTS = ("contiguous", "contiguous", "transposed", "sliced", "expanded")
DIM_MENU = (1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 32, 64, 100, 128, 257, 512, 1024)


@dataclasses.dataclass
class Value:
    """A name in the generated function, with its meta tensor and what may be done to it."""
    name: str
    meta: torch.Tensor
    grad: bool = False          # depends on an input that requires grad
    writable: bool = True       # no internal overlap (not expanded), not a grad leaf
    fresh: bool = True          # unread, and its producer saves no output for backward

    @property
    def shape(self) -> tuple:
        return tuple(self.meta.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.meta.dtype


@dataclasses.dataclass(frozen=True)
class InputSpec:
    name: str
    shape: tuple
    dtype: str
    layout: str = "contiguous"
    requires_grad: bool = False
    high: int = 0               # int64 indices: values in [0, high)

    def source(self) -> str:
        """One line making this input from the generator `g`."""
        shape = list(self.shape)
        if self.dtype == "bool":
            return f"{self.name} = torch.rand({tuple(shape)}, generator=g) > 0.5"
        if self.dtype == "int64":
            return f"{self.name} = torch.randint(0, {self.high}, {tuple(shape)}, generator=g)"
        suffix = ""
        if self.layout == "transposed":
            shape[-2], shape[-1] = shape[-1], shape[-2]
            suffix = ".transpose(-1, -2)"
        elif self.layout == "sliced":
            shape[-1] = shape[-1] * 2
            suffix = "[..., 1::2]"
        elif self.layout == "expanded":
            base = [1 if i == _expand_dim(self.shape) else n for i, n in enumerate(shape)]
            suffix, shape = f".expand({tuple(self.shape)})", base
        grad = ".requires_grad_()" if self.requires_grad else ""
        return (f"{self.name} = torch.randn({tuple(shape)}, generator=g)"
                f".to(torch.{self.dtype}){suffix}{grad}")


def _expand_dim(shape: tuple) -> int:
    """The dim an expanded input broadcasts along: its largest."""
    return max(range(len(shape)), key=lambda i: shape[i])


@dataclasses.dataclass
class Pattern:
    seed: int
    attempt: int
    dtype: str
    inputs: list
    lines: list
    outputs: list

    def function_source(self) -> str:
        args = ", ".join(i.name for i in self.inputs)
        body = "\n".join(f"    {line}" for line in self.lines) or "    pass"
        return f"def f({args}):\n{body}\n    return ({', '.join(self.outputs)},)\n"

    def inputs_source(self) -> str:
        body = "\n".join(f"    {i.source()}" for i in self.inputs)
        names = ", ".join(i.name for i in self.inputs)
        return (f"def make_inputs():\n    g = torch.Generator().manual_seed({self.seed})\n"
                f"{body}\n    return [{names}]\n")

    def script(self) -> str:
        """A runnable repro: run from the repository root."""
        grad = any(i.requires_grad for i in self.inputs)
        return (f"# fuzzed graph, seed {self.seed} (attempt {self.attempt}): "
                f"python benchmarks/fuzz.py --seed {self.seed}\n"
                "import torch\nimport torch.nn.functional as F\n\n\n"
                f"{self.inputs_source()}\n\n{self.function_source()}\n\n"
                "# the exact math the comparison judges values outside eager's tolerance by\n"
                f"{self.reference_source().replace('def f(', 'def f_exact(')}\n\n"
                "if __name__ == \"__main__\":  # from the repository root\n"
                "    import sys\n    sys.path.insert(0, \".\")\n"
                "    from tests.helpers import check_against_eager\n"
                f"    check_against_eager(f, *make_inputs(), grad={grad}, strict=True, "
                "reference=f_exact)\n    print(\"matches eager\")\n")

    def reference_source(self) -> str:
        """f with every cast to a lower precision made a float64 one: the exact math. A
        cast that made a copy in f but returns its operand itself in float64 (float16 to
        float32) copies there too, so an in-place update of its result stays off its
        operand, as in f."""
        lines = [_exact(line) for line in self.lines]
        aliased_in_f = _aliasing_lines(self.inputs, self.lines, exact=False)
        aliased_here = _aliasing_lines(self.inputs, lines, exact=True)
        for i in aliased_here - aliased_in_f:
            name, expr = lines[i].split(" = ", 1)
            lines[i] = f"{name} = ({expr}).clone()"
        return _exact(dataclasses.replace(self, lines=lines).function_source())

    def build_reference(self):
        env = {"torch": torch, "F": F}
        exec(self.reference_source(), env)  # noqa: S102
        return env["f"]

    def build(self) -> tuple:
        """(f, inputs): the function and a fresh set of its inputs."""
        env = {"torch": torch, "F": F}
        exec(self.inputs_source() + self.function_source(), env)  # noqa: S102
        return env["f"], env["make_inputs"]()

    @property
    def requires_grad(self) -> bool:
        return any(i.requires_grad for i in self.inputs)


class Builder:
    """The state of one generation: the random stream, inputs, lines and live values."""

    def __init__(self, seed: int, max_numel: int, dtypes=FLOAT_DTYPES, attempt: int = 0,
                 min_numel: int | None = None):
        self.rng = random.Random(f"{seed}:{attempt}")
        self.seed, self.max_numel, self.min_numel = seed, max_numel, min_numel
        self.dtype = self.rng.choice(dtypes)
        self.inputs, self.lines, self.values = [], [], []
        self.grad = self.rng.random() < 0.6

    # -- names and inputs
    def new_input(self, shape, dtype=None, layout=None, high=0) -> Value:
        dtype = dtype or self.dtype
        floating = dtype in FLOAT_DTYPES
        if layout is None:
            layout = self.rng.choice(LAYOUTS) if floating else "contiguous"
        if not shape or (layout == "transposed" and len(shape) < 2) or \
                (layout == "expanded" and (not shape or max(shape) < 2)):
            layout = "contiguous"
        rg = floating and self.grad and self.rng.random() < 0.7
        spec = InputSpec(f"x{len(self.inputs)}", tuple(shape), dtype, layout, rg, high)
        self.inputs.append(spec)
        meta = torch.empty(shape, dtype=getattr(torch, dtype), device="meta")
        if layout != "contiguous":
            meta = _layout_meta(spec)
        value = Value(spec.name, meta, grad=rg, writable=not rg and layout != "expanded",
                      fresh=not rg)
        self.values.append(value)
        return value

    def random_shape(self) -> tuple:
        """ndim 1-4; a numel drawn log-uniformly up to max_numel; now and then a 0 dim.
        With min_numel (timing sweeps), a shape of about that many elements or more."""
        if self.min_numel:
            return self.sized_shape()
        ndim = self.rng.choice((1, 2, 2, 3, 3, 4))
        target = math.exp(self.rng.uniform(0, math.log(self.max_numel)))
        shape, left = [], target
        for i in range(ndim):
            fits = [n for n in DIM_MENU if n <= max(1.0, left ** (1 / (ndim - i)) * 2)]
            n = self.rng.choice(fits)
            shape.append(n)
            left /= n
        if self.rng.random() < 0.04:
            shape[self.rng.randrange(ndim)] = 0
        return tuple(shape)

    def sized_shape(self) -> tuple:
        """A shape whose numel lies between min_numel and max_numel (as near as the dim
        menu allows): enough dims for the size, each near an equal share of it."""
        target = math.exp(self.rng.uniform(math.log(self.min_numel), math.log(self.max_numel)))
        least = max(1, math.ceil(math.log(target) / math.log(DIM_MENU[-1])))
        ndim = self.rng.choice([n for n in (1, 2, 3, 4) if n >= least] or [4])
        shape, left = [], target
        for i in range(ndim):
            share = left ** (1 / (ndim - i))
            fits = [n for n in DIM_MENU if n <= share] or [1]
            n = self.rng.choice(fits[-2:]) if i < ndim - 1 else fits[-1]
            shape.append(n)
            left /= n
        return tuple(shape)

    def emit(self, line: str, result: str | None, fresh=False, writable=True) -> Value | None:
        """Run `line` on the meta tensors; keep it (and its result) if torch accepts it."""
        env = {"torch": torch, "F": F, **{v.name: v.meta for v in self.values}}
        try:
            exec(line, env)  # noqa: S102
        except Exception:  # noqa: BLE001  (torch rejects it: try another statement)
            return None
        self.lines.append(line)
        for v in self.values:
            if v.name in ops.names_in(line):
                v.fresh = False
        if result is None:
            return None
        meta = env[result]
        grad = any(v.grad for v in self.values if v.name in ops.names_in(line))
        value = Value(result, meta, grad=grad, writable=writable, fresh=fresh)
        self.values.append(value)
        return value

    def fresh_name(self) -> str:
        return f"v{len(self.lines)}"


def _exact(src: str) -> str:
    src = src.replace(".float()", ".double()")
    for dt in ("float32", "bfloat16", "float16"):
        src = src.replace(f"torch.{dt}", "torch.float64")
    return src


def _aliasing_lines(inputs: list, lines: list, exact: bool) -> set:
    """Indices of the `name = ...` lines whose result is a value the function already
    had (a cast to the dtype it has), run on meta tensors (float64 ones if `exact`)."""
    env = {"torch": torch, "F": F}
    for spec in inputs:
        floating = spec.dtype in FLOAT_DTYPES
        env[spec.name] = _layout_meta(dataclasses.replace(spec, dtype="float64")
                                      if exact and floating else spec)
    aliasing = set()
    for i, line in enumerate(lines):
        before = {id(v) for v in env.values() if isinstance(v, torch.Tensor)}
        try:
            exec(line, env)  # noqa: S102
        except Exception:  # noqa: BLE001  (float64 rejects it: the reference will too)
            break
        name = line.split(" = ", 1)[0] if " = " in line else None
        if name and name.isidentifier() and id(env[name]) in before:
            aliasing.add(i)
    return aliasing


def _layout_meta(spec: InputSpec) -> torch.Tensor:
    """The meta tensor of an input with its real strides (transposed, sliced)."""
    env = {"torch": torch}
    exec(spec.source().replace("generator=g", "device='meta'")  # noqa: S102
         .replace(".requires_grad_()", ""), env)
    return env[spec.name]


def generate(seed: int, max_numel: int = 1 << 19, n_ops: int | None = None,
             dtypes=FLOAT_DTYPES, attempt: int = 0, min_numel: int | None = None) -> Pattern:
    """The Pattern of `seed`: 2-20 statements (n_ops if given) over up to max_numel
    elements per tensor (its first input at least min_numel, if given). `attempt` draws
    another pattern for the same seed (the fuzzer's next try when eager rejects one)."""
    b = Builder(seed, max_numel, dtypes, attempt, min_numel)
    b.new_input(b.random_shape())
    n = n_ops or b.rng.randint(2, 20)
    tries = 0
    while len(b.lines) < n and tries < 20 * n:
        tries += 1
        ops.step(b)
    outputs = ops.pick_outputs(b)
    return Pattern(seed, attempt, b.dtype, b.inputs, b.lines, outputs)
