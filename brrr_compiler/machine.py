"""What this machine's sysfs says of its data caches, and its memory, read once per
process."""
from __future__ import annotations

import functools
import os
from pathlib import Path

GIB, MIB = 1 << 30, 1 << 20


@functools.cache
def cache_sizes() -> tuple[int, int]:
    """(L2 per core, last-level cache) bytes from sysfs; 1 MiB and 32 MiB if unknown. A VM
    reads its chip's whole LLC (480 MB on a 2-vCPU Xeon), not the share it gets:
    calibration measures that share for the cost model (calibration.py `_llc_share`)."""
    sizes = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        mult = {"K": 1 << 10, "M": MIB, "G": GIB}.get(text[-1], 1)
        try:
            sizes[level] = int(text.rstrip("KMG")) * mult
        except ValueError:
            continue
    return sizes.get(2, MIB), sizes.get(max(sizes) if sizes else 3, 32 * MIB)


@functools.cache
def memory_bytes() -> int:
    """The machine's physical memory (64 GiB where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return 64 * GIB
