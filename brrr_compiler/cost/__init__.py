"""The cost model: pure functions of (what a kernel computes and moves, a DeviceSpec) ->
predicted time and bound class (compute, memory, overhead); the partitioner asks it
through CostPolicy ("cost") and never for legality.

    device.py       DeviceSpec, the generic-CPU default, GPU presets, device.json
    stats.py        KernelStats (flops, transcendentals, bytes) and CostModelError
    from_kernel.py  KernelStats of a kernel IR and its schedule (what codegen prints)
    estimate.py     predict(stats, device) -> Estimate
    policy.py       CostPolicy: fuse, refuse or recompute by predicted time;
                    policy_from_option (options["fusion"] -> a policy)
(brrr_compiler/calibration.py measures this machine's DeviceSpec: `brrr calibrate`.)
"""
from brrr_compiler.cost.device import (PRESETS, DeviceSpec, current_device_spec, generic_cpu,
                                       load_device_spec, resolve_device, save_device_spec)
from brrr_compiler.cost.estimate import (Estimate, estimate_kernel,
                                         kernel_report_fields, predict)
from brrr_compiler.cost.from_kernel import kernel_stats
from brrr_compiler.cost.policy import CostPolicy, policy_from_option
from brrr_compiler.cost.stats import CostModelError, KernelNotLowered, KernelStats

__all__ = ["PRESETS", "DeviceSpec", "current_device_spec", "generic_cpu", "load_device_spec",
           "resolve_device", "save_device_spec", "Estimate", "estimate_kernel",
           "kernel_report_fields", "predict", "kernel_stats", "CostPolicy", "CostModelError",
           "KernelNotLowered", "KernelStats", "policy_from_option"]
