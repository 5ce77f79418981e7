"""The partitioner: groups fusible ATen nodes into kernels.

Note on the algorithm. Nodes are visited in topological order. Each fusible compute node
starts as its own group and then proposes a merge with the group of each producer it
reads, looking through chains of views (a transpose or expand between two pointwise
ops is index arithmetic, not a kernel boundary). Every proposal is first checked by the
legality rules (legality.py) and then, if legal, put to the fusion policy; both answers
are recorded as Decisions. Before the walk, views with several users are duplicated so
that each copy belongs to exactly one consumer: a view absorbed into one kernel never
forces a materialized copy for another. After the walk, sibling reduction groups over
the same domain that read a common input are proposed for merging (horizontal fusion).
Last, if the policy says `recompute = True`, each value a group stores only for other
groups is offered to be computed again inside each of them from its own inputs (copies
of its pointwise nodes join each reader group); if accepted, the producer nodes nobody
reads any more are erased, and with them the write and the read-backs. Finally each
group takes in the views it reads its inputs through, so kernels index the views' bases.
"""
from __future__ import annotations

import sympy
import torch.fx

from brrr_compiler import ops
from brrr_compiler.partition import domains, legality
from brrr_compiler.partition.plan import Decision, FusionPlan, Group
from brrr_compiler.partition.policy import FusionPolicy, MergeCandidate


def duplicate_shared_views(gm: torch.fx.GraphModule) -> None:
    """Give every multi-user view node, and every constant (a fill that reads no tensor:
    CSE merges the zeros of several slice gradients), one private copy per user (last
    node first, so a view of a view that was just copied is copied for each of those
    copies too)."""
    for node in reversed(list(gm.graph.nodes)):
        if not (legality.is_view(node) or _constant(node)) or len(node.users) < 2:
            continue
        for user in list(node.users)[1:]:
            with gm.graph.inserting_after(node):
                dup = gm.graph.call_function(node.target, node.args, node.kwargs)
            dup.meta = dict(node.meta)
            user.replace_input_with(node, dup)
    gm.graph.lint()


def _constant(node) -> bool:
    return (node.op == "call_function" and not node.all_input_nodes
            and ops.kind_of(node) is ops.Kind.POINTWISE)


def _reads_once(chains: dict) -> bool:
    """Do the view chains read, in all, no more elements of each value than it has? (Equal
    chains, the copies duplicate_shared_views made, read the same elements.)"""
    read: dict = {}
    distinct = {(n, tuple((v.target, v.args[1:], tuple(v.kwargs.items())) for v in chain)): chain
                for (n, _), chain in chains.items()}
    for (n, _), chain in distinct.items():
        read[n] = read.get(n, 0) + legality.numel(chain[-1])
    spare = [sympy.expand(legality.numel(n) - total) for n, total in read.items()]
    return all(d.is_number and d >= 0 for d in spare)     # symbolic sizes: not known


def _unit_stride(chains: dict, out) -> bool:
    """Do the views step by one element along the dim `out` stores innermost? (A max-pool
    over NCHW steps by two there: computing the producer inside those strided window loops
    was measured 2x slower on the conv net than storing it and reading it back.)"""
    val = legality.tensor_val(out)
    dims = [d for d in range(val.dim()) if val.shape[d] != 1]
    if not dims:
        return True
    inner = min(dims, key=lambda d: val.stride()[d])
    return all(c[-1].meta["val"].dim() == val.dim() and c[-1].meta["val"].stride()[inner] == 1
               for c in chains.values())


def _graph_outputs(gm) -> frozenset:
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return frozenset(out.all_input_nodes)


def _describe(members) -> str:
    names = sorted((n.name for n in members), key=lambda name: (len(name), name))
    return "+".join(names[:3]) + ("+..." if len(names) > 3 else "")


