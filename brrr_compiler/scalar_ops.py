"""The scalar-op table: every scalar op of the kernel IR, one row each.

A row says what the op means (its arity, its reference semantics as a torch function, the
rule giving its result's dtype), what one evaluation costs (cheap flops and transcendental
evaluations) and how each target prints it: its C++ form, its Triton form, and the
`libdevice` function, if any, that its Triton form calls and that Triton's interpreter
runs as the reference. ops.py maps ATen ops onto these rows; the lowering (scalar_rules),
the verifier, the reference evaluator, both printers, the interpreter's libdevice, the
C++ prelude's libm declarations and the cost model read them. Nobody keeps a second list:
a new scalar op is one row here (and, for an ATen op to reach it, one line in ops.py).

Note on forms. A form is a str.format template over the arguments {0}, {1}, {2} and the
target's own fields (C++: {f}, the libm suffix, "" for double and "f" otherwise; {ct},
the operand's C type. Triton: {reg}, the operand's register type), with variants picked
by the operand dtype: float64 (`double`), integer (`integer`), bool (`boolean`). `marked`
holds C++ variants for statements the lowering marked (Stmt.value, e.g. transforms/signs.py's
non-positive exp). The operand dtype is the first argument's, or for a select (where)
the dtype of the values it selects; a row's `operands` says which operand dtypes it is
defined on (a printer asked for others raises, and the group runs through ATen).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional

import torch

# cost constants, in flop-equivalents per evaluation (an add is 1; a transcendental
# function costs what a vectorized libm call costs relative to an add)
ADD = 1.0
DIV = 4.0
SQRT = 4.0
TRANSCENDENTAL = 20.0
EXPENSIVE = 2 * TRANSCENDENTAL

# The C++ printer's conversions of 16-bit floats, per element, keyed by (statement op,
# dtype): float16 goes through integer and float arithmetic with selects both ways
# (cpp_prelude_lowp.h; about 0.2 ns per load and 0.5 per rounding and store on one
# AVX-512 core, where an add costs 0.08), bfloat16 is a shift to load and store and a
# short rounding (benchmarks/results/notes.md, "16-bit conversions in the cost model").
CONVERSION_COST = {("load", torch.float16): 3.0, ("cast", torch.float16): 4.0,
                   ("store", torch.float16): 4.0, ("load", torch.bfloat16): 0.5,
                   ("cast", torch.bfloat16): 2.0, ("store", torch.bfloat16): 0.5}

# Stmt.value of an exp whose argument cannot be positive (transforms/signs.py): C++ prints a
# cheaper exp for it
NONPOSITIVE = "nonpositive"
# Stmt.value of a cast to float16/bfloat16 of a value that type represents exactly
# (transforms/exact_casts.py): C++ keeps the float as it is instead of rounding it
EXACT = "exact"
# Stmt.value of a float libm call evaluated in double and rounded once (Config.libm=
# "accurate", transforms/rounded_libm.py): correctly rounded where libmvec's float kernels
# are 2-4 ulp off, at 2-6x the function's cost (benchmarks/results/notes/float32_libm.md)
ROUNDED = "rounded"

# operand domains
FLOAT = "float"          # floating operands (float16/bfloat16 compute in float32)
INTEGRAL = "integral"    # integer and bool operands
ANY = "any"

# result-dtype rules
SAME = "same"        # the operands' dtype (all operands share it)
BOOL = "bool"        # bool, from operands of one dtype (comparisons, predicates, logic)
SELECT = "select"    # where(cond, a, b): cond is bool, the result has a's and b's dtype


@dataclass(frozen=True)
class Form:
    """One op's expression in one target language (see the module note)."""
    floating: str
    double: Optional[str] = None       # float64 operands (None: as `floating`)
    integer: Optional[str] = None      # integer operands, and bool ones unless `boolean`
    boolean: Optional[str] = None      # bool operands (None: as `integer`)
    marked: tuple = ()                 # (mark, template) for non-double operands

    def template(self, dtype: torch.dtype, mark=None) -> str:
        """The template for operands of `dtype`."""
        if dtype is torch.float64:
            return self.double or self.floating
        if not dtype.is_floating_point:
            if dtype is torch.bool and self.boolean:
                return self.boolean
            if self.integer:
                return self.integer
        return dict(self.marked).get(mark, self.floating)


