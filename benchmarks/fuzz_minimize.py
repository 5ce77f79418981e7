"""`fuzz.py --seed N --minimize`: the failing pattern with every statement and output
dropped that it can lose and still fail under brrr (eager still running it): the
smallest repro a greedy pass finds, printed as a script like any pattern."""
from __future__ import annotations

import dataclasses
import warnings


def _eager_runs(p) -> bool:
    from tests.helpers import _gradients, clone_input
    try:
        f, inputs = p.build()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f(*[clone_input(x) for x in inputs])
            if p.requires_grad:
                _gradients(out, [x for x in inputs if x.requires_grad], [])
    except Exception:  # noqa: BLE001  (a statement lost its operand: not a candidate)
        return False
    return True


def minimize(p, run):
    """Greedy: drop outputs, then statements (last first), while brrr still fails the
    same way (same stage: output, mutated input, gradient, or a crash)."""
    first = run(p, None, None)
    if first["status"] == "pass":
        return p                        # nothing to shrink

    def _fails(q, run) -> bool:
        if not _eager_runs(q):
            return False
        again = run(q, None, None)
        return again["status"] != "pass" and again["stage"] == first["stage"]

    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(p.outputs))):
            if len(p.outputs) > 1:
                q = dataclasses.replace(p, outputs=p.outputs[:i] + p.outputs[i + 1:])
                if _fails(q, run):
                    p, changed = q, True
        for i in reversed(range(len(p.lines))):
            q = dataclasses.replace(p, lines=p.lines[:i] + p.lines[i + 1:])
            if _fails(q, run):
                p, changed = q, True
    return p              # every input stays: each draws from the seeded generator
