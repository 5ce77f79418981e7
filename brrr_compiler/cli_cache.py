"""`brrr cache info` and `brrr cache clear` (cli.py declares them; runtime/cache.py does
the work)."""
from __future__ import annotations

import os

from brrr_compiler.config import build_config
from brrr_compiler.cost.device import device_file
from brrr_compiler.runtime import cache


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _target(cache_dir: str | None) -> tuple[str, int, str]:
    """(cache dir, its cap, calibration dir) from the argument and Config's sources."""
    cfg = build_config()
    path = os.path.abspath(os.path.expanduser(cache_dir or cfg.cache_dir))
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f"brrr: cache dir {path!r} is not a directory")
    return path, cfg.cache_max_bytes, cfg.calibration_dir


def _calibration(calibration_dir: str, cache_dir: str) -> str | None:
    """The device.json compiles read (older versions kept it in the cache dir)."""
    return next((device_file(d) for d in (calibration_dir, cache_dir)
                 if os.path.exists(device_file(d))), None)


def show_cache(cache_dir: str | None) -> int:
    path, max_bytes, calibration_dir = _target(cache_dir)
    found = cache.info(path, max_bytes)
    cap = _size(max_bytes) if max_bytes else "none"
    print(f"location:    {found.location}" + ("" if os.path.isdir(path) else " (not made yet)"))
    print(f"entries:     {found.entries}")
    print(f"size:        {_size(found.bytes)} (cap {cap}: cache_max_bytes / "
          "BRRR_CACHE_MAX_BYTES; least recently used entries go first)")
    if found.problem:
        print(f"not trusted: the directory {found.problem}; brrr builds in a private "
              "temporary directory instead")
    calibration = _calibration(calibration_dir, path)
    print(f"calibration: {calibration}" if calibration else
          f"calibration: none (`brrr calibrate` saves {device_file(calibration_dir)}; "
          "until then the cost model assumes a generic CPU)")
    return 0


def clear_cache(cache_dir: str | None) -> int:
    path, _, calibration_dir = _target(cache_dir)
    if not os.path.isdir(path):
        print(f"nothing to clear: {path} does not exist")
        return 0
    n, freed = cache.clear(path)
    print(f"removed {n} entries ({_size(freed)}) from {path}")
    calibration = _calibration(calibration_dir, path)
    if calibration:
        print(f"calibration kept: {calibration}")
    return 0
