"""brrr: a torch.compile backend that fuses memory-bound op chains by a cost model.

    torch.compile(model, backend="brrr", options={...})
    brrr_compiler.explain(fn, *example_args, **options)  -> Report
"""
from brrr_compiler.explain import explain

__all__ = ["explain"]
__version__ = "0.1.0"
