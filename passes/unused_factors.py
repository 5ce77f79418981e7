"""Factorizations asked for factors no node reads compute only what is read.

`torch.linalg.cond`, `matrix_norm(ord="nuc")`, `matrix_rank` and `svdvals` need only the
singular values, and `eigvalsh` only the eigenvalues, but traced under AOTAutograd they
reach the graph as `_linalg_svd(A, compute_uv=True)` and `_linalg_eigh(A,
compute_v=True)`: the composite asks for the factors whenever its input is a tensor
subclass (the FakeTensors it is traced with), in case a gradient needs them. Where no
node reads U and Vh (or the eigenvectors), the call asks for none: eager's own choice.
bench_sweep's cond of a (200000, 5) matrix ran 0.51x eager computing U.

Safety: only a call whose factor outputs have no reader in the graph (a training forward
that saves them for its backward reads them at its output), and the new call's
FakeTensors are computed in the graph's fake mode; the values read keep their node.
"""
import operator

import torch
from torch.fx import GraphModule

from ._fake import fake_call

aten = torch.ops.aten

# op -> (position of the flag asking for the factors, its default, the factor outputs)
_FACTORS = {
    aten._linalg_svd.default: (2, True, (0, 2)),     # (A, full_matrices, compute_uv)
    aten._linalg_eigh.default: (2, True, (1,)),      # (A, UPLO, compute_v)
}
_FLAG_NAMES = {aten._linalg_svd.default: "compute_uv", aten._linalg_eigh.default: "compute_v"}


def unused_factors(gm: GraphModule) -> GraphModule:
    """Clear the factor flag of each factorization whose factors nothing reads."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _FACTORS or not _asks(node):
            continue
        pos, _, factors = _FACTORS[node.target]
        readers = [u for u in node.users if u.target is not operator.getitem or u.users]
        if any(u.target is not operator.getitem for u in readers) or \
                any(u.args[1] in factors for u in readers):
            continue
        args = list(node.args) + [None] * (pos + 1 - len(node.args))
        if node.target is aten._linalg_eigh.default and args[1] is None:
            args[1] = "L"
        if node.target is aten._linalg_svd.default and args[1] is None:
            args[1] = False
        args[pos] = False
        kwargs = {k: v for k, v in node.kwargs.items() if k != _FLAG_NAMES[node.target]}
        with gm.graph.inserting_before(node):
            new = fake_call(gm, node.target, tuple(args), kwargs)
        for u in list(node.users):
            if u.users:
                u.meta["val"] = new.meta["val"][u.args[1]]
            else:
                gm.graph.erase_node(u)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
    return gm


def _asks(node) -> bool:
    """The call asks for its factors (its flag, given or by default, is set)."""
    pos, default, _ = _FACTORS[node.target]
    if len(node.args) > pos:
        return bool(node.args[pos])
    return bool(node.kwargs.get(_FLAG_NAMES[node.target], default))
