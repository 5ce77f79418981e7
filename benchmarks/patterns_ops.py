"""The statements a Pattern is made of, and how the generator picks them (patterns.py
owns the Builder; this file only writes candidate lines and hands them to `emit`).

`fresh` marks results whose producer saves no output for backward: an in-place update of
a value that requires grad is only drawn on those (and only before anything reads them),
so that eager's "modified by an inplace operation" check rarely rejects a pattern.
"""
from __future__ import annotations

import re

import torch

# (template, fresh): {a} a float value
UNARY = [("torch.sin({a})", True), ("torch.cos({a})", True), ("torch.tanh({a})", False),
         ("torch.sigmoid({a})", False), ("torch.relu({a})", False), ("{a}.abs()", True),
         ("-{a}", True), ("torch.exp({a}.clamp(-4, 4))", False),
         ("torch.log1p({a}.abs())", True), ("torch.sqrt({a}.abs() + 0.25)", False),
         ("F.gelu({a})", True), ("F.silu({a})", True), ("{a} * 0.5 + 1.0", True),
         ("torch.rsqrt({a}.abs() + 1)", False), ("{a} * {a}", True), ("torch.erf({a})", True),
         ("{a}.clamp(-0.5, 0.7)", True), ("torch.floor({a} * 4)", True),
         ("F.softplus({a})", True)]
# {a} and {b} broadcast together
BINARY = ["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / ({b}.abs() + 1)",
          "torch.maximum({a}, {b})", "torch.minimum({a}, {b})", "torch.atan2({a}, {b})",
          "{a} * 2 - {b}", "torch.lerp({a}, {b}.to({a}.dtype), 0.25)", "{a} + {c}"]
# {dims}: an int or a tuple; {d}: one dim; {k}: keepdim
REDUCTIONS = [("{a}.sum({dims}, keepdim={k})", True), ("{a}.mean({dims}, keepdim={k})", True),
              ("{a}.amax({dims}, keepdim={k})", False), ("{a}.amin({dims}, keepdim={k})", False),
              ("{a}.var({dims}, keepdim={k})", True), ("{a}.std({dims}, keepdim={k})", False),
              ("torch.logsumexp({a}, {dims}, keepdim={k})", False), ("{a}.softmax({d})", False),
              ("{a}.log_softmax({d})", False), ("{a}.sum()", True), ("{a}.mean()", True),
              ("{a}.max({d}, keepdim={k}).values", False),
              ("{a}.norm(dim={dims}, keepdim={k})", False), ("{a}.argmax({d})", False),
              ("({a} - {a}.mean({d}, keepdim=True)) * torch.rsqrt({a}.var({d}, keepdim=True, "
               "unbiased=False) + 1e-5)", True)]
VIEWS = ["{a}.transpose({d}, {d2})", "{a}.permute({perm})", "{a}.unsqueeze({d})",
         "{a}.squeeze({d})", "{a}.reshape({merged})", "{a}.view(-1)", "{a}.flatten()",
         "{a}[..., ::2]", "{a}[1:]", "{a}.narrow({d}, {start}, {length})", "{a}.select({d}, 0)",
         "{a}.expand({expanded})", "{a}.t()", "{a}.contiguous()", "{a}.mT"]
MASKS = ["{a} > {c}", "{a} <= {b}", "({a} > 0) & ({b} < 0.5)", "~{m}", "{a}.isnan() | {m}"]
MASKED = ["torch.where({m}, {a}, {b})", "torch.where({m}, {a}, 0.0)",
          "{a}.masked_fill({m}, -1.5)", "{a}.masked_fill({m}, float('-inf')).softmax({d})",
          "{m}.to({a}.dtype) * {a}"]
CASTS = ["{a}.to(torch.float32)", "{a}.to(torch.float64)", "{a}.to(torch.bfloat16)",
         "{a}.to(torch.float16)", "{a}.type_as({b})", "{a}.float()"]
# statements: {t} a value that may be written
INPLACE = ["{t}.add_({b})", "{t}.mul_(0.5)", "{t}.sub_({b}, alpha=2)",
           "{t}.masked_fill_({m}, 0.25)", "{t}.clamp_(-1, 1)", "{t}[..., ::2].add_(1.0)",
           "{t}.select({d}, 0).mul_(-1)", "{t}[..., :1] = 0.5", "{t}.copy_({b})",
           "{t}.index_fill_({d}, {idx}, -2.0)", "{t}.index_add_({d}, {idx}, {src})",
           "{t}[{m}] = 0.0", "{t}.relu_()", "{t}.sigmoid_()"]
WEIGHTS = {"unary": 3, "binary": 3, "reduction": 2, "view": 2, "mask": 1.5, "cast": 0.7,
           "inplace": 1.5}


def _floats(b, writable=False) -> list:
    vs = [v for v in b.values if v.dtype.is_floating_point]
    if writable:
        vs = [v for v in vs if v.writable and (v.fresh or not v.grad)]
    return vs


def _recent(b, vs):
    """Mostly one of the last few values, so statements chain into fusable runs."""
    if not vs:
        return None
    return b.rng.choice(vs[-3:]) if b.rng.random() < 0.7 else b.rng.choice(vs)


def _partner_shape(b, shape: tuple) -> tuple:
    """A shape broadcasting with `shape`: some dims 1, leading dims dropped, size-1 dims
    grown (so `shape` is the one broadcast)."""
    out = []
    for n in shape:
        r = b.rng.random()
        out.append(1 if r < 0.3 else (b.rng.choice((2, 3, 8)) if n == 1 and r < 0.6 else n))
    while out and b.rng.random() < 0.2:
        out.pop(0)
    return tuple(out)


