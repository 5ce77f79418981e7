"""The `brrr` logger, warn-once and fallbacks (a leaf: anyone may import it).

A warning goes out through the `warnings` module only (filterable, and pytest sees it),
never also as a log record: a record on the handler-less `brrr` logger reaches Python's
last-resort handler, which printed every warning a second time. It points at the first
frame outside brrr, torch and the standard library (the user's line that compiled or ran
the model), not at brrr's internals.
"""
import logging
import os
import sys
import sysconfig
import threading
import warnings

logger = logging.getLogger("brrr")

_warned: set[str] = set()
_lock = threading.Lock()


class BrrrWarning(RuntimeWarning):
    """Every warning brrr shows (`warnings.filterwarnings(..., category=BrrrWarning)`)."""


class BrrrFallbackError(RuntimeError):
    """A fallback under options={"strict": True} (or BRRR_STRICT=1): part of the program
    would have run other than as compiled (its ops through ATen, a target or CUDA graphs
    not honoured). Raised from the backend, torch reports it as BackendCompilerFailed
    with this error as its cause."""


def warn_once(key: str, message: str) -> None:
    """Emit `message` as a warning the first time `key` is seen in this process."""
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, BrrrWarning, stacklevel=_user_stacklevel())


def fallback(key: str, message: str, strict: bool) -> None:
    """A fallback (the module note of BrrrFallbackError): one warning, or under `strict`
    the error."""
    if strict:
        raise BrrrFallbackError(f"{message} [strict: fallbacks are errors; "
                                "options={'strict': False} or BRRR_STRICT=0 allows them]")
    warn_once(key, message)


_GENERATED = ("<eval_with_key", "<frozen")


def _internal_prefixes() -> tuple[str, ...]:
    here = os.path.dirname(os.path.abspath(__file__))
    prefixes = [here, os.path.join(os.path.dirname(here), "passes"), sysconfig.get_path("stdlib")]
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        prefixes.append(os.path.dirname(os.path.abspath(torch.__file__)))
    return tuple(p + os.sep for p in prefixes)


def _user_stacklevel() -> int:
    """warnings.warn's stacklevel for the first caller outside brrr, torch and the
    standard library (2, warn_once's caller, when there is none: a background thread)."""
    internal = _internal_prefixes()
    frame, level = sys._getframe(2), 2      # warn_once's caller is level 2 of warn()
    while frame is not None:
        name = frame.f_code.co_filename
        # FX's generated code (<eval_with_key>) and frozen importlib are not the user's
        if not name.startswith(_GENERATED) and not os.path.abspath(name).startswith(internal):
            return level
        frame, level = frame.f_back, level + 1
    return 2
