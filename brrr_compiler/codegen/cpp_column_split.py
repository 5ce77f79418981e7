"""A reduction over outer dims with fewer tiles of columns than threads: the threads
share the rows (schedule/columns.py `_rows_shared` decides).

The columns schedule hands each thread whole tiles; with one tile (the 64 channels of a
channels-last batch norm's statistics over 25088 rows) one thread walked every row and
the others idled. Here every thread takes every tile, and each walk of a tile's rows is
shared: a thread walks its contiguous share of the rows. A walk that folds leaves each
thread's totals in a partial tile of its own (malloc'd: threads x tiles x columns per
fold); after a barrier every thread combines all the partials in thread order (so the
result does not depend on timing) into its own copy of the tile's results, which the
phases after it read: a normalizing walk stores its share of the rows, a scalar phase
computes the tile's values in each thread, and one thread stores them.
"""
from __future__ import annotations


def shared_rows(printer) -> list[str]:
    """The loops of `printer`'s kernel (cpp_outer_reduce.OuterReductionPrinter, after its
    sizes and work items are declared) with the rows split across the threads."""
    k, nt, tile = printer.k, printer.threads, printer.tile
    span = f"nwork * {tile}"
    reds = [s for p in k.phases if p.loop for s in p.body if s.op == "reduce"]
    lines = []
    for r in reds:
        ct = printer.acc.total_ctype(r) or printer.ctype[r.dtype]
        lines += [f"  {ct}* sp_{r.out} = ({ct}*)malloc({nt} * {span} * sizeof({ct}));"]
    lines += [f"  #pragma omp parallel num_threads({nt})", "  {",
              "    const int64_t tid = omp_get_thread_num(), nth = omp_get_num_threads();",
              "    const int64_t per = (n_red + nth - 1) / nth;",
              "    const int64_t r_lo = brrr_min_i64(tid * per, n_red), "
              "r_hi = brrr_min_i64(r_lo + per, n_red);",
              "    for (int64_t w = 0; w < nwork; ++w) {"]
    lines += printer.work_item("      ")
    for p in k.phases:
        lines += _shared_walk(printer, p, span) if p.loop else _scalar(printer, p)
    return lines + ["    }", "  }"] + [f"  free(sp_{r.out});" for r in reds]


def _shared_walk(printer, phase, span: str) -> list[str]:
    """This thread's share of a walk; its folds through the partials to every thread."""
    reds = [s for s in phase.body if s.op == "reduce"]
    ind, tile = "      ", printer.tile
    lines = printer.loop_phase(phase, ind, "r_lo", "r_hi", final=False)
    if not reds:
        return lines
    at = f"w * {tile} + b"
    lines += printer.tile_loop(ind, [f"sp_{r.out}[tid * {span} + {at}] = acc_{r.out}[b];"
                                      for r in reds])
    lines += [f"{ind}#pragma omp barrier"]
    lines += printer.tile_loop(ind, [ln for r in reds for ln in printer.reset_total(r)]
                                + ["for (int64_t t = 0; t < nth; ++t) {"]
                                + [f"  {printer.fold_line(r, f'sp_{r.out}[t * {span} + {at}]')}"
                                   for r in reds] + ["}"])
    return lines + printer.tile_loop(ind, [printer.final_line(r) for r in reds])


def _scalar(printer, phase) -> list[str]:
    """A scalar phase in every thread; its stores (the same values) from one."""
    stores = [s for s in phase.body if s.op == "store"]
    rest = [s for s in phase.body if s.op != "store"]
    lines = printer.tile_loop("      ", [printer.stmt(s) for s in rest]) if rest else []
    if stores:
        lines += ["      if (tid == 0) {"]
        lines += printer.tile_loop("        ", [printer.stmt(s) for s in stores])
        lines += ["      }"]
    return lines