def _partner(b, a) -> str:
    """Another float operand for `a`: an existing value or a new input that broadcasts."""
    same = [v for v in _floats(b) if v is not a and len(v.shape) <= len(a.shape)]
    if same and b.rng.random() < 0.5:
        return _recent(b, same).name
    dtype = b.dtype if b.rng.random() < 0.85 else b.rng.choice(("float32", "float64",
                                                                "bfloat16", "float16"))
    return b.new_input(_partner_shape(b, a.shape), dtype).name


def _mask(b, a) -> str:
    masks = [v for v in b.values if v.dtype == torch.bool
             and len(v.shape) <= len(a.shape)]
    if masks and b.rng.random() < 0.5:
        return b.rng.choice(masks).name
    if b.rng.random() < 0.5:
        return b.new_input(_partner_shape(b, a.shape), "bool").name
    return f"({a.name} > {b.rng.choice((0.0, 0.3, -0.5))})"


def _dims(b, ndim: int) -> str:
    if ndim == 0:
        return "0"
    if ndim == 1 or b.rng.random() < 0.6:
        return str(b.rng.randrange(-ndim, ndim))
    return str(tuple(b.rng.sample(range(ndim), b.rng.randint(2, ndim))))


def _fields(b, a) -> dict:
    """Every placeholder a template may use, drawn for the operand `a`."""
    nd, shape = len(a.shape), a.shape
    d = b.rng.randrange(nd) if nd else 0
    perm = list(range(nd))
    b.rng.shuffle(perm)
    merged = (*shape[:d], -1) if nd > 1 else (-1,)
    ones = [i for i, n in enumerate(shape) if n == 1]
    expanded = tuple(b.rng.choice((2, 5)) if i in ones else -1 for i in range(nd))
    size = shape[d] if nd else 1
    return dict(a=a.name, d=d, d2=b.rng.randrange(nd) if nd else 0, perm=tuple(perm),
                dims=_dims(b, nd), k=b.rng.random() < 0.5, merged=merged,
                expanded=expanded, start=min(1, size), length=max(0, size - 2) // 2 + (size > 0),
                c=b.rng.choice(("0.5", "-1.0", "2.0")))


def step(b) -> None:
    """Emit one statement (or none, when torch rejects the drawn one)."""
    kinds = list(WEIGHTS)
    kind = b.rng.choices(kinds, [WEIGHTS[k] for k in kinds])[0]
    a = _recent(b, _floats(b, writable=kind == "inplace"))
    if a is None:
        return
    f = _fields(b, a)
    name = b.fresh_name()
    if kind == "unary":
        text, fresh = b.rng.choice(UNARY)
        b.emit(f"{name} = {text.format(**f)}", name, fresh=fresh)
    elif kind == "binary":
        text = b.rng.choice(BINARY)
        b.emit(f"{name} = {text.format(**f, b=_partner(b, a) if '{b}' in text else '')}",
               name, fresh=True)
    elif kind == "reduction":
        text, fresh = b.rng.choice(REDUCTIONS)
        b.emit(f"{name} = {text.format(**f)}", name, fresh=fresh)
    elif kind == "view":
        text = b.rng.choice(VIEWS)
        b.emit(f"{name} = {text.format(**f)}", name, fresh=a.fresh,
               writable=a.writable and "expand" not in text)
    elif kind == "mask":
        _masks(b, a, f, name)
    elif kind == "cast":
        text = b.rng.choice(CASTS)
        b.emit(f"{name} = {text.format(**f, b=_partner(b, a) if '{b}' in text else '')}",
               name, fresh=True)
    else:
        _inplace(b, a, f)


def _masks(b, a, f, name) -> None:
    if b.rng.random() < 0.35:
        text = b.rng.choice(MASKS)
        line = text.format(**f, b=_partner(b, a) if "{b}" in text else "",
                           m=_mask(b, a) if "{m}" in text else "")
        b.emit(f"{name} = {line}", name, writable=False)
        return
    text = b.rng.choice(MASKED)
    line = text.format(**f, m=_mask(b, a), b=_partner(b, a) if "{b}" in text else "")
    b.emit(f"{name} = {line}", name, fresh=True)


def _inplace(b, t, f) -> None:
    text = b.rng.choice(INPLACE)
    extra = {}
    if "{b}" in text:
        extra["b"] = _partner(b, t)
    if "{m}" in text:
        extra["m"] = _mask(b, t) if "[{m}]" not in text else \
            b.new_input(t.shape, "bool").name
    if "{idx}" in text:
        if not t.shape or t.shape[f["d"]] == 0:
            return
        k = b.rng.randint(1, 4)
        extra["idx"] = b.new_input((k,), "int64", high=t.shape[f["d"]]).name
        if "{src}" in text:
            src = list(t.shape)
            src[f["d"]] = k
            extra["src"] = b.new_input(tuple(src), str(t.dtype).replace("torch.", "")).name
    b.emit(text.format(**{**f, "t": t.name, **extra}), None)


def pick_outputs(b) -> list:
    """The last value and up to three others that nothing reads (views, intermediates,
    reductions), so that every statement is live."""
    made = [v for v in b.values if v.name.startswith("v")]
    if not made:
        b.emit(f"v{len(b.lines)} = {b.values[0].name} * 1", f"v{len(b.lines)}", fresh=True)
        made = [b.values[-1]]
    read = set()
    for line in b.lines:       # what a statement defines or writes in place is not read
        read |= names_in(line) - {re.match(r"[xv]\d+", line).group()}
    sinks = [v.name for v in made[:-1] if v.name not in read]
    b.rng.shuffle(sinks)
    return [made[-1].name] + sinks[:3]


def names_in(line: str) -> set:
    return set(re.findall(r"\b[xv]\d+\b", line))
