"""The accuracy rule (brrr_compiler/accuracy.py) that the tests, the model suite and
`brrr demo` judge compiled results by: eager's tolerance of eager, else no further from
a float64 run than eager is. Here on the demo's chain of ten transcendental functions,
without compiling: a result as accurate as eager's passes however it rounds, and one
off by more than eager's error fails even where eager's tolerance would let it through
a looser bound."""
import torch

from brrr_compiler import demo
from brrr_compiler.accuracy import (coarsest_tol, matches, rounded_each_op, within_eager_error,
                                    zero_sign_variants)
from tests.helpers import check_against_eager


def _chain(n=256):
    x, y = demo._randn(n, n, seed=5), demo._randn(n, n, seed=6)
    return demo.chain10(x, y), demo.chain10(x.double(), y.double())


def _off_by(t, err, every):
    """`t` with `err` added to every `every`-th element (a kernel wrong on a few lanes)."""
    bad = t.clone()
    bad.view(-1)[::every] += err
    return bad


def test_eagers_own_bits_and_the_exact_rounding_pass():
    eager, exact = _chain()
    assert matches(eager, eager, exact)
    assert matches(exact.float(), eager, exact)       # rounded once: closer than eager


def test_a_result_off_on_a_few_elements_fails():
    """2e-5 on 1% of the elements (the size of the demo's one reported mismatch): more
    than eager's tolerance, and far more than eager's error against float64."""
    eager, exact = _chain()
    assert not matches(_off_by(eager, 2e-5, 97), eager, exact)
    assert not matches(_off_by(eager, float("nan"), 997), eager, exact)


def test_an_inaccurate_eager_does_not_fail_an_accurate_result():
    """Eager itself off by 3e-5 on some elements (another libm): brrr's correctly rounded
    result misses eager's tolerance but is closer to float64, so it passes; brrr as far
    off as eager passes too, and further off does not."""
    _, exact = _chain()
    eager = _off_by(exact.float(), 3e-5, 89)
    assert matches(exact.float(), eager, exact)
    assert within_eager_error(_off_by(exact.float(), -3e-5, 89), eager, exact)
    assert not matches(_off_by(exact.float(), 1e-4, 89), eager, exact)


def test_shape_dtype_and_missing_reference_fail():
    eager, exact = _chain(8)
    assert not matches(eager[:4], eager, exact)
    assert not matches(eager.double(), eager, exact)
    assert not within_eager_error(_off_by(eager, 1e-3, 3), eager, None)


def test_demo_check_judges_every_output(capsys):
    eager, exact = _chain(64)
    assert demo.check("output", (eager, eager * 2), (eager, eager * 2), (exact, exact * 2))
    assert "matches" in capsys.readouterr().out
    wrong = (eager, _off_by(eager * 2, 1e-4, 5))
    assert not demo.check("output", wrong, (eager, eager * 2), (exact, exact * 2))
    assert "MISMATCH" in capsys.readouterr().out
    assert not demo.check("output", (eager,), (eager, eager * 2), (exact, exact * 2))


def test_a_comparison_flipping_near_ties_passes_when_no_further_from_float64():
    """A bool or index output has no error to measure: a few ulp flip it where two values
    are near a tie. It passes when it disagrees with float64 in no more elements than
    eager does (fuzz seed 25068: bfloat16 `x0 <= v6`, brrr off float64 in 15 elements,
    eager in 32), and fails with more, or with any where eager agrees everywhere."""
    x = torch.randn(4096, generator=torch.Generator().manual_seed(3))
    exact = x.double().sin() <= 0.5
    eager = x.bfloat16().sin() <= 0.5           # rounds sin to bfloat16 first
    assert bool((eager != exact).any())
    assert matches(exact.clone(), eager, exact)
    assert not matches(~exact, eager, exact)
    index = x.view(64, 64).double().argmax(1)
    assert matches(index.clone(), index, index)
    moved = index.clone()
    moved[7] = (moved[7] + 1) % 64
    assert not matches(moved, index, index)
    assert not within_eager_error(moved, index, None)


def test_rounded_each_op_rounds_every_result_once_to_eagers_dtype():
    x = torch.randn(1000, generator=torch.Generator().manual_seed(4)).half()
    out = rounded_each_op(lambda x: ((x * 3).exp() + 1).argmax(), x)
    assert out == ((x.double() * 3).half().double().exp().half().double() + 1).argmax()
    prod = rounded_each_op(lambda x: (x * 3).exp(), x)
    assert prod.dtype == torch.float16
    assert torch.equal(prod, (x.double() * 3).half().double().exp().half())
    y = x.clone()
    assert torch.equal(rounded_each_op(lambda t: t.mul_(2).add(0), y), x * 2)   # in place
    assert torch.equal(y, x * 2)


def test_an_index_may_match_the_correctly_rounded_program_instead():
    """Fuzz seed 28850 (float16): argmax over a row whose two largest entries eager's
    softmax rounds apart (one of them up by an ulp) and brrr's rounds equal: brrr takes
    the first, the float64 program the second. brrr's index is the one the program
    with each op correctly rounded gives; a wrong index matches neither oracle."""
    exact, eager = torch.tensor([1, 1, 3]), torch.tensor([1, 1, 3])
    rounded = torch.tensor([0, 1, 3])
    assert within_eager_error(rounded.clone(), eager, exact, rounded=rounded)
    assert not within_eager_error(rounded.clone(), eager, exact)
    assert not within_eager_error(torch.tensor([2, 1, 3]), eager, exact, rounded=rounded)


