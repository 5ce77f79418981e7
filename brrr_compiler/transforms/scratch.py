"""Where a row kernel's scratch rows live: in the output row, when one fits.

A scratch row (kernel.scratch) keeps an expensive per-element value between loop phases
(softmax's exp: stored while summing, re-read when dividing). By default it is a private
malloc'd row that never leaves the cache, so the output is written only in the last
phase, as pure memory traffic after the compute. When an output of the same dtype is
stored exactly once, in a loop phase no earlier than every read of the scratch, and at
the same position of the row, the scratch can live in that output row instead: the
value goes straight to the output while the phase computes (its memory traffic overlaps
the compute), and the last phase rewrites it in place from cache. ATen's softmax does
the same. The schedule stage chooses the holders (CppSchedule.scratch_rows); the C++
printer moves the rows when it prints, the lowered kernel keeps its scratch buffers.
"""
from __future__ import annotations

import dataclasses

import sympy

from brrr_compiler.kernel_ir import Kernel, Stmt


def scratch_holders(k: Kernel) -> tuple[tuple[str, str], ...]:
    """(scratch, output) for every scratch row an output row can hold (the module note)."""
    taken: set[str] = set()
    moves = []
    for b in k.scratch:
        store = _holder(k, b, taken)
        if store is not None:
            moves.append((b.name, store.buffer))
            taken.add(store.buffer)
    return tuple(moves)


def rows_in_outputs(k: Kernel, holders: tuple[tuple[str, str], ...]) -> Kernel:
    """`k` with each scratch row of `holders` moved into its output row (scratch_holders)."""
    if not holders:
        return k
    stores = {s.buffer: s for s in k.body if s.op == "store"}
    moves = {name: stores[out] for name, out in holders}
    phases = [dataclasses.replace(p, body=[_redirect(s, moves) for s in p.body])
              for p in k.phases]
    return dataclasses.replace(k, phases=phases,
                               scratch=[b for b in k.scratch if b.name not in moves])


def _accesses(k: Kernel, name: str) -> list[tuple[int, Stmt]]:
    return [(i, s) for i, p in enumerate(k.phases) for s in p.body
            if s.op in ("load", "store") and s.buffer == name]


def _holder(k: Kernel, scratch, taken: set[str]) -> Stmt | None:
    uses = _accesses(k, scratch.name)
    first = min(i for i, s in uses if s.op == "store")
    last_read = max((i for i, s in uses if s.op == "load"), default=first)
    row_index = next(s.index for _, s in uses)
    red = set(k.reduction_vars)
    for out in k.outputs:
        if out.dtype != scratch.dtype or out.name in taken:
            continue
        acc = _accesses(k, out.name)
        if len(acc) != 1 or acc[0][1].op != "store":
            continue
        phase, store = acc[0]
        if not k.phases[phase].per_row_loop or phase <= first or phase < last_read:
            continue
        body = k.phases[phase].body
        if any(s.op == "load" and body.index(s) > body.index(store) for i, s in uses if i == phase):
            continue              # read after the output is overwritten in the same element
        if not (sympy.expand(store.index - row_index).free_symbols & red):
            return store
    return None


def _redirect(s: Stmt, moves: dict[str, Stmt]) -> Stmt:
    if s.op in ("load", "store") and s.buffer in moves:
        holder = moves[s.buffer]
        return dataclasses.replace(s, buffer=holder.buffer, index=holder.index)
    return s
