"""Where a step's time goes, from a torch.profiler trace: library calls (GEMM, convolution,
attention), brrr's kernels, other ATen calls, and the rest.

Note on the attribution. A library call is an ATen (or oneDNN/MKL) op in LIBRARY, counted
where it is innermost: `aten::linear` -> `aten::addmm` counts addmm's interval, so the
transpose and view that linear dispatches on the way count as time outside the library,
which is what a compiled graph that calls addmm directly saves. Categories are counted
with priority, each as the union of its intervals less those of the categories before it:
library, then brrr's kernels (the `brrr::<kernel>` events; graph ranges are not kernels),
then the optimizer step (torch.optim's `Optimizer.step#...` range: eager for every
backend), then other ATen calls (outermost `aten::` events), then the rest of the step (Python,
the backend's own runner, Dynamo's guards; Inductor's generated C++ kernels record no
profiler events, so for Inductor they fall here too). Overlaps count once.

The time outside library calls is a profiled step's time less its library calls and its
optimizer step (`outside`), both from the same profiled steps (medians per category), so
that preemption on a loaded machine, which stretches one step and not another, does not
set one step's library time against another's length. The profiler's own cost lands
outside the library: about a microsecond per recorded op, and brrr records an event per
kernel that Inductor's kernels do not.
"""

from __future__ import annotations

import statistics
from typing import Callable

GEMM = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm",
        "aten::linear", "aten::matmul", "aten::_addmm_activation", "aten::mkldnn_linear",
        "mkldnn::_linear_pointwise", "mkl::_mkl_linear")
CONV_PREFIXES = ("aten::conv", "aten::_conv", "aten::mkldnn_convolution",
                 "mkldnn::_convolution", "aten::slow_conv", "aten::_slow_conv",
                 "aten::thnn_conv", "aten::_nnpack_spatial_convolution")
ATTENTION_PREFIXES = ("aten::scaled_dot_product", "aten::_scaled_dot_product")
CATEGORIES = ("gemm", "conv", "attention", "brrr kernels", "optimizer", "other aten", "rest")
LIBRARY = ("gemm", "conv", "attention")
STEP_RANGE = "bench::step"


def library_kind(name: str) -> str | None:
    """'gemm', 'conv' or 'attention' for a library call's event name, else None."""
    if name in GEMM or name.startswith(("aten::mkldnn_linear", "mkldnn::_linear")):
        return "gemm"
    if name.startswith(CONV_PREFIXES):
        return "conv"
    if name.startswith(ATTENTION_PREFIXES):
        return "attention"
    return None


def _is_kernel(name: str) -> bool:
    return name.startswith("brrr::") and not name.startswith("brrr::graph")


def union_length(intervals) -> float:
    """Total length covered by (start, end) intervals, overlaps counted once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def _has_library_inside(events) -> set[int]:
    """ids of events with a library call somewhere below them."""
    marked = set()
    for e in events:
        if library_kind(e.name):
            parent = e.cpu_parent
            while parent is not None and id(parent) not in marked:
                marked.add(id(parent))
                parent = parent.cpu_parent
    return marked


def _outermost_aten(e) -> bool:
    parent = e.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return False
        parent = parent.cpu_parent
    return True


def breakdown(events) -> dict[str, float]:
    """Seconds per category (CATEGORIES) and 'step', from the FunctionEvents of one
    profiled step whose range is named STEP_RANGE."""
    steps = [e for e in events if e.name == STEP_RANGE]
    if len(steps) != 1:
        raise ValueError(f"expected one {STEP_RANGE} range, found {len(steps)}")
    above = _has_library_inside(events)
    spans: dict[str, list] = {c: [] for c in CATEGORIES[:-1]}
    for e in events:
        span = (e.time_range.start, e.time_range.end)
        kind = library_kind(e.name)
        if kind and id(e) not in above:
            spans[kind].append(span)
        elif _is_kernel(e.name):
            spans["brrr kernels"].append(span)
        elif e.name.startswith("Optimizer.step#"):
            spans["optimizer"].append(span)
        elif e.name.startswith("aten::") and _outermost_aten(e):
            spans["other aten"].append(span)
    out, covered, before = {}, [], 0.0
    for category in CATEGORIES[:-1]:
        covered += spans[category]
        now = union_length(covered)
        out[category] = (now - before) * 1e-6         # profiler times are microseconds
        before = now
    out["step"] = steps[0].time_range.elapsed_us() * 1e-6
    out["rest"] = max(0.0, out["step"] - before * 1e-6)
    return out


def profile_step(step: Callable, before: Callable | None = None) -> dict[str, float]:
    """breakdown() of one call of `step()` under torch.profiler (CPU activity)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    if before is not None:
        before()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function(STEP_RANGE):
            step()
    return breakdown(prof.events())


def median_breakdown(samples: list[dict[str, float]]) -> dict[str, float]:
    """Per category, the median over profiled steps."""
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def library_seconds(b: dict[str, float]) -> float:
    return sum(b[k] for k in LIBRARY)


def outside(b: dict[str, float]) -> float:
    """A profiled step's seconds outside library calls and the (eager) optimizer step."""
    return b["step"] - library_seconds(b) - b.get("optimizer", 0.0)
