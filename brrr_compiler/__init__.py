"""brrr: a torch.compile backend that fuses memory-bound op chains by a cost model.

    torch.compile(model, backend="brrr", options={...})
    brrr_compiler.explain(fn, *args, options={...}, **kwargs)  -> Report
    brrr_compiler.calibrate()                            -> DeviceSpec (saved for the cost model)
"""
from brrr_compiler.explain import explain


def calibrate(cache_dir: str | None = None, save: bool = True):
    """Measure this machine for the cost model and save <cache_dir>/device.json."""
    from brrr_compiler.cost.calibrate import calibrate as _calibrate
    return _calibrate(cache_dir, save)


__all__ = ["explain", "calibrate"]
__version__ = "0.1.0"
