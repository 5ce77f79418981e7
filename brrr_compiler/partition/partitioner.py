"""The partitioner: groups fusible ATen nodes into kernels.

Note on the algorithm. Nodes are visited in topological order. Each fusible compute node
starts as its own group and then proposes a merge with the group of each producer it
reads, looking through chains of views (a transpose or expand between two pointwise
ops is index arithmetic, not a kernel boundary). Every proposal is first checked by the
legality rules (legality.py) and then, if legal, put to the fusion policy; both answers
are recorded as Decisions. Before the walk, views with several users are duplicated so
that each copy belongs to exactly one consumer (views.py): a view absorbed into one
kernel never forces a materialized copy for another. After the walk, the merges refused
as illegal are proposed once more (revisit), sibling reduction groups over the same
domain that read a common input are proposed for merging (horizontal.py), and, if the
policy says `recompute = True`, each value a group stores only for other groups is
offered to be computed again inside each of them (recompute.py). Finally each group
takes in the views it reads its inputs through, so kernels index the views' bases.
"""
from __future__ import annotations

import torch.fx

from brrr_compiler.partition import domains, legality
from brrr_compiler.partition.horizontal import merge_siblings
from brrr_compiler.partition.plan import Decision, FusionPlan, Group, describe
from brrr_compiler.partition.policy import FusionPolicy, MergeCandidate, ask
from brrr_compiler.partition.recompute import offer_recompute
from brrr_compiler.partition.views import duplicate_shared_views, reads_once, unit_stride


def _graph_outputs(gm) -> frozenset:
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return frozenset(out.all_input_nodes)


def _computing(members) -> frozenset:
    return frozenset(n for n in members if not legality.is_view(n))


