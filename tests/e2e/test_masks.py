"""Masks, integer inputs and indices inside float kernels (mixed-dtype loops), against eager.

A bool or uint8 mask selects, fills or scales floats; integer tensors are dequantized to
float; gather reads at loaded indices. Each over odd sizes, zero-size and size-1 dims,
broadcast and transposed masks, NaN and inf among the values, gradients where they exist,
and softmax rows whose every element is masked (NaN, as eager gives). How the C++
printer reads masks is checked as text in tests/codegen/test_cpp_masks.py.
"""
import pytest
import torch

from tests.helpers import check_against_eager

NEG_INF = float("-inf")


def _randn(*shape, dtype=torch.float32, seed=0, grad=True):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen).to(dtype)
    return x.requires_grad_(grad)


def _mask(*shape, p=0.5, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=gen) < p


def _with_specials(x):
    """x (detached, then needing grad again) with NaN, +inf and -inf in its first row."""
    x = x.detach().clone()
    flat = x.view(-1)
    for i, v in zip(range(min(3, flat.numel())), (float("nan"), float("inf"), NEG_INF)):
        flat[i * 5 % flat.numel()] = v
    return x.requires_grad_()


def _has_kernel(graphs) -> bool:
    return any(g.kernels for g in graphs)


# ---- softmax under a mask --------------------------------------------------------------

def _causal_softmax(s, mask):
    return torch.where(mask, s * 0.125, NEG_INF).softmax(-1)


SOFTMAX_SHAPES = {"odd": (2, 3, 7, 13), "one_row": (1, 1, 1, 5), "one_col": (2, 1, 6, 1),
                  "long_rows": (1, 2, 3, 1100)}


