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
from torch.fx.operator_schemas import normalize_function

from ._fake import fake_call

aten = torch.ops.aten

# op -> (the argument asking for the factors, the outputs that are factors)
_FACTORS = {
    aten._linalg_svd.default: ("compute_uv", (0, 2)),     # U, S, Vh
    aten._linalg_eigh.default: ("compute_v", (1,)),       # eigenvalues, eigenvectors
}


def unused_factors(gm: GraphModule) -> GraphModule:
    """Clear the factor flag of each factorization whose factors nothing reads."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _FACTORS:
            continue
        flag, factors = _FACTORS[node.target]
        kwargs = normalize_function(node.target, node.args, node.kwargs,
                                    normalize_to_only_use_kwargs=True).kwargs
        readers = [u for u in node.users if u.target is not operator.getitem or u.users]
        if not kwargs[flag] or any(u.target is not operator.getitem or u.args[1] in factors
                                   for u in readers):
            continue
        kwargs[flag] = False
        schema = node.target._schema.arguments             # called as the schema orders them
        args = tuple(kwargs.pop(a.name) for a in schema if not a.kwarg_only)
        with gm.graph.inserting_before(node):
            new = fake_call(gm, node.target, args, kwargs)
        for u in list(node.users):
            if u.users:
                u.meta["val"] = new.meta["val"][u.args[1]]
            else:
                gm.graph.erase_node(u)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
    return gm
