"""Graph passes: a functional ATen FX graph in, an ATen FX graph out.

The contract. A pass is a plain function `(gm: GraphModule) -> GraphModule`; it may mutate
`gm` in place and return it. Its input is the graph AOTAutograd hands brrr: every node is a
placeholder, a `call_function` of a `torch._ops.OpOverload` (or `operator.getitem`), or the
output, and every value node carries `node.meta["val"]` (a FakeTensor, SymInt, int or a
tuple of them). Its output keeps that form: ATen targets, `meta["val"]` on every node, the
same inputs and the same values at the outputs, with the same strides (except outputs
that `gm.meta["layout_free_outputs"]` lists, whose layout only brrr's own backward sees),
and no output aliasing a graph input or another output that it did not alias before. A pass that changes representation (a plan,
kernel IR, text) is not a pass but a stage in `brrr_compiler`.

`PIPELINE` lists the passes in the order the driver runs them; `OPTIONAL` those it runs
only when the `passes` option names them; `PASSES` names both;
`run_pipeline` runs all of them or a chosen few, linting after each and recompiling the
module once at the end (a pass works on `gm.graph`, never on the generated code).
This package imports only torch and the standard library.
"""
import logging
from typing import Callable

from torch.fx import GraphModule

from .broadcast_reductions import broadcast_reductions
from .conv_channels_last import LAYOUT_FREE_OUTPUTS, conv_channels_last
from .cse import cse
from .dce import dce
from .fill_constants import fill_constants
from .full_reductions import full_reductions
from .linear_epilogues import linear_epilogues
from .mask_index_put import mask_index_put
from .remove_noops import remove_noops
from .scalar_reductions import scalar_reductions
from .short_inner_reductions import short_inner_reductions
from .unused_factors import unused_factors

Pass = Callable[[GraphModule], GraphModule]

PIPELINE: tuple[Pass, ...] = (conv_channels_last, scalar_reductions, remove_noops,
                              unused_factors, fill_constants, mask_index_put,
                              full_reductions, broadcast_reductions, short_inner_reductions,
                              cse, dce)
# Passes a user names in the `passes` option to run them; not in PIPELINE because
# measurements have not shown them faster here (linear_epilogues: the module note). Put
# linear_epilogues after cse: two copies of one linear layer merge first, and then the
# pre-activation has more users than its activation and is left as it is.
OPTIONAL: tuple[Pass, ...] = (linear_epilogues,)
PASSES: dict[str, Pass] = {p.__name__: p for p in PIPELINE + OPTIONAL}

# A child of the "brrr" logger that brrr_compiler.log configures.
logger = logging.getLogger("brrr.passes")


def _select(names: tuple[str, ...] | None) -> tuple[Pass, ...]:
    if names is None:
        return PIPELINE
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise ValueError(f"unknown pass(es) {unknown}; valid names: {sorted(PASSES)}")
    return tuple(PASSES[n] for n in names)


def run_pipeline(gm: GraphModule, names: tuple[str, ...] | None = None) -> GraphModule:
    """Run PIPELINE (or the named passes, in the given order) on `gm`, linting after each
    and recompiling once at the end."""
    for pass_ in _select(names):
        before = len(gm.graph.nodes)
        gm = pass_(gm)
        gm.graph.lint()
        logger.debug("pass %s: %d -> %d nodes", pass_.__name__, before, len(gm.graph.nodes))
    gm.recompile()
    return gm


__all__ = [
    "LAYOUT_FREE_OUTPUTS", "OPTIONAL", "PASSES", "PIPELINE", "Pass", "broadcast_reductions",
    "conv_channels_last", "cse", "dce", "fill_constants", "full_reductions", "linear_epilogues",
    "mask_index_put",
    "remove_noops", "run_pipeline", "scalar_reductions", "short_inner_reductions",
    "unused_factors",
]