@dataclass(frozen=True)
class ScalarOp:
    name: str
    arity: int
    ref: Callable                      # reference semantics on torch tensors
    cpp: Form
    triton: Form
    flops: float = ADD                 # cheap flop-equivalents per evaluation
    transcendentals: int = 0           # exp-class evaluations per evaluation
    result: str = SAME                 # result-dtype rule: SAME, BOOL or SELECT
    operands: str = ANY                # operand domain: FLOAT, INTEGRAL or ANY
    libdevice: str = ""                # the libdevice function its Triton form calls
    libmvec: bool = False              # its C++ form calls brrr_libm_name[f], the
    #   prelude's libm/libmvec wrapper (declared `declare simd`: cpp_prelude.h)
    nonnegative: bool = False          # its result is never negative (NaN aside)
    domain: tuple = ()                 # libm: (lo, hi, inside[, below, above]): the result
    #   is `below` under lo and `above` over hi (NaN unless given); the prelude's vector
    #   clones keep those lanes from libmvec

    @property
    def cost(self) -> float:
        """Flop-equivalents of one evaluation (the cost model's unit)."""
        return self.flops + self.transcendentals * TRANSCENDENTAL

    def calls_libm(self, dtype: torch.dtype, mark=None) -> bool:
        """Its C++ form for operands of `dtype` calls the prelude's libm wrapper (float
        exp and erf are the prelude's own inline code)."""
        return self.libmvec and "brrr_libm_" in self.cpp.template(dtype, mark)

    def operand_dtype(self, arg_dtypes) -> torch.dtype:
        """The dtype that picks the op's form (and the result for SAME and SELECT)."""
        return arg_dtypes[1] if self.result == SELECT else arg_dtypes[0]

    def form_dtype(self, arg_dtypes, own: torch.dtype) -> torch.dtype:
        """The dtype whose form a statement of this op prints: its operands' (above),
        or the statement's `own` dtype where it has no tensor operands. Every printer
        and schedule query asks this one rule."""
        return self.operand_dtype(arg_dtypes) if arg_dtypes else own

    def accepts(self, dtype: torch.dtype) -> bool:
        """Is the op defined on operands of `dtype`?"""
        if self.operands == ANY:
            return True
        return dtype.is_floating_point == (self.operands == FLOAT)

    def result_dtype(self, arg_dtypes) -> Optional[torch.dtype]:
        """The result's dtype for operands of `arg_dtypes`; None if they break the rule
        or fall outside the op's domain."""
        if not self.accepts(self.operand_dtype(arg_dtypes)):
            return None
        if self.result == SELECT:
            ok = arg_dtypes[0] is torch.bool and arg_dtypes[1] == arg_dtypes[2]
            return arg_dtypes[1] if ok else None
        if any(d != arg_dtypes[0] for d in arg_dtypes):
            return None
        return torch.bool if self.result == BOOL else arg_dtypes[0]


TABLE: dict[str, ScalarOp] = {}


def _row(name, arity, ref, cpp, triton, **kw) -> None:
    cpp = cpp if isinstance(cpp, Form) else Form(cpp)
    triton = triton if isinstance(triton, Form) else Form(triton)
    TABLE[name] = ScalarOp(name, arity, ref, cpp, triton, **kw)


def _libm(name, arity=1, triton=None, transcendentals=1, libmvec=True, **kw) -> None:
    """A transcendental function of floats C++ takes from libm (vectorized by libmvec
    unless not `libmvec`) and Triton from triton.language (`triton`) or libdevice."""
    args = ", ".join(f"{{{i}}}" for i in range(arity))
    libdevice = "" if triton else name
    cpp = kw.pop("cpp", Form(f"brrr_libm_{name}{{f}}({args})",
                             marked=((ROUNDED, _rounded(name, arity)),)))
    _row(name, arity, getattr(torch, name), cpp,
         triton or f"libdevice.{name}({args})", flops=0, transcendentals=transcendentals,
         libdevice=libdevice, libmvec=libmvec, operands=FLOAT, **kw)


