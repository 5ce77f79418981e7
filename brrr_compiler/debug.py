"""Debug dumps: per compiled graph, the ATen graphs, fusion plan, kernels and runner."""
from __future__ import annotations

import os

from brrr_compiler.log import logger


def dump(debug_dir: str | None, graph_name: str, filename: str, text: str) -> None:
    """Write `text` to <debug_dir>/<graph_name>/<filename>, if dumps are on."""
    if not debug_dir:
        return
    folder = os.path.join(debug_dir, graph_name)
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, filename), "w") as f:
            f.write(text)
    except OSError as err:
        logger.warning("brrr: could not write debug dump %s/%s: %s", folder, filename, err)
