"""Dead-code elimination: erase pure nodes whose results nobody uses.

Nodes are visited from the last to the first, so a chain of dead nodes goes in one sweep.
Only pure nodes (see `passes._purity`) are candidates: placeholders, the output, getattrs,
mutations, random ops and side-effecting calls stay even when unused.
"""
from torch.fx import GraphModule

from ._purity import is_pure


def dce(gm: GraphModule) -> GraphModule:
    """Erase every unused pure node."""
    for node in reversed(list(gm.graph.nodes)):
        if not node.users and is_pure(node):
            gm.graph.erase_node(node)
    return gm
