"""The fuzzer (benchmarks/fuzz.py): random graphs from benchmarks/patterns.py under brrr,
checked against eager for values, dtypes, strides, mutated inputs and gradients.

A fixed slice of seeds runs by default; the long range (BRRR_FUZZ_SEEDS, default
0:10000) is marked slow. Each failure message carries the seed: `python
benchmarks/fuzz.py --seed N` prints that graph as a runnable script.
"""
import os

import pytest
import torch

from benchmarks import fuzz
from benchmarks.patterns import InputSpec, Pattern, generate

# a spread of dtypes, in-place updates, masks, reductions, expanded and zero-size inputs
SLICE = range(100, 112)
# seeds that once failed: a column sum's rounding (682), FakeTensor's strides of
# pointwise ops (48, 655 in bfloat16, 1920 in float64), a reference that aliased a
# cast's operand where the graph copied it (1067), a short sum's rounding (1407),
# libm's scalar tail of a vector loop (1995), an argmax over drifted bfloat16 values
# whose eager-rounded run fails only as aot_eager does (1893: drift, not brrr's), a
# decomposed lerp laid out by its Python reference instead of as eager (4064), a
# float16 comparison with a Python number not rounded to float16 (5552), a float sum
# over minimum(x, scalar) whose loop gcc unswitched into a scalar copy (5256), an input
# saved for the backward but copied after the graph mutated it (7882) or saved as a view
# (8934), a division by a row constant done two ways in one kernel (9056), gcc's jump
# threading breaking a masked row min (15026), bool and index outputs flipped near ties
# and judged by how often they disagree with float64 (24499, 24717, 25068), an argmax of
# cosines 3 ulp apart that libmvec's cosf rounds alike (17194: drift, as libm="accurate"
# matches eager), a bfloat16 softmax of a transposed difference laid out transposed (26543),
# row sums of normalized rows fed into a full sum from float lanes (51660), a reduction
# of a broadcast tensor whose one-copy result changed a pointwise reader's layout (70981),
# index_fill's FakeTensor strides on a non-dense self steering a lerp's layout (72400)
FIXED = (48, 655, 682, 1067, 1407, 1893, 1920, 1995, 4064, 5256, 5552, 7882, 8934, 9056, 15026,
         17194, 24499, 24717, 25068, 25873, 26543, 28850, 29899, 43932, 45845, 51660,
         70981, 72400, 79097, 79394)


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


def _reference_and_graph(dtype: str):
    p = Pattern(0, 0, dtype, [InputSpec("x0", (3, 4), dtype)],
                ["v0 = x0.to(torch.float32)", "v0.mul_(0.5)", "v1 = v0 + x0"], ["v1"])
    return p.build_reference(), p.build()[0]


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_the_exact_reference_copies_where_the_graph_copies(dtype):
    """float16 -> float32 copies, so the update leaves x0 alone; float32 -> float32 is x0
    itself, updated. The reference (float64 throughout) must do the same."""
    exact, f = _reference_and_graph(dtype)
    x = torch.randn(3, 4).to(getattr(torch, dtype))
    expected = f(x.clone())[0].double()
    assert torch.allclose(exact(x.double())[0], expected, atol=1e-3)
    assert torch.allclose(expected, x.double() * (1.5 if dtype == "float16" else 1.0), atol=1e-3)


@pytest.mark.parametrize("seed", FIXED + tuple(SLICE))
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


def test_a_rechecked_seed_reports_its_newest_result(tmp_path):
    """--recheck appends to the unsharded file, which is read before the shards: the row
    written later wins, whichever file holds it (a seed that timed out while the run was
    paused passes when rechecked)."""
    import json
    base = tmp_path / "f.jsonl"
    base.write_text(json.dumps({"seed": 7, "status": "pass", "t": 2.0}) + "\n")
    (tmp_path / "f.jsonl.0of2").write_text(
        json.dumps({"seed": 7, "status": "brrr-only", "stage": "crash", "t": 1.0}) + "\n"
        + json.dumps({"seed": 9, "status": "pass", "t": 1.0}) + "\n")
    rows = fuzz.load(str(base))
    assert rows[7]["status"] == "pass" and rows[9]["status"] == "pass"
