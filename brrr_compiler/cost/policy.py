"""CostPolicy ("cost"): fuse a legal merge when the cost model predicts it is faster.

It prices the kernels lowering would make, under the schedules their target would
choose (a counter the driver hands it: brrr_compiler/lowered_count.py). For a merge of a
producer group into a consumer group it predicts both kernels as they stand (the
producer stores what the consumer reads, the consumer reads it back) against the merged
kernel, and accepts when the merged kernel is faster; a merged group that would not
lower is refused (its ops would run through ATen). For a recompute offer
(candidate.recompute: the producer nodes the consumer would compute again from their
own inputs, the producer group keeping its kernel for its other readers) it compares
the two groups before and after. Kernels that would grow past what the C++ printer
handles well, too many input streams or too many values live at once, are refused
before any estimate. Every verdict carries predicted unfused and fused time, the bytes
saved and the change in compute, memory and overhead, so `explain` and the logs say why
in those three terms.

A legal merge whose unfused side would store an intermediate larger than MEMORY_SHARE of
the machine's memory is taken whatever the estimate: that plan cannot run. torch's
multilabel_margin_loss decomposes through (C, C) values, which the fused kernel folds as
it goes; at C = 500000 the estimate preferred storing them (1 TB) and the call died on
the allocation, where eager runs (slowly).
"""
from __future__ import annotations

from typing import Any, Callable

from brrr_compiler.cost.device import DeviceSpec, generic_cpu
from brrr_compiler.cost.estimate import Estimate, predict
from brrr_compiler.cost.stats import CostModelError, KernelNotLowered, KernelStats
from brrr_compiler.machine import memory_bytes
from brrr_compiler.partition import legality
from brrr_compiler.partition.policy import (FusionPolicy, GreedyPolicy, MergeCandidate,
                                            NoFusionPolicy, Verdict)

MAX_INPUTS = 32     # input buffers of one kernel: each is a stream for the prefetchers
MAX_LIVE = 64       # values live at once in the loop body: past this gcc spills heavily
MEMORY_SHARE = 0.25  # of the machine's memory, an intermediate no plan may store (module note)


def _topo(members) -> list:
    """`members` in a topological order (ties by name, so the order is deterministic)."""
    members = set(members)
    waiting = {n: sum(1 for a in set(n.all_input_nodes) if a in members) for n in members}
    ready = sorted((n for n, k in waiting.items() if k == 0), key=lambda n: n.name, reverse=True)
    out = []
    while ready:
        n = ready.pop()
        out.append(n)
        for u in sorted(set(n.users) & members, key=lambda n: n.name, reverse=True):
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    return out


def live_values(members) -> int:
    """Most member values live at once, in a topological order of the group (views are
    index arithmetic: a value read through a view lives until the view's readers)."""
    order = _topo(members)
    pos = {n: i for i, n in enumerate(order)}
    end: dict = {}
    for n in reversed(order):
        end[n] = max([end[u] if legality.is_view(u) else pos[u] for u in n.users if u in pos],
                     default=pos[n])
    events = sorted(e for n in order if not legality.is_view(n)
                    for e in ((pos[n], 1), (end[n], -1)) if pos[n] < end[n])
    live = peak = 0
    for _, step in events:
        live += step
        peak = max(peak, live)
    return peak


# count(members, stored nodes) -> what the kernel lowering would make for them computes
# and moves, under the schedule its target would choose (the driver's LoweredCount,
# brrr_compiler/lowered_count.py); CostModelError when there is no number
Count = Callable[[set, list], KernelStats]


class CostPolicy:
    name = "cost"
    recompute = True        # the partitioner may offer to recompute producers in consumers

    def __init__(self, device: DeviceSpec | None = None, count: Count | None = None,
                 max_inputs: int = MAX_INPUTS, max_live: int = MAX_LIVE, strict: bool = False):
        if not callable(count):
            raise TypeError("brrr: CostPolicy counts the kernels lowering would make and needs "
                            "a counter; build it with brrr_compiler.cost_policy(device)")
        self.device, self.count = device or generic_cpu(), count
        self.max_inputs, self.max_live, self.strict = max_inputs, max_live, strict

    def kernel(self, members, graph_outputs, outputs=None) -> Estimate | None:
        """The predicted kernel for `members` (None: it would store nothing, so no kernel)."""
        stats = self.stats(members, graph_outputs, outputs)
        return None if stats is None else predict(stats, self.device)

    def stats(self, members, graph_outputs, outputs=None) -> KernelStats | None:
        members = set(members)
        if outputs is None:
            outputs = legality.stored_nodes(members, graph_outputs)
        if not outputs:
            return None
        return self.count(members, outputs)

    def side(self, kernels, graph_outputs) -> list:
        """Estimates of `kernels` ((members, stored) pairs) run back to back: each at the
        cache hit fraction of their bytes together (estimate.py's note)."""
        stats = [self.stats(m, graph_outputs, o) for m, o in kernels]
        together = sum(s.bytes for s in stats if s is not None)
        return [None if s is None else predict(s, self.device, together) for s in stats]

    def decide(self, c: MergeCandidate) -> Verdict:
        refusal = self.limits(c)
        if refusal:
            return Verdict(False, refusal)
        go = c.graph_outputs
        sides, before = kernel_sides(c), None
        try:
            before = self.side(sides[0], go)
            after = self.side(sides[1], go)
        except KernelNotLowered as err:
            if before is not None:     # the group would run through ATen: keep the kernels
                return Verdict(False, f"{'not recomputed' if c.recompute else 'not fused'}: {err}")
            return self.no_estimate(err)
        except CostModelError as err:
            return self.no_estimate(err)
        return verdict(before, after, bool(c.recompute))

    def no_estimate(self, err: CostModelError) -> Verdict:
        if self.strict:
            raise err
        return Verdict(True, f"no estimate ({err}); fused because it is legal")

    def limits(self, c: MergeCandidate) -> str | None:
        """Why the kernel(s) the candidate makes would be too big for the C++ printer."""
        kernels = [set(c.recompute) | set(r) for r in c.readers or (c.consumer,)] \
            if c.recompute else [set(c.producer) | set(c.consumer)]
        for members in kernels:
            n_in = len(legality.external_inputs(members))
            if n_in > self.max_inputs:
                return f"too big: a kernel would read {n_in} buffers (max_inputs={self.max_inputs})"
            live = live_values(members)
            if live > self.max_live:
                return f"too big: {live} values live at once in a kernel (max_live={self.max_live})"
        return None

    def predict(self, c: MergeCandidate) -> tuple[list, list]:
        """(kernels before, kernels after) the merge or recompute, as Estimates."""
        before, after = kernel_sides(c)
        return self.side(before, c.graph_outputs), self.side(after, c.graph_outputs)


