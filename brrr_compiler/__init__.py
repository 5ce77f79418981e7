"""brrr: a torch.compile backend that fuses memory-bound op chains by a cost model.

    torch.compile(model, backend="brrr", options={...})
    brrr_compiler.explain(fn, *args, options={...}, **kwargs)  -> Report
    brrr_compiler.calibrate()                            -> DeviceSpec (saved for the cost model)

Errors and warnings: OptionError (a bad option or BRRR_* variable), BrrrFallbackError
(a fallback under options={"strict": True}), BrrrWarning (every warning brrr shows).
"""
__version__ = "0.1.0"      # the one place the version is written (pyproject reads it)

from brrr_compiler.config_checks import OptionError
from brrr_compiler.explain import explain
from brrr_compiler.log import BrrrFallbackError, BrrrWarning


def calibrate(cache_dir: str | None = None, save: bool = True,
              calibration_dir: str | None = None):
    """Measure this machine for the cost model and save <calibration_dir>/device.json
    (default ~/.config/brrr, apart from the kernel cache in `cache_dir`)."""
    from brrr_compiler.calibration import calibrate as _calibrate
    return _calibrate(cache_dir, save, calibration_dir=calibration_dir)


__all__ = ["explain", "calibrate", "BrrrFallbackError", "BrrrWarning", "OptionError"]