def _rounded(name: str, arity: int) -> str:
    """The C++ form of libm function `name` evaluated in double and rounded to {ct}."""
    wide = ", ".join(f"(double){{{i}}}" for i in range(arity))
    return f"(({{ct}})brrr_libm_{name}({wide}))"


def _infix(name, ref, cpp_op, triton_op=None, result=SAME, **kw) -> None:
    _row(name, 2, ref, f"({{0}} {cpp_op} {{1}})", f"{{0}} {triton_op or cpp_op} {{1}}",
         result=result, **kw)


def _floor_div(a, b):
    return torch.div(a, b, rounding_mode="floor")


# ---- transcendental functions (libm order: the C++ prelude declares them so) ----------
# domains: libmvec computes a lane outside one with the scalar function (the prelude's note)
_INF = float("inf")
_libm("exp", triton="tl.exp({0})", nonnegative=True, domain=(-745.2, 709.79, 0, 0, _INF),
      cpp=Form("brrr_expf({0})", double="brrr_libm_exp({0})",
               marked=((NONPOSITIVE, "brrr_expf_nonpos({0})"),)))
_libm("exp2", triton="tl.exp2({0})")
_libm("expm1")
_libm("log", triton="tl.log({0})", domain=(0, _INF, 1))
_libm("log1p", domain=(-1, _INF, 0))
_libm("log2", triton="tl.log2({0})", domain=(0, _INF, 1))
_libm("log10", domain=(0, _INF, 1))
_libm("sin", triton="tl.sin({0})")
_libm("cos", triton="tl.cos({0})")
_UNIT = (-1, 1, 0)
for _name, _dom in (("tan", ()), ("tanh", ()), ("sinh", ()), ("cosh", ()), ("asin", _UNIT),
                    ("acos", _UNIT), ("atan", ()), ("asinh", ()), ("acosh", (1, _INF, 2)),
                    ("atanh", _UNIT)):
    _libm(_name, domain=_dom)
_libm("erf", triton="tl.erf({0})", cpp=Form("brrr_erff({0})", double="brrr_libm_erf({0})",
                                            marked=((ROUNDED, _rounded("erf", 1)),)))
_libm("erfc")
_libm("pow", 2, transcendentals=2)
_libm("atan2", 2, transcendentals=2)
_libm("hypot", 2, transcendentals=2)
_row("sigmoid", 1, torch.sigmoid,
     Form("(({ct})1 / (({ct})1 + brrr_expf(-{0})))", double="(({ct})1 / (({ct})1 + brrr_libm_exp(-{0})))"),
     "1.0 / (1.0 + tl.exp(-{0}))", flops=DIV, transcendentals=1, nonnegative=True,
     operands=FLOAT)

# ---- arithmetic ----------------------------------------------------------------------
_row("add", 2, torch.add, "({0} + {1})", Form("{0} + {1}", boolean="{0} | {1}"))  # bool: or
_infix("sub", torch.sub, "-")
_row("mul", 2, torch.mul, "({0} * {1})", Form("{0} * {1}", boolean="{0} & {1}"))  # bool: and
_infix("truediv", torch.true_divide, "/", flops=DIV, operands=FLOAT)
_row("floordiv", 2, _floor_div, "brrr_floordiv({0}, {1})", "_brrr_floordiv({0}, {1})",
     flops=DIV + ADD, operands=FLOAT)
_row("neg", 1, torch.neg, "(-{0})", "-{0}")
_row("abs", 1, torch.abs, "brrr_abs({0})", "tl.abs({0})", nonnegative=True)
_row("reciprocal", 1, torch.reciprocal, "(({ct})1 / {0})", "1.0 / {0}", flops=DIV,
     operands=FLOAT)
_row("sqrt", 1, torch.sqrt, "__builtin_sqrt{f}({0})",
     Form("tl.sqrt_rn({0})", double="tl.sqrt({0})"), flops=SQRT, nonnegative=True,
     operands=FLOAT)
_row("rsqrt", 1, torch.rsqrt, "(({ct})1 / __builtin_sqrt{f}({0}))",
     Form("1.0 / tl.sqrt_rn({0})", double="1.0 / tl.sqrt({0})"), flops=SQRT + DIV,
     operands=FLOAT)