class Walk:
    """State of one partitioning walk over a graph. The extensions (horizontal.py,
    recompute.py) read `group_of`, `order` and `graph_outputs`, and change the walk only
    through its methods: try_merge and record, and for a rewrite of the graph,
    copy_before, regroup and erase_unread."""

    def __init__(self, gm, policy: FusionPolicy, max_args: int, device, allow_across: bool):
        self.policy, self.max_args, self.graph = policy, max_args, gm.graph
        self.allow_across = allow_across
        self.order = {n: i for i, n in enumerate(gm.graph.nodes)}
        self.graph_outputs = _graph_outputs(gm)
        self.fusible = {n for n in gm.graph.nodes if legality.fusible(n, device)}
        self.group_of: dict = {}
        self.horizon = -1                   # order of the last grouped node
        self.decisions: list[Decision] = []
        self._decided: set = set()          # (producer, consumer, verdict, reason) recorded
        self.refused: list = []             # (consumer, groups) of illegal merges: revisit
        self.declined: list = []            # (consumer, groups) the policy declined: revisit
        self.rereads: set = set()           # producers revisit left to the recompute offers

    def _chainable(self, n) -> bool:
        """A fusible single-user view: index arithmetic that may join its user's kernel."""
        return n in self.fusible and legality.is_view(n) and len(n.users) == 1

    def views_up(self, n) -> tuple[list, object]:
        """(the chain of chainable views above `n`, the node it starts from)."""
        views = []
        while self._chainable(n):
            views.append(n)
            n = n.args[0]
        return views, n

    def views_down(self, n) -> tuple[list, object]:
        """(the chain of ungrouped chainable views from `n` down, the node it ends at)."""
        views = []
        while n not in self.group_of and self._chainable(n):
            views.append(n)
            n = next(iter(n.users))
        return views, n

    def producer_chain(self, arg):
        """Follow single-user fusible views up to a grouped producer: (producer, views)."""
        views, arg = self.views_up(arg)
        return (arg, views) if arg in self.group_of else (None, [])

    def visit(self, node) -> None:
        if node not in self.fusible or legality.is_view(node):
            return
        self.group_of[node] = {node}
        self.horizon = max(self.horizon, self.order[node])
        self.propose_to_producers(node)

    def propose_to_producers(self, node) -> None:
        """Propose merging `node`'s group with the group of each producer it reads."""
        for arg in node.all_input_nodes:
            producer, views = self.producer_chain(arg)
            if producer is None or self.group_of[producer] is self.group_of[node]:
                continue
            a, b = self.group_of[producer], self.group_of[node]
            merged = self.try_merge(a, b | set(views))
            if merged is None:
                self.refused.append((node, a, b))
            elif not merged:
                self.declined.append((arg, node, a, b))

    def revisit(self) -> None:
        """Propose once more the merges the walk refused as illegal: a cycle through a group
        that was still growing, or a value stored for readers that later joined one group
        (a max-pool's windows), may be gone now that the groups are complete. All the view
        chains between the two join; a merge whose views read the producer's values more
        than once on the whole (overlapping windows) would compute them again, so it is
        left to a policy that weighs recomputation (the recompute offers)."""
        refused, self.refused = self.refused, []
        for node, a_then, b_then in refused:
            for arg in node.all_input_nodes:
                producer, _ = self.producer_chain(arg)
                a, b = self.group_of.get(producer), self.group_of[node]
                if a is None or a is b or (a is a_then and b is b_then):
                    continue                     # merged since, or nothing changed
                chains = self.view_chains(a, b)
                stored = legality.stored_nodes(b, self.graph_outputs)
                once = reads_once(chains)
                if stored and once and unit_stride(chains, stored[0]):
                    self.try_merge(a, b.union(*chains.values()))
                elif stored and not once and unit_stride(chains, stored[0]):
                    # overlapping unit-stride reads (chained cats' slices): the recompute
                    # offers weigh them. Strided windows stay stored: a max-pool's 3x3
                    # windows over an NCHW batch norm recomputed ran 17x slower, the cost
                    # model predicting 0.66x (it does not price the strided window loops)
                    self.rereads.add(producer)

    def reconsider(self) -> None:
        """Ask the policy once more about the merges it declined while either side has
        grown since: a value priced on its own for each element of a two-node kernel (a
        layer norm's per-row scale, recomputed per element) may cost once per row in the
        larger kernel its reader joined. Groups that never grew get the same answer."""
        declined, self.declined = self.declined, []
        for arg, node, a_then, b_then in declined:
            producer, views = self.producer_chain(arg)
            a, b = self.group_of.get(producer), self.group_of[node]
            if a is None or a is b or (a is a_then and b is b_then):
                continue
            self.try_merge(a, b | set(views))

    def view_chains(self, a: set, b: set) -> dict:
        """{(member of a, its user): the chain of fusible single-user views from that
        member into b} (all of them must join, or a view left outside would read a value
        `a` no longer stores)."""
        found = {}
        for n in a:
            for u in n.users:
                chain, end = self.views_down(u)
                if chain and self.group_of.get(end) is b:
                    found[(n, u)] = chain
        return found

    def try_merge(self, a: set, b: set) -> bool | None:
        """True: merged; False: the policy declined; None: illegal."""
        reason = legality.check_merge(a, b, self.order, self.graph_outputs, self.max_args,
                                      self.group_of, self.horizon, self.allow_across)
        if reason is not None:
            self.record(a, b, False, reason)
            return None
        merged = a | b
        candidate = MergeCandidate(
            frozenset(a), frozenset(b), legality.stored_nodes(merged, self.graph_outputs),
            legality.external_inputs(merged), self.graph_outputs)
        verdict = ask(self.policy, candidate)
        self.record(a, b, verdict.accept, verdict.reason, verdict.metrics)
        if verdict.accept:
            self.regroup(merged)
        return verdict.accept

    def record(self, a: set, b: set, accept: bool, reason: str, metrics=None) -> None:
        """Record a decision once: the walk may ask again about the same two groups (through
        another chain of views, on the revisit) and get the same answer."""
        key = (_computing(a), _computing(b), accept, reason)
        if key not in self._decided:
            self._decided.add(key)
            self.decisions.append(Decision(describe(a), describe(b), accept, reason,
                                           dict(metrics or {})))

    def copy_before(self, nodes, before) -> dict:
        """{node: its copy} for fusible `nodes`, copied in graph order before node `before`
        (a copy reads the copies of the nodes it reads), each placed in the walk's order
        beside its original and fusible like it."""
        copies: dict = {}
        with self.graph.inserting_before(before):
            for n in sorted(nodes, key=self.order.__getitem__):
                args = torch.fx.map_arg((n.args, n.kwargs), lambda x: copies.get(x, x))
                copies[n] = self.graph.call_function(n.target, *args)
                copies[n].meta = dict(n.meta)
                self.order[copies[n]] = self.order[n]
                self.fusible.add(copies[n])
        return copies

    def regroup(self, members: set) -> None:
        """Make `members` one group."""
        for n in members:
            self.group_of[n] = members

    def erase_unread(self, group: set) -> None:
        """Erase from the graph, and from `group`, the members nobody reads any more."""
        for n in sorted(group, key=self.order.__getitem__, reverse=True):
            if not n.users and n not in self.graph_outputs:
                group.discard(n)
                del self.group_of[n]
                self.graph.erase_node(n)

    def unique_groups(self) -> list:
        return list({id(s): s for s in self.group_of.values()}.values())

    def absorb_input_views(self) -> None:
        """Take into each group the chains of views through which it reads its inputs (views
        of a graph input, of an ATen result or of another kernel's output): the kernel folds
        them into its index expressions, where the runner would make each view with an ATen
        call, and views of one base become one kernel argument."""
        for members in self.unique_groups():
            for n in legality.external_inputs(members):
                chain, _ = self.views_up(n)
                members.update(chain)
                self.group_of.update(dict.fromkeys(chain, members))

    def groups(self) -> list[Group]:
        unique = {id(s): s for s in self.group_of.values()}.values()
        ordered = sorted(unique, key=lambda s: min(self.order[n] for n in s))
        out = []
        for i, members in enumerate(ordered):
            stored = legality.stored_nodes(members, self.graph_outputs)
            if stored:
                out.append(group_of_members(i, members, stored, self.order))
        return out


