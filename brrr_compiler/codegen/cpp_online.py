"""Which row kernels fold a row's max and its sum of exp(x - max) in one sweep.

Note on the single sweep. Cross-entropy and log_softmax walk each row twice before their
last phase: once for the max m, once for the sum of exp(x - m). The first walk streams
the row from memory and the second re-reads it from cache and is bound by the exp, so
memory idles during the second walk and the core during the first. Folding both in one
walk, chunk by chunk (max of the chunk, then its exps while the chunk is in L1), keeps
the hardware prefetcher streaming while the exps run; when a chunk raises the running
max, the sum so far is rescaled by exp(old max - new max) (in double, once per such
chunk, and not while the sum is still 0: a row's first chunk, or a whole short row, would
call exp for nothing, a scalar call that cost a log_softmax over rows of 10 a sixth of
its time). On a cross_entropy over 1 GB of logits the single walk takes about as long as
a walk that only reads the rows: the exps hide under the memory traffic
(benchmarks/results/notes.md, "One walk for max and sum of exps").

The schedule stage picks the pair (schedule/online.py: CppSchedule.online). It applies
to two consecutive loop phases when the first folds exactly one reduction, a
float max m of some value a, and the second folds exactly one, a sum of exp(a - m)
(transforms/signs.py has marked that exp non-positive, which checks that the minuend is a),
reads m nowhere else and stores nothing (a stored exp(a - m) would use a running max).
Scratch rows and the other phases are untouched. The result matches the two walks, up to
the rounding of the rescaling: NaN anywhere in the row gives a NaN sum, and rows whose
values are all -inf give NaN, as x - m = -inf - -inf does there; chunks whose values are
all -inf so far add nothing, as exp(-inf - m) adds 0.
"""
from __future__ import annotations

from brrr_compiler.codegen.cpp_accumulators import CHUNK
from brrr_compiler.codegen.cpp_static_row import whole_row, whole_row_walk
from brrr_compiler.schedule.online import OnlinePair


def online_walk(printer, pair: OnlinePair, indent: str) -> list[str]:
    """A row's max and sum of exp(x - max) in one walk (the module note), printed with
    the row printer's segments and chunks (cpp_reduce.ReductionPrinter)."""
    acc = printer.acc
    mx, sm = pair.max_, pair.sum_
    ct, st = printer.ctype[mx.dtype], acc.total_ctype(sm) or printer.ctype[sm.dtype]
    lines = acc.decls(mx, indent, "acc_", "nan_", "ai_") + acc.decls(sm, indent, "acc_", "nan_", "ai_")
    extent = whole_row(printer, pair.first, [mx], CHUNK, "0", "n_red", False)
    if extent is not None:     # one segment: the two walks, each a static row's
        lines += whole_row_walk(printer, pair.first, [mx], indent, extent, False)
        lines += [f"{indent}if (acc_{mx.out} != -({ct})__builtin_inf()) {{   // all -inf: adds 0",
                  f"{indent}  const {ct} {mx.out} = acc_{mx.out};"]
        lines += whole_row_walk(printer, pair.second, [sm], indent + "  ", extent, False)
        return lines + [f"{indent}}}"] + _finish(printer, mx, sm, ct, indent)
    inner, m, head = printer.segment_head(indent, "0", "n_red")
    body = indent + "  "
    lines += head + acc.decls(mx, body, "c_", "cn_", "ci_", lanes=True)
    lines += printer.chunk(pair.first, [mx], body, inner, m, fold=False)
    lines += [f"{body}nan_{mx.out} |= cn_{mx.out};", f"{body}if (c_{mx.out} > acc_{mx.out}) {{",
              f"{body}  if (acc_{sm.out} != 0)   // nothing to rescale yet (a row's first chunk)",
              f"{body}    acc_{sm.out} *= ({st})brrr_libm_exp((double)acc_{mx.out} - (double)c_{mx.out});",
              f"{body}  acc_{mx.out} = c_{mx.out};", f"{body}}}",
              f"{body}if (acc_{mx.out} != -({ct})__builtin_inf()) {{   // all -inf so far: adds 0",
              f"{body}  const {ct} {mx.out} = acc_{mx.out};"]
    if not printer.in_lanes(pair.second):   # a block of lanes declares its own
        lines += acc.decls(sm, body + "  ", "c_", "cn_", "ci_", lanes=True)
    lines += printer.chunk(pair.second, [sm], body + "  ", inner, m)
    lines += [f"{body}}}", f"{body}cb = ce;", f"{indent}}}"]
    return lines + _finish(printer, mx, sm, ct, indent)


def _finish(printer, mx, sm, ct: str, indent: str) -> list[str]:
    """The row's max, and its sum: NaN where the max is NaN or every value -inf."""
    nan = f"(nan_{mx.out} || acc_{mx.out} == -({ct})__builtin_inf()) && n_red > 0"
    sct = printer.ctype[sm.dtype]
    return [indent + printer.acc.finish(mx),
            f"{indent}const {sct} {sm.out} = {nan} ? ({sct})__builtin_nan(\"\") : ({sct})acc_{sm.out};"]