# NaN from either side; a tie (0.0 vs -0.0) keeps the first, as eager's clamp
_row("maximum", 2, torch.maximum, "brrr_maximum({0}, {1})",
     "tl.where(({0} != {0}) | ({0} >= {1}), {0}, {1})")
_row("minimum", 2, torch.minimum, "brrr_minimum({0}, {1})",
     "tl.where(({0} != {0}) | ({0} <= {1}), {0}, {1})")
# NaN only where both are: fmax/fmin take the other side of a NaN
_row("fmax", 2, torch.fmax, "brrr_fmax({0}, {1})",
     "tl.where({1} != {1}, {0}, tl.where(({0} != {0}) | ({0} < {1}), {1}, {0}))")
_row("fmin", 2, torch.fmin, "brrr_fmin({0}, {1})",
     "tl.where({1} != {1}, {0}, tl.where(({0} != {0}) | ({1} < {0}), {1}, {0}))")
_row("sign", 1, torch.sign, "brrr_sign({0})", "({0} > 0).to({reg}) - ({0} < 0).to({reg})",
     flops=2 * ADD)
# an integer is its own floor (a float round trip would lose int64's low bits)
_row("floor", 1, torch.floor, Form("__builtin_floor{f}({0})", integer="{0}"),
     Form("tl.floor({0})", integer="{0}"))
_row("ceil", 1, torch.ceil, Form("__builtin_ceil{f}({0})", integer="{0}"),
     Form("tl.ceil({0})", integer="{0}"))
_row("trunc", 1, torch.trunc, Form("__builtin_trunc{f}({0})", integer="{0}"),
     Form("libdevice.trunc({0})", integer="{0}"), libdevice="trunc")
_row("round", 1, torch.round, Form("__builtin_nearbyint{f}({0})", integer="{0}"),
     Form("libdevice.nearbyint({0})", integer="{0}"), libdevice="nearbyint")
_row("frac", 1, torch.frac, "({0} - __builtin_trunc{f}({0}))",
     "{0} - libdevice.trunc({0})", flops=2 * ADD, operands=FLOAT)
# C++'s brrr_fmod (and the helpers built on it) takes floats only
_row("fmod", 2, torch.fmod, "brrr_fmod({0}, {1})", "{0} % {1}", flops=0, transcendentals=1,
     operands=FLOAT)
_row("remainder", 2, torch.remainder, "brrr_remainder({0}, {1})",
     "_brrr_remainder({0}, {1})", flops=2 * DIV, operands=FLOAT)
_row("copysign", 2, torch.copysign, "__builtin_copysign{f}({0}, {1})",
     "libdevice.copysign({0}, {1})", libdevice="copysign", operands=FLOAT)

# ---- comparisons, predicates, logic, bits --------------------------------------------
# Two bools combined by |, ^, != or == stop gcc vectorizing the whole loop (libm calls and
# all) where one comes from a byte (a uint8 mask's `!= 0`) and the other from a float (a
# comparison, isnan): its vectorizer cannot pair masks of different element widths
# (gcc 12: "no vectype for stmt"). A select or an int compare of the two vectorizes.
# The generated-pattern kernel `where(mask, x - log1p(|x|), 0)`, `isnan(...) | mask` ran
# log1p once per element through a 16-lane libmvec call, ~10x its vectorized time.
BOOL_OR = "({0} ? true : {1})"
BOOL_XOR = "(({0} ? 1 : 0) != ({1} ? 1 : 0))"
for _name, _op in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"),
                   ("ge", ">=")):
    _boolean = {"eq": "(({0} ? 1 : 0) == ({1} ? 1 : 0))", "ne": BOOL_XOR}.get(_name)
    _row(_name, 2, getattr(torch, _name), Form(f"({{0}} {_op} {{1}})", boolean=_boolean),
         f"{{0}} {_op} {{1}}", result=BOOL)
_row("isnan", 1, torch.isnan, "({0} != {0})", "{0} != {0}", result=BOOL)
_row("isinf", 1, torch.isinf, "brrr_isinf({0})",
     Form('tl.abs({0}) == float("inf")', integer="{0} != {0}"), result=BOOL)
