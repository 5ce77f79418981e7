"""brrr: a torch.compile backend that fuses memory-bound op chains by a cost model.

    torch.compile(model, backend="brrr", options={...})
    brrr_compiler.explain(fn, *args, options={...}, **kwargs)  -> Report
    brrr_compiler.calibrate()                            -> DeviceSpec (saved for the cost model)
    brrr_compiler.cost_policy(device, target, threads)   -> the "cost" fusion policy, to wrap
                                                            or pass as options["fusion"]

Errors and warnings: OptionError (a bad option or BRRR_* variable), BrrrFallbackError
(a fallback under options={"strict": True}), BrrrWarning (every warning brrr shows).
"""
__version__ = "0.1.0"      # the one place the version is written (pyproject reads it)

from brrr_compiler.config_checks import OptionError
from brrr_compiler.explain import explain
from brrr_compiler.log import BrrrFallbackError, BrrrWarning


def calibrate(cache_dir: str | None = None, save: bool = True,
              calibration_dir: str | None = None, force: bool = False):
    """Measure this machine for the cost model and save <calibration_dir>/device.json
    (default ~/.config/brrr, apart from the kernel cache in `cache_dir`); a calibration
    with figures that never settled is saved only with `force` (as `brrr calibrate
    --force`)."""
    from brrr_compiler.calibration import calibrate as _calibrate
    return _calibrate(cache_dir, save, calibration_dir=calibration_dir, force=force)


def cost_policy(device=None, target: str = "cpp", threads: int | None = None, **limits):
    """The "cost" fusion policy (cost.CostPolicy) counting the kernels `target` would
    print at `threads` threads, on `device` (a cost.DeviceSpec; the generic CPU default)."""
    from brrr_compiler.lowered_count import cost_policy as _cost_policy
    return _cost_policy(device, target, threads, **limits)


__all__ = ["explain", "calibrate", "cost_policy", "BrrrFallbackError", "BrrrWarning", "OptionError"]
