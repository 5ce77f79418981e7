"""The `brrr` logger and a warn-once helper (a leaf: anyone may import it)."""
import logging
import threading
import warnings

logger = logging.getLogger("brrr")

_warned: set[str] = set()
_lock = threading.Lock()


def warn_once(key: str, message: str) -> None:
    """Emit `message` as a warning the first time `key` is seen in this process."""
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    logger.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)