_row("isposinf", 1, torch.isposinf, Form("({0} == __builtin_inf{f}())", integer="({0} != {0})"),
     Form('{0} == float("inf")', integer="{0} != {0}"), result=BOOL)
_row("isneginf", 1, torch.isneginf, Form("({0} == -__builtin_inf{f}())", integer="({0} != {0})"),
     Form('{0} == float("-inf")', integer="{0} != {0}"), result=BOOL)
_row("signbit", 1, torch.signbit, "brrr_signbit({0})",
     Form("libdevice.signbit({0}) != 0", integer="{0} < 0"), result=BOOL, libdevice="signbit")
_infix("logical_and", torch.logical_and, "&&", triton_op="&", result=BOOL)
_row("logical_or", 2, torch.logical_or, Form("({0} || {1})", boolean=BOOL_OR), "{0} | {1}",
     result=BOOL)
_row("logical_xor", 2, torch.logical_xor, Form("({0} != {1})", boolean=BOOL_XOR), "{0} ^ {1}",
     result=BOOL)
_row("logical_not", 1, torch.logical_not, "(!{0})", "{0} == 0", result=BOOL)
_infix("bitwise_and", torch.bitwise_and, "&", operands=INTEGRAL)
_row("bitwise_or", 2, torch.bitwise_or, Form("({0} | {1})", boolean=BOOL_OR), "{0} | {1}",
     operands=INTEGRAL)
_row("bitwise_xor", 2, torch.bitwise_xor, Form("({0} ^ {1})", boolean=BOOL_XOR), "{0} ^ {1}",
     operands=INTEGRAL)
_row("bitwise_not", 1, torch.bitwise_not, "(~{0})", "~{0}", operands=INTEGRAL)
_row("where", 3, torch.where, "({0} ? {1} : {2})", "tl.where({0}, {1}, {2})", result=SELECT)


def _fma_ref(a, b, c):
    """a * b + c with the product unrounded (float64 holds a float32 product exactly)."""
    wide = [torch.as_tensor(v).double() for v in (a, b, c)]
    return (wide[0] * wide[1] + wide[2]).to(torch.as_tensor(a).dtype)


# Dynamo writes addcmul_/addcdiv_ with a value (every Adam step) as inductor's prims.fma:
# one rounding, as eager's vectorized CPU kernels compute them
_row("fma", 3, _fma_ref, "brrr_fma({0}, {1}, {2})", "tl.fma({0}, {1}, {2})", flops=ADD,
     operands=FLOAT)


def row(op: str) -> ScalarOp:
    """The row of scalar op `op`; KeyError naming it if the table has none."""
    if op not in TABLE:
        raise KeyError(f"unknown scalar op {op!r}")
    return TABLE[op]


def arity(op: str) -> int:
    return row(op).arity


def libm_declarations(source: str | None = None) -> str:
    """The prelude's wrappers (cpp_prelude.h's block) of the libm functions the C++ forms
    call, per type: those `source` calls (each brrr_libm_name[f] in it), or all."""
    called = None if source is None else set(re.findall(r"\bbrrr_libm_(\w+)\(", source))
    wrappers = [f"BRRR_LIBM_{kind}({r.arity}, {r.name}, ({_domain(r.domain)}))"
                for r in TABLE.values() if r.libmvec
                for kind, fn in (("FLOAT", r.name + "f"), ("DOUBLE", r.name))
                if called is None or fn in called]
    return "\n".join(" ".join(wrappers[i:i + 4]) for i in range(0, len(wrappers), 4))


def _domain(domain: tuple) -> str:
    """A row's domain as the prelude's clones take it: ", lo, hi, inside, below, above"
    (below and above NaN unless given), or nothing."""
    def literal(v: float) -> str:
        return {float("inf"): "__builtin_inf()", float("-inf"): "-__builtin_inf()"}.get(
            v, "__builtin_nan(\"\")" if v != v else repr(float(v)))
    full = tuple(domain) + (float("nan"),) * (5 - len(domain)) if domain else ()
    return "".join(f", {literal(float(v))}" for v in full)


def libdevice_functions() -> dict[str, ScalarOp]:
    """libdevice function name -> the row whose reference it computes."""
    return {r.libdevice: r for r in TABLE.values() if r.libdevice}