def group_of_members(gid: int, members, stored, order: dict) -> Group:
    """The Group of kernel `gid` computing `members` and storing `stored` (nodes listed
    in graph `order`): its inputs, its domain and the reductions it folds across rows or
    columns (domains.py)."""
    nodes = sorted(members, key=order.__getitem__)
    stored = sorted(stored, key=order.__getitem__)
    inputs = sorted(legality.external_inputs(set(members)), key=order.__getitem__)
    domain, across, columns = domains.split_domain(set(members))
    if domain is None:
        domain = (legality.shape_of(stored[0]), ())
    return Group(gid, nodes, stored, inputs, *domain,
                 across=tuple(n for n in nodes if n in across),
                 columns=tuple(n for n in nodes if n in columns))


def partition(gm: torch.fx.GraphModule, policy: FusionPolicy, max_args: int = 48,
              device=legality.CPU, allow_across: bool = True) -> FusionPlan:
    """Group the nodes of `gm` fusible into kernels on `device` (the target's; see
    legality.fusible) (`gm` is mutated: shared views are duplicated). `allow_across`:
    the target folds reductions across rows (domains.py)."""
    duplicate_shared_views(gm)
    walk = Walk(gm, policy, max_args, device, allow_across)
    for node in gm.graph.nodes:
        walk.visit(node)
    walk.revisit()
    walk.reconsider()
    merge_siblings(walk)
    if getattr(policy, "recompute", False):
        offer_recompute(walk)
    walk.absorb_input_views()
    groups = walk.groups()
    return FusionPlan(gm, groups, walk.decisions, policy.name)