class _Walk:
    """State of one partitioning walk over a graph."""

    def __init__(self, gm, policy: FusionPolicy, max_args: int, device, allow_across: bool):
        self.policy, self.max_args, self.graph = policy, max_args, gm.graph
        self.allow_across = allow_across
        self.order = {n: i for i, n in enumerate(gm.graph.nodes)}
        self.graph_outputs = _graph_outputs(gm)
        self.fusible = {n for n in gm.graph.nodes if legality.fusible(n, device)}
        self.group_of: dict = {}
        self.horizon = -1                   # order of the last grouped node
        self.decisions: list[Decision] = []
        self.refused: list = []             # (consumer, groups) of illegal merges: revisit

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
            if self.try_merge(a, b | set(views)) is None:
                self.refused.append((node, a, b))

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
                if stored and _reads_once(chains) and _unit_stride(chains, stored[0]):
                    self.try_merge(a, b.union(*chains.values()))

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
            self.decisions.append(Decision(_describe(a), _describe(b), False, reason))
            return None
        merged = a | b
        candidate = MergeCandidate(
            frozenset(a), frozenset(b), legality.stored_nodes(merged, self.graph_outputs),
            legality.external_inputs(merged), self.graph_outputs)
        verdict = self.policy.decide(candidate)
        self.decisions.append(Decision(_describe(a), _describe(b), verdict.accept,
                                       verdict.reason, dict(verdict.metrics)))
        if verdict.accept:
            for n in merged:
                self.group_of[n] = merged
        return verdict.accept

    def recompute(self) -> None:
        """Offer every value stored only for other groups to be computed in each of them."""
        for p in sorted(self.group_of, key=self.order.__getitem__):
            a = self.group_of.get(p)
            if a is None or p not in legality.stored_nodes(a, self.graph_outputs):
                continue
            readers = self.readers(p, a)
            if readers:
                self.try_recompute(p, a, readers)

    def readers(self, p, a: set) -> list | None:
        """The groups reading `p` from outside `a`, each with the views it reads p through;
        None if a graph output or anything but a group (through fusible views) reads it."""
        found: dict = {}
        for u in p.users:
            views, node = self.views_down(u)
            if node not in self.group_of:
                return None
            if self.group_of[node] is not a:
                found.setdefault(id(self.group_of[node]), [self.group_of[node], []])[1] += views
        return None if p in self.graph_outputs else [g | set(v) for g, v in found.values()]

    def try_recompute(self, p, a: set, readers: list) -> None:
        sub, todo = set(), [p]                       # p and its ancestors inside a
        while todo:
            n = todo.pop()
            if n in sub:
                continue
            if ops.kind_of(n) is ops.Kind.REDUCTION:
                return
            sub.add(n)
            todo += [x for x in n.all_input_nodes if x in a]
        if sub == a and len(readers) == 1 and not a & self.graph_outputs and \
                all(u in a or u in readers[0] for n in a for u in n.users):
            return                                   # the merge the walk already decided
        for r in readers:
            nargs = len(legality.external_inputs(sub | r)) + len(legality.stored_nodes(r, self.graph_outputs))
            if nargs > self.max_args:
                return
        union = set().union(*readers)
        verdict = self.policy.decide(MergeCandidate(
            frozenset(a), frozenset(union), legality.stored_nodes(union, self.graph_outputs),
            legality.external_inputs(sub | union), self.graph_outputs, frozenset(sub),
            tuple(frozenset(r) for r in readers)))
        self.decisions.append(Decision(_describe(sub), _describe(union), verdict.accept,
                                       f"recompute in {len(readers)} reader(s): {verdict.reason}",
                                       dict(verdict.metrics)))
        if verdict.accept:
            for r in readers:
                self.clone_into(sub, r, a)

    def clone_into(self, sub: set, b: set, a: set) -> None:
        """Copy `sub` into group `b` (its readers there read the copies); erase what in `a`
        nobody reads any more."""
        first = min((u for n in sub for u in n.users if u in b), key=self.order.__getitem__)
        copies: dict = {}
        with self.graph.inserting_before(first):
            for n in sorted(sub, key=self.order.__getitem__):
                copies[n] = self.graph.call_function(
                    n.target, *torch.fx.map_arg((n.args, n.kwargs), lambda x: copies.get(x, x)))
                copies[n].meta = dict(n.meta)
                self.order[copies[n]] = self.order[n]
                self.fusible.add(copies[n])
        for u in b:
            for n in set(u.all_input_nodes) & sub:
                u.replace_input_with(n, copies[n])
        merged = b | set(copies.values())
        for n in merged:
            self.group_of[n] = merged
        for n in sorted(a, key=self.order.__getitem__, reverse=True):
            if not n.users and n not in self.graph_outputs:
                a.discard(n)
                del self.group_of[n]
                self.graph.erase_node(n)

    def unique_groups(self) -> list:
        return list({id(s): s for s in self.group_of.values()}.values())

    def horizontal(self) -> None:
        """Merge sibling groups that read a common input into a reduction group over the
        same domain — another reduction (layer_norm backward's weight and bias gradients)
        or a pointwise group of the domain's full shape (cross-entropy's one-hot mask that
        training saves): one pass over the data, one kernel fewer."""
        unique = self.unique_groups()
        domain = {id(s): legality.reduction_domain(s) for s in unique}
        shape = {id(s): self._pointwise_shape(s) for s in unique if domain[id(s)] is None}
        readers: dict = {}           # input (seen through views) -> groups reading it
        for s in unique:
            for r in self._read_roots(s):
                readers.setdefault(r, []).append(s)
        position = {id(s): i for i, s in enumerate(unique)}
        for a in unique:
            da = domain[id(a)]
            if da is None or isinstance(da, str):
                continue
            siblings = {id(b): b for r in self._read_roots(a) for b in readers[r]
                        if (domain[id(b)] == da and position[id(b)] > position[id(a)])
                        or shape.get(id(b)) == da[0]}
            for b in sorted(siblings.values(), key=lambda g: position[id(g)]):
                a_now, b_now = self.group_of[next(iter(a))], self.group_of[next(iter(b))]
                if a_now is not b_now:
                    self.try_merge(a_now, b_now)

    @staticmethod
    def _read_roots(members: set) -> set:
        """The inputs a group reads, seen through the views computed outside it."""
        roots = set()
        for n in legality.external_inputs(members):
            while legality.is_view(n) and isinstance(n.args[0], torch.fx.Node):
                n = n.args[0]
            roots.add(n)
        return roots

    def _pointwise_shape(self, members: set) -> tuple | None:
        """The one shape a pointwise group stores, if it stores anything."""
        shapes = {legality.shape_of(n) for n in legality.stored_nodes(members, self.graph_outputs)}
        return next(iter(shapes)) if len(shapes) == 1 else None

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
            nodes = sorted(members, key=self.order.__getitem__)
            stored = sorted(legality.stored_nodes(members, self.graph_outputs),
                            key=self.order.__getitem__)
            if not stored:
                continue
            inputs = sorted(legality.external_inputs(members), key=self.order.__getitem__)
            domain, across = domains.split_domain(members)
            if domain is None:
                domain = (legality.shape_of(stored[0]), ())
            out.append(Group(i, nodes, stored, inputs, *domain,
                             across=tuple(n for n in nodes if n in across)))
        return out


def partition(gm: torch.fx.GraphModule, policy: FusionPolicy, max_args: int = 48,
              device=legality.CPU, allow_across: bool = True) -> FusionPlan:
    """Group the nodes of `gm` fusible into kernels on `device` (the target's; see
    legality.fusible) (`gm` is mutated: shared views are duplicated). `allow_across`:
    the target folds reductions across rows (domains.py)."""
    duplicate_shared_views(gm)
    walk = _Walk(gm, policy, max_args, device, allow_across)
    for node in gm.graph.nodes:
        walk.visit(node)
    walk.revisit()
    walk.horizontal()
    if getattr(policy, "recompute", False):
        walk.recompute()
    walk.absorb_input_views()
    groups = walk.groups()
    return FusionPlan(gm, groups, walk.decisions, policy.name)