@pytest.mark.parametrize("shape", list(SOFTMAX_SHAPES.values()), ids=list(SOFTMAX_SHAPES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_causal_masked_softmax(shape, dtype):
    """A (S, K) bool mask broadcast over (B, H, S, K); row 1 of the mask is all False,
    so those rows are NaN in eager and must be NaN here."""
    *_, rows, cols = shape
    mask = torch.ones(rows, cols, dtype=torch.bool).tril(cols - rows)
    if rows > 1:
        mask[1] = False
    graphs = check_against_eager(_causal_softmax, _randn(*shape, dtype=dtype), mask)
    assert _has_kernel(graphs)


@pytest.mark.parametrize("shape", [(2, 3, 7, 13), (1, 2, 3, 1100)], ids=["odd", "long_rows"])
def test_masked_log_softmax_and_logsumexp(shape):
    """Row walks that fold the max and the sum of exps in one sweep (cpp_online.py):
    chunks that are all -inf so far add nothing; a fully masked row gives eager's NaN
    (log_softmax) and -inf (logsumexp)."""
    *_, rows, cols = shape
    mask = torch.ones(rows, cols, dtype=torch.bool).tril(cols - rows)
    mask[1] = False

    def fn(s, mask):
        m = torch.where(mask, s * 0.125, NEG_INF)
        return m.log_softmax(-1), m.logsumexp(-1)

    check_against_eager(fn, _with_specials(_randn(*shape)), mask)


def test_masked_row_statistics():
    def fn(x, mask):
        return (x * mask).sum(-1) / mask.sum(-1), x.masked_fill(~mask, NEG_INF).amax(-1)

    mask = _mask(6, 37)
    mask[2] = False                      # 0 / 0 and the max of nothing but -inf
    check_against_eager(fn, _randn(6, 37), mask)


def test_causal_masked_softmax_nan_inf_scores():
    s = _with_specials(_randn(2, 2, 5, 9))
    mask = torch.ones(5, 9, dtype=torch.bool).tril(4)
    check_against_eager(_causal_softmax, s, mask)


def test_padding_mask_softmax():
    """BERT's padding mask: (B, K) broadcast over heads and query rows, one batch fully
    padded (every row NaN)."""
    mask = _mask(3, 11)
    mask[2] = True

    def fn(s, pad):
        return s.masked_fill(pad[:, None, None, :], NEG_INF).softmax(-1)

    check_against_eager(fn, _randn(3, 2, 4, 11), mask)


def test_zero_size_masked_softmax():
    check_against_eager(_causal_softmax, _randn(2, 0, 4, 4), torch.ones(4, 4, dtype=torch.bool))
    check_against_eager(_causal_softmax, _randn(2, 3, 0, 4), torch.ones(0, 4, dtype=torch.bool))


# ---- select and fill -------------------------------------------------------------------

POINTWISE_SHAPES = {"odd": (9, 37), "size_one": (1, 1), "wide": (3, 1031), "zero": (0, 5)}


@pytest.mark.parametrize("shape", list(POINTWISE_SHAPES.values()), ids=list(POINTWISE_SHAPES))
@pytest.mark.parametrize("value", [0.0, NEG_INF, float("nan")], ids=["zero", "ninf", "nan"])
def test_masked_fill(shape, value):
    def fn(x, y, mask):
        return (x + y).masked_fill(mask, value)

    x, y = _with_specials(_randn(*shape)), _randn(*shape, seed=2)
    check_against_eager(fn, x, y, _mask(*shape))


def test_masked_fill_broadcast_and_transposed_masks():
    x = _randn(6, 5, 7)
    check_against_eager(lambda x, m: x.masked_fill(m, -1.0) * 2, x, _mask(5, 1))
    check_against_eager(lambda x, m: x.masked_fill(m, -1.0) * 2, x, _mask(7, 5).t())
    check_against_eager(lambda x, m: x.masked_fill(m, -1.0) * 2, x, _mask(6, 5, 14)[..., ::2])


@pytest.mark.parametrize("shape", list(POINTWISE_SHAPES.values()), ids=list(POINTWISE_SHAPES))
def test_where_with_a_bool_condition(shape):
    x, y = _with_specials(_randn(*shape)), _randn(*shape, seed=2)
    check_against_eager(lambda m, x, y: torch.where(m, x, y).exp(), _mask(*shape), x, y)
    check_against_eager(lambda m, x: torch.where(m, x, 0.5) * x, _mask(*shape), x)


def test_one_mask_selecting_for_a_row_min_and_a_fill():
    """A where feeding a row's amin and a masked_fill of the same mask, in one kernel.
    gcc 12 threaded the two selects into one branch and then got the amin's NaN flag
    wrong: NaN for every row (fuzz seed 15026; built with -fno-code-hoisting now)."""
    x = _randn(1, 512, 13, grad=False).transpose(-1, -2)
    s = torch.randn(1, 1, 1, dtype=torch.float64).expand(1, 1, 512)

    def f(m, x, s):
        low = (-torch.where(m, x, s)).amin(-1, keepdim=True)
        return torch.floor(low * 4) * 0.5 + 1.0, torch.sqrt(s.masked_fill(m, -1.5).abs() + 0.25)
    graphs = check_against_eager(f, _mask(13, 512), x, s)
    assert len([k for g in graphs for k in g.kernels]) == 1


@pytest.mark.parametrize("fusion", ["greedy", "none"])
def test_comparison_feeding_where(fusion):
    """Fused, the compare stays in registers; unfused (fusion="none"), the bool result
    is stored by one kernel and read back by the next."""
    a, b, c = _randn(7, 45), _randn(7, 45, seed=2), _randn(7, 45, seed=3)
    graphs = check_against_eager(lambda a, b, c: torch.where(a > b, a, c), a, b, c,
                                 options={"fusion": fusion})
    assert len([k for g in graphs[:1] for k in g.kernels]) == (1 if fusion == "greedy" else 2)


def test_bool_outputs_and_mask_logic():
    def fn(a, b, m1, m2):
        gt = a > b
        both = m1 & ~m2
        return gt, both, torch.where(both | gt, a, b), (m1 ^ gt).sum(-1), m2.any(-1)

    a, b = _randn(5, 33, grad=False), _randn(5, 33, seed=2, grad=False)
    check_against_eager(fn, a, b, _mask(5, 33), _mask(5, 33, seed=3), grad=False)


# ---- masks as numbers ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("shape", [(13, 29), (1, 1), (0, 3)], ids=["odd", "size_one", "zero"])
def test_dropout_style_mask_multiply(dtype, shape):
    def fn(x, mask):
        return mask.to(x.dtype) * x * (1 / 0.9)

    x = _randn(*shape, dtype=dtype)
    check_against_eager(fn, x, _mask(*shape, p=0.9))
    gen = torch.Generator().manual_seed(4)   # uint8 mask with bytes other than 0 and 1
    check_against_eager(fn, x, torch.randint(0, 3, shape, generator=gen, dtype=torch.uint8))


def test_uint8_mask_as_bool_condition():
    gen = torch.Generator().manual_seed(5)
    raw = torch.randint(0, 4, (6, 21), generator=gen, dtype=torch.uint8)
    x = _randn(6, 21)
    check_against_eager(lambda r, x: torch.where(r.bool(), x, -x) * 3, raw, x)


# ---- integers ----------------------------------------------------------------------------

@pytest.mark.parametrize("qdtype", [torch.int8, torch.uint8, torch.int16, torch.int32])
@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_integer_dequantization(qdtype, out):
    """(q - zero_point) * scale with per-row zero point and scale."""
    info = torch.iinfo(qdtype)
    gen = torch.Generator().manual_seed(6)
    q = torch.randint(max(info.min, -1000), min(info.max, 1000) + 1, (7, 67), generator=gen,
                      dtype=qdtype)
    zp, scale = _randn(7, 1, grad=False).round(), _randn(7, 1, seed=2, grad=False).abs()

    def fn(q, zp, scale):
        return ((q.float() - zp) * scale).to(out)

    check_against_eager(fn, q, zp, scale)
    check_against_eager(fn, q.t().contiguous().t(), zp.view(7, 1), scale)


@pytest.mark.parametrize("cols", [37, 1100], ids=["short", "two_chunks"])
def test_byte_inputs_folded_by_row_reductions(cols):
    """int8, uint8 and bool values read by a row's sums and maxes (a short row's sum loops
    read int32 copies of them, cpp_staging.py; long rows read the bytes), and a gathered
    bool, which is never copied."""
    gen = torch.Generator().manual_seed(8)
    q = torch.randint(-128, 128, (5, cols), generator=gen, dtype=torch.int8)
    u = torch.randint(0, 256, (5, cols), generator=gen, dtype=torch.uint8)
    m, x = _mask(5, cols), _randn(5, cols)
    idx = torch.randint(0, cols, (5, 9), generator=gen)

    def fn(q, u, m, x, idx):
        return ((q.float() * x).sum(-1), (u * x).amax(-1), (x * m).sum(-1) / m.sum(-1),
                m.gather(-1, idx).sum(-1), (q + u).sum(-1), q.amin(-1))

    check_against_eager(fn, q, u, m, x, idx, atol=1e-4, rtol=1e-5)


def test_gather_index_arithmetic():
    gen = torch.Generator().manual_seed(7)
    x = _randn(6, 31)
    for shape in ((6, 17), (6, 1), (1, 40)):
        idx = torch.randint(0, 31, shape, generator=gen)
        check_against_eager(lambda x, i: x.gather(-1, i) * 2 + 1, x[: shape[0]], idx)
    idx = torch.randint(0, 6, (4, 31), generator=gen)
    check_against_eager(lambda x, i: x.gather(0, i).exp(), x, idx)


EMBEDDING_INDICES = {"batch": (3, 7), "flat": (11,), "one": (1, 1), "zero": (0, 4)}


@pytest.mark.parametrize("shape", list(EMBEDDING_INDICES.values()), ids=list(EMBEDDING_INDICES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_embedding_fused_with_its_consumers(shape, dtype):
    """Token embedding scaled and added to a position table: one kernel reading whole rows
    of the table at indices it checks once per row; the table's gradient is ATen's."""
    gen = torch.Generator().manual_seed(9)
    idx = torch.randint(0, 50, shape, generator=gen)
    w, pos = _randn(50, 24, dtype=dtype), _randn(shape[-1], 24, dtype=dtype, seed=2)

    def fn(idx, w, pos):
        return torch.nn.functional.embedding(idx, w) * 4.0 + pos

    graphs = check_against_eager(fn, idx, w, pos)
    ops = [op for g in graphs for k in g.kernels for op in k.aten_ops]
    assert any("embedding" in op for op in ops) or 0 in shape, ops


@pytest.mark.parametrize("dim", [24, 1100], ids=["short_rows", "two_chunks"])
def test_embedding_feeding_a_layer_norm(dim):
    """A decoder's input: token and position embeddings summed and normalized in one row
    kernel, each index checked once per row and read in every walk of the row."""
    gen = torch.Generator().manual_seed(11)
    idx = torch.randint(0, 40, (2, 9), generator=gen)
    tok, pos = _randn(40, dim), _randn(9, dim, seed=2)
    w, b = _randn(dim, seed=3), _randn(dim, seed=4)

    def fn(idx, tok, pos, w, b):
        emb = torch.nn.functional.embedding
        h = emb(idx, tok) + emb(torch.arange(idx.shape[1]), pos)
        return torch.nn.functional.layer_norm(h, (dim,), w, b), h.softmax(-1)

    graphs = check_against_eager(fn, idx, tok, pos, w, b, atol=1e-4, rtol=1e-4)
    assert any("embedding" in op for g in graphs for k in g.kernels for op in k.aten_ops)


def test_embedding_variants():
    gen = torch.Generator().manual_seed(10)
    idx = torch.randint(0, 30, (4, 9), generator=gen)
    w = _randn(30, 16)
    emb = torch.nn.functional.embedding
    check_against_eager(lambda i, w: emb(i, w, padding_idx=0).sin(), idx, w)
    check_against_eager(lambda i, w: emb(i, w).sum(-1), idx.to(torch.int32), w)
    check_against_eager(lambda i, w: emb(i, w.t()) * 2, idx[:, :5] % 16, _randn(16, 30))
    check_against_eager(lambda i, w: emb(i.t(), w) + 1, idx, w)


def test_embedding_out_of_range_raises():
    w, idx = _randn(5, 8, grad=False), torch.tensor([[0, 4], [5, 1]])
    errors = {}
    for backend in ("aot_eager", "brrr"):
        torch._dynamo.reset()
        with pytest.raises(Exception) as err:
            torch.compile(lambda i, w: torch.nn.functional.embedding(i, w) * 2, backend=backend)(idx, w)
        errors[backend] = err.value
    torch._dynamo.reset()
    assert isinstance(errors["brrr"], type(errors["aot_eager"])), errors


@pytest.mark.parametrize("bad", [9, -1, 1 << 40], ids=["end", "negative", "huge"])
def test_pointwise_gather_out_of_range_raises(bad):
    """An index past either end (or past int32) in a pointwise gather's vectorized loop
    raises, as aot_eager raises (eager's error, from the runner)."""
    x, idx = _randn(4, 9, grad=False), torch.tensor([[0, 8], [1, 2], [3, bad], [0, 0]])
    errors = {}
    for backend in ("aot_eager", "brrr"):
        torch._dynamo.reset()
        with pytest.raises(Exception) as err:
            torch.compile(lambda x, i: x.gather(-1, i) * 2, backend=backend)(x, idx)
        errors[backend] = err.value
    torch._dynamo.reset()
    assert isinstance(errors["brrr"], type(errors["aot_eager"])), errors


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.bfloat16],
                         ids=lambda d: str(d)[6:])
def test_masked_fill_is_contiguous_whatever_its_operands(dtype):
    """Eager's masked_fill clones self contiguous before filling it: a sum of a transposed
    and an expanded operand, masked by a broadcast column, is contiguous in eager (fuzz
    seed 308521 gave it the sum's transposed strides in float16); a channels-last self too."""
    x0 = _randn(13, 1024, dtype=dtype, grad=False).t()
    x1 = _randn(1, 13, dtype=dtype, seed=2, grad=False).expand(1024, 13)
    m = _mask(1024, 1)
    check_against_eager(lambda a, b, m: torch.tanh((b + a).masked_fill(m, -1.5)),
                        x0, x1, m, grad=False)
    y = _randn(2, 3, 8, 8, dtype=dtype).detach().to(memory_format=torch.channels_last)
    check_against_eager(lambda t, m: t.masked_fill(m, 0.0) * 2, y.requires_grad_(), _mask(8, 8))


def test_masked_fill_of_a_contiguous_value_stays_one_kernel():
    """The clone that gives eager's contiguous layout fuses: no copy of its own."""
    from tests.helpers import plan_of
    plan = plan_of(lambda x, m: x.masked_fill(m, 0.0) * 2, torch.randn(64, 32), _mask(64, 32))
    assert len(plan.groups) == 1 and plan.aten_nodes() == [], str(plan)
