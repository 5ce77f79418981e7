"""The kernel suite's reductions over a middle dim, and a row reduction that also
stores a mask: the shapes the schedules of schedule/rows.py tell apart.

- a middle dim reduced with a narrow kept inner dim (9-64 rows of 20-31 columns): the
  columns schedule, or columns in vector lanes (codegen/cpp_row_lanes.py), whichever
  the rule of `lane_columns` picks (benchmarks/results/notes.md, "Short columns in
  vector lanes");
- a variance over a middle dim (two walks: the columns schedule);
- a mean over short rows that stores a comparison beside it: its bools are staged
  (codegen/cpp_staging.py), or gcc folds the sum lane by lane.

workloads.py turns `specs()` into KernelCases.
"""

from __future__ import annotations

import torch

REDUCTION_TOL = dict(rtol=1e-4, atol=1e-5)


def sum_mid(x: torch.Tensor) -> torch.Tensor:
    return x.sum(1)


def amax_mid(x: torch.Tensor) -> torch.Tensor:
    return x.amax(1)


def mean_mid(x: torch.Tensor) -> torch.Tensor:
    return x.mean(1)


def var_mid(x: torch.Tensor) -> torch.Tensor:
    return x.var(1)


def mean_and_mask(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.mean(-1, keepdim=True), x * 2 <= 0.5


def _randn(*shape: int) -> tuple:
    return (torch.randn(shape, generator=torch.Generator().manual_seed(0)),)


def specs() -> list[dict]:
    """KernelCase fields per case (all in the L2 or last-level cache)."""
    def case(workload, fn, dims):
        return dict(workload=workload, fn=fn, make_inputs=_randn, dims=dims,
                    tolerance=REDUCTION_TOL)

    return [case("sum_mid", sum_mid, (4000, 9, 31)), case("sum_mid", sum_mid, (256, 64, 24)),
            case("amax_mid", amax_mid, (4000, 9, 31)),
            case("amax_mid", amax_mid, (1000, 40, 31)),
            case("mean_mid", mean_mid, (1000, 50, 20)),
            case("var_mid", var_mid, (512, 16, 100)),
            case("mean_and_mask", mean_and_mask, (8192, 100))]


DESCRIPTIONS = {
    "sum_mid": "x.sum(1) of a 3-d x: a middle dim reduced, the inner dim kept",
    "amax_mid": "x.amax(1) of a 3-d x: a middle dim reduced, the inner dim kept",
    "mean_mid": "x.mean(1) of a 3-d x: a middle dim reduced, the inner dim kept",
    "var_mid": "x.var(1) of a 3-d x: two walks over a middle dim",
    "mean_and_mask": "(x.mean(-1, keepdim=True), x * 2 <= 0.5): a short row's sum beside a "
    "stored comparison",
}
