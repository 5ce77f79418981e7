"""The fuzzer (benchmarks/fuzz.py): random graphs from benchmarks/patterns.py under brrr,
checked against eager for values, dtypes, strides, mutated inputs and gradients.

A fixed slice of seeds runs by default; the long range (BRRR_FUZZ_SEEDS, default
0:10000) is marked slow. Each failure message carries the seed: `python
benchmarks/fuzz.py --seed N` prints that graph as a runnable script.
"""
import os

import pytest

from benchmarks import fuzz
from benchmarks.patterns import generate

# a spread of dtypes, in-place updates, masks, reductions, expanded and zero-size inputs
SLICE = range(100, 112)


def test_a_seed_always_makes_the_same_graph():
    a, b = generate(1234), generate(1234)
    assert a.script() == b.script()
    assert generate(1234, attempt=1).script() != a.script()
    f, inputs = a.build()
    g, again = b.build()
    assert all((x.detach() == y.detach()).all() or x.numel() == 0 for x, y in zip(inputs, again))


def test_the_generator_covers_its_vocabulary():
    """Over a few hundred seeds: every float dtype, in-place statements, input layouts
    and sizes from size-1 to large."""
    patterns = [generate(s) for s in range(300)]
    assert {p.dtype for p in patterns} == {"float32", "float64", "bfloat16", "float16"}
    text = "\n".join(p.script() for p in patterns)
    for piece in ("_(", "] = ", ".transpose(-1, -2)", "[..., 1::2]", ".expand(", "torch.where(",
                  "keepdim=True", "requires_grad_()", "torch.rand(", "torch.randint(", ".to(torch."):
        assert piece in text, piece
    numels = [x.shape for p in patterns for x in p.inputs]
    assert any(0 in s for s in numels) and any(1 in s for s in numels)


@pytest.mark.parametrize("seed", SLICE)
def test_fuzzed_graph_matches_eager(seed):
    row = fuzz.check(seed)
    assert row["status"] in ("pass", "shared", "drift"), \
        f"seed {seed}: {row} (python benchmarks/fuzz.py --seed {seed} --minimize)"


@pytest.mark.slow
def test_fuzz_range(tmp_path):
    lo, hi = os.environ.get("BRRR_FUZZ_SEEDS", "0:10000").split(":")
    jsonl = str(tmp_path / "fuzz.jsonl")
    fuzz.main(["--seeds", f"{lo}:{hi}", "--jobs", "2", "--jsonl", jsonl,
               "--out", str(tmp_path / "fuzz.md")])
    bad = [r for r in fuzz.load(jsonl).values() if r["status"] == "brrr-only"]
    assert not bad, "\n".join(f"seed {r['seed']}: {r['detail']}" for r in bad)