class LoweredGreedyPolicy(GreedyPolicy):
    """"greedy" with the driver's counter: every legal merge whose kernel lowers. Partition
    legality allows merges whose kernel lowering refuses (a reduced value read at an index
    other than its own kept one: "a reduced dim moved"); taken, the whole group ran
    through ATen at eager's speed (5 of 200 generated patterns at the L1 size). The
    counter lowers each candidate once, as the cost policy's does."""

    def __init__(self, count: Count):
        self.count = count

    def decide(self, c: MergeCandidate) -> Verdict:
        for members, stored in kernel_sides(c)[1]:
            try:
                self.count(members, stored)
            except KernelNotLowered as err:
                return Verdict(False, f"not fused: {err}")
            except CostModelError:      # the model cannot price it; lowering may still take it
                pass
        return super().decide(c)


def kernel_sides(c: MergeCandidate) -> tuple[list, list]:
    """The kernels before and after the merge or recompute `c` would make, each as
    (member nodes, nodes it stores), in the order they run; a kernel that would store
    nothing is left out."""
    go, a = c.graph_outputs, set(c.producer)
    if not c.recompute:
        b = set(c.consumer)
        before = [(a, legality.stored_nodes(a, go)), (b, legality.stored_nodes(b, go))]
        return before, [(a | b, list(c.merged_outputs))]
    readers = [set(r) for r in c.readers or (c.consumer,)]
    union = set().union(*readers)
    kept = [n for n in a if n in go or any(u not in a and u not in union for u in n.users)]
    before = [(m, legality.stored_nodes(m, go)) for m in [a, *readers]]
    after = [(a, kept)] + [(r | set(c.recompute), legality.stored_nodes(r, go)) for r in readers]
    return [s for s in before if s[1]], [s for s in after if s[1]]


def _sum(kernels, attr: str) -> float:
    return sum(getattr(k, attr) for k in kernels if k is not None)


def verdict(before: list, after: list, recompute: bool) -> Verdict:
    """Accept when `after` is predicted faster; say why in compute/memory/overhead terms."""
    t0, t1 = _sum(before, "total_s"), _sum(after, "total_s")
    saved = int(_sum(before, "bytes") - _sum(after, "bytes"))
    main = next((k for k in reversed(after) if k is not None), None)
    metrics = {"unfused_us": round(t0 * 1e6, 3), "fused_us": round(t1 * 1e6, 3),
               "bytes_saved": saved, "bound": main.bound if main else "none"}
    deltas = [(k, (_sum(after, k + "_s") - _sum(before, k + "_s")) * 1e6)
              for k in ("compute", "memory", "overhead")]
    why = ", ".join(f"{k} {d:+.3g} us" for k, d in deltas if abs(d) >= 5e-4) or "no change"
    what, other = ("recomputing", "materialized") if recompute else ("fused", "unfused")
    faster = t1 < t0
    stored = saved // 2           # the intermediate: written once, read back once
    if not faster and stored > MEMORY_SHARE * memory_bytes():
        return Verdict(True, f"{what}: {other}, it would store {stored / 2**30:.3g} GiB, more "
                             f"than {MEMORY_SHARE:.0%} of this machine's memory", metrics)
    return Verdict(faster, f"{what} {'faster' if faster else 'not faster'}: {t1 * 1e6:.3g} us "
                           f"vs {t0 * 1e6:.3g} us {other} ({why})", metrics)


def policy_from_option(fusion: Any, device=None, count: Count | None = None) -> FusionPolicy:
    """The policy named by options["fusion"] ("cost" predicts on `device`, a DeviceSpec,
    what `count` says each kernel computes and moves), or the user's own policy object."""
    if isinstance(fusion, str):
        table = {"cost": lambda: CostPolicy(device, count),
                 "greedy": lambda: LoweredGreedyPolicy(count) if count else GreedyPolicy(),
                 "none": NoFusionPolicy}
        if fusion not in table:
            raise ValueError(f"brrr: unknown fusion policy {fusion!r}; expected one of {sorted(table)}")
        return table[fusion]()
    if not callable(getattr(fusion, "decide", None)) or not hasattr(fusion, "name"):
        raise TypeError("brrr: a fusion policy object needs a `name` and a "
                        "`decide(candidate) -> Verdict` method")
    return fusion