def test_a_float64_result_through_bfloat16_counts_bfloat16_units():
    """A float64 value computed through bfloat16 (fuzz seed 45845): eager is off by 81
    float64 units, brrr by 178; in the coarsest input's units both are tiny. The coarse
    units apply only where eager's own error shows the value went through them."""
    r = torch.tensor([2.898344207658991], dtype=torch.float64)
    eager, brrr = r - 1.128e-3, r - 2.461e-3
    bf16 = coarsest_tol({torch.float64, torch.bfloat16})
    assert bf16 == coarsest_tol({torch.bfloat16}) and coarsest_tol(set()) is None
    assert not within_eager_error(brrr, eager, r)
    assert within_eager_error(brrr, eager, r, coarse=bf16)
    # eager exact to float64's tolerance: a brrr off by 1e-3 is wrong, bfloat16 input or not
    assert not within_eager_error(brrr, r + 1e-12, r, coarse=bf16)


def _atan2_of_min(x, y):
    """atan2 reads the sign of a zero: atan2(0, -0) is pi, atan2(0, +0) is 0."""
    return torch.atan2(y, x.amin(0))


def _zeros_first_negative():
    """Columns of zeros whose first is -0: eager's amin over dim 0 keeps the last zero in
    its vector body (+0) and the first in its scalar tail (-0)."""
    x = torch.zeros(3, 1000)
    x[0] = -0.0
    return x, torch.zeros(1000)


def test_a_zero_signed_by_another_order_passes_and_a_wrong_value_does_not():
    x, y = _zeros_first_negative()
    eager = _atan2_of_min(x, y)
    exact = _atan2_of_min(x.double(), y.double())
    alts = zero_sign_variants(_atan2_of_min, lambda: (x.double(), y.double()))
    assert len(alts) == 2
    assert {float(v.abs().max()) for v in alts} == {0.0, float(torch.pi)}
    other_order = torch.atan2(y, torch.full((1000,), -0.0))   # amin keeping each first zero
    assert not torch.equal(other_order, eager)
    assert not within_eager_error(other_order, eager, exact)
    assert within_eager_error(other_order, eager, exact, alts=alts)
    assert not within_eager_error(_off_by(other_order, 1e-3, 7), eager, exact, alts=alts)


def test_a_compiled_min_that_meets_its_zeros_in_another_order_matches():
    x, y = _zeros_first_negative()
    check_against_eager(_atan2_of_min, x, y, grad=False, reference=True)


def test_an_ill_conditioned_result_is_allowed_the_correctly_rounded_programs_error():
    """cos of a large argument: one rounding of the argument moves the result by many
    units. Eager's luck sets no bar below what the correctly rounded program itself
    misses by; a result far beyond that still fails."""
    x = torch.linspace(500.0, 560.0, 128, dtype=torch.float64)

    def program(t):
        return torch.cos((t / 3) * 3 + 0.1).sum(0, keepdim=True)

    exact = program(x)
    rounded = rounded_each_op(program, x.float())
    eager = exact.float()                             # as if eager were lucky: exact
    brrr = rounded + (rounded - exact.float()) * 0.5   # 1.5x the correctly rounded error
    assert (rounded.double() - exact).abs().item() > 1e-5
    assert not within_eager_error(brrr, eager, exact)
    assert within_eager_error(brrr, eager, exact, rounded=rounded)
    assert not within_eager_error(brrr + 1e-2, eager, exact, rounded=rounded)


def test_the_correctly_rounded_programs_gradients_round_the_backwards_ops_too():
    x = torch.tensor([548.0, 300.5, 7.25], requires_grad=True)

    def grads(t):
        return torch.autograd.grad(torch.sin(t * 1.1).sum(), t)

    (rounded,) = rounded_each_op(grads, x, grad=True)
    exact = torch.cos(x.detach().double() * 1.1) * 1.1
    assert rounded.dtype == torch.float32
    arg = (x.detach().double() * 1.1).float().double()        # forward: rounded once
    assert torch.equal(rounded, (torch.cos(arg).float().double() * 1.1).float())
    assert (rounded.double() - exact).abs().max() < 1e-3


def test_randomly_rounded_runs_round_each_result_to_a_neighbour_reproducibly():
    x = torch.linspace(-3, 3, 1001)
    nearest = rounded_each_op(lambda t: t / 3, x)
    one, again = (rounded_each_op(lambda t: t / 3, x, jitter=1) for _ in range(2))
    assert torch.equal(one, again)                                    # seeded
    ulp = torch.nextafter(nearest.abs(), torch.tensor(float("inf"))) - nearest.abs()
    assert bool(((one - nearest).abs() <= ulp).all())                 # a neighbour at most
    assert 0 < int((one != nearest).sum()) < x.numel()                # some moved, not all
    assert not torch.equal(one, rounded_each_op(lambda t: t / 3, x, jitter=2))


def test_a_structural_zero_is_allowed_the_noise_of_randomly_rounded_runs():
    """A sum that cancels to 0 exactly holds only rounding noise: a result whose noise is
    of the size randomly rounded runs show passes, though eager's happened to be 0."""
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(0)) * 100

    def program(t):
        return (t - t.mean(1, keepdim=True)).sum(1)

    exact = program(x.double())
    runs = [rounded_each_op(program, x, jitter=j) for j in (1, 2)]
    noise = max(float((r.double() - exact).abs().max()) for r in runs)
    assert noise > 1e-5
    eager = torch.zeros(64)
    brrr = torch.full((64,), noise * 1.5)
    assert not within_eager_error(brrr, eager, exact)
    assert within_eager_error(brrr, eager, exact, fair=runs)
    assert not within_eager_error(brrr * 100, eager, exact, fair=runs)
