"""Checks for option values (a leaf beside config.py).

Each check is `(value, where, from_env) -> value`: `where` names the source in errors
("option num_threads" or "BRRR_NUM_THREADS"), and `from_env` says the value is an
environment variable's text, to be parsed (a number, a boolean); an option's value must
already have the option's type. Anything else raises OptionError, which says what was
given and what is accepted.
"""
from __future__ import annotations

import difflib
import math
import os
import re
from typing import Any, Callable

TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes"), ("0", "false", "no")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class OptionError(ValueError, TypeError):
    """A bad option key or value, or a bad BRRR_* environment variable (a ValueError,
    and a TypeError for a value of the wrong type)."""


def _bad(where: str, value: Any, expected: str, hint: str = "") -> OptionError:
    name = type(value).__name__
    kind = "" if isinstance(value, str) else f" ({'an' if name[0] in 'aeiou' else 'a'} {name})"
    return OptionError(f"brrr: {where}={value!r}{kind}: expected {expected}{hint}")


def _alternatives(choices) -> str:
    quoted = [repr(c) for c in choices]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def as_bool(value: Any, where: str, from_env: bool) -> bool:
    if isinstance(value, bool):
        return value
    words = "/".join(TRUE_WORDS) + " or " + "/".join(FALSE_WORDS) + " (any case)"
    if not from_env:
        raise _bad(where, value, "True or False (a bool)")
    text = value.strip().lower()
    if text in TRUE_WORDS or text in FALSE_WORDS:
        return text in TRUE_WORDS
    raise _bad(where, value, words)


def _from_text(value: Any, where: str, from_env: bool, parse, expected: str) -> Any:
    """`value`, or, from an environment variable, its text parsed by `parse`."""
    if not from_env:
        return value
    try:
        return parse(value.strip())
    except ValueError:
        raise _bad(where, value, expected) from None


def as_count(minimum: int) -> Callable[[Any, str, bool], int]:
    """A check for an integer >= `minimum`."""
    def check(value: Any, where: str, from_env: bool) -> int:
        expected = f"an integer >= {minimum}"
        number = _from_text(value, where, from_env, int, expected)
        if not from_env and isinstance(value, str):
            raise _bad(where, value, expected + " (an int, not a str)")
        if isinstance(number, bool) or not isinstance(number, int) or number < minimum:
            raise _bad(where, value, expected)
        return number
    return check


def as_ratio(value: Any, where: str, from_env: bool) -> float:
    """A factor >= 1 (a finite number)."""
    expected = "a number >= 1, such as 1.3"
    number = _from_text(value, where, from_env, float, expected)
    if isinstance(number, bool) or not isinstance(number, (int, float)) \
            or not math.isfinite(number) or number < 1:
        raise _bad(where, value, expected)
    return float(number)


def as_byte_size(value: Any, where: str, from_env: bool) -> int:
    """Bytes: a whole number, or text with a binary unit ("512M", "4GiB", "4 GB")."""
    expected = ("a size in bytes >= 0: a whole number, or one with a unit K, M, G or T "
                "(powers of 1024) such as '4G' (0: no limit)")
    if isinstance(value, int) and not isinstance(value, bool):
        if value >= 0:
            return value
    elif isinstance(value, str):
        match = _SIZE.fullmatch(value.strip())
        if match:
            return int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    raise _bad(where, value, expected)


def as_choice(value: Any, where: str, choices: tuple[str, ...]) -> str:
    if isinstance(value, str) and value in choices:
        return value
    close = difflib.get_close_matches(value, choices, n=1) if isinstance(value, str) else []
    raise _bad(where, value, _alternatives(choices),
               f" (did you mean {close[0]!r}?)" if close else "")


def as_fusion(value: Any, where: str, choices: tuple[str, ...]) -> Any:
    """A policy name, or a policy object (a `name` and a `decide(candidate)` method)."""
    if isinstance(value, str):
        return as_choice(value, where, choices)
    if callable(getattr(value, "decide", None)) and hasattr(value, "name"):
        return value
    raise _bad(where, value, _alternatives(choices) + " or a policy object with a name "
               "and a decide(candidate) method")


def as_device(value: Any, where: str, from_env: bool) -> Any:
    """A preset name or device.json path (resolved by cost.resolve_device, which names
    the presets), or a DeviceSpec."""
    if isinstance(value, os.PathLike) or (isinstance(value, str) and value.strip()):
        return os.fspath(value)
    if not isinstance(value, str) and hasattr(value, "dram_bandwidth"):
        return value            # a DeviceSpec (config, a leaf, does not import cost/)
    raise _bad(where, value, "a device preset name such as 'h100', a device.json path or "
               "a brrr_compiler.cost.DeviceSpec")


def as_path(value: Any, where: str, from_env: bool) -> str:
    if isinstance(value, os.PathLike) or (isinstance(value, str) and value.strip()):
        return os.path.expanduser(os.fspath(value))
    raise _bad(where, value, "a directory path (a non-empty str or os.PathLike)")


def as_program(value: Any, where: str, from_env: bool) -> str:
    if isinstance(value, os.PathLike) or (isinstance(value, str) and value.strip()):
        return os.fspath(value)
    raise _bad(where, value, "a compiler's name or path, such as 'g++'")


def as_passes(value: Any, where: str, from_env: bool) -> tuple[str, ...]:
    """Pass names in order (checked against passes.PASSES when the pipeline runs)."""
    if isinstance(value, (list, tuple)) and all(isinstance(n, str) for n in value):
        return tuple(value)
    hint = f" such as ({value!r},)" if isinstance(value, str) else ""
    raise _bad(where, value, f"a list or tuple of pass names{hint}")
