"""Debug output of each compiled graph (ATen graphs, fusion plan, kernels, runner, a
runnable script), for whoever asks for it:

- files: with option debug_dir (BRRR_DEBUG_DIR), `<debug_dir>/run_<time>-pid_<pid>/
  graph0_forward/`, one run folder per process, so a rerun never overwrites an earlier
  one; under TORCH_COMPILE_DEBUG=1 (and no debug_dir) in `brrr/` of the run folder
  torch writes its own debug output to (./torch_compile_debug/run_<time>-pid_<pid>/);
- torch logging: the artifacts of torch_logs.ARTIFACTS (`TORCH_LOGS=brrr_output_code`, ...);
- TORCH_TRACE: each file as a structured-trace artifact `brrr_<graph>_<file>`, which
  tlparse lists under the compile that made it.

A text is made only when one of them wants it (pass a function to make it).
"""
from __future__ import annotations

import datetime
import logging
import os
import threading

from torch._logging import trace_structured
from torch._logging._internal import trace_log

from brrr_compiler.log import logger
from brrr_compiler.torch_logs import log_artifact

ARTIFACT_OF = {"aten_before.py": "brrr_graphs", "aten_after.py": "brrr_graphs",
               "fusion_plan.txt": "brrr_fusion", "kernels.cpp": "brrr_output_code",
               "kernels_triton.py": "brrr_output_code", "runner.py": "brrr_output_code"}

_runs: dict[tuple[str, int], str] = {}
_runs_lock = threading.Lock()


def run_folder(root: str) -> str:
    """This process's folder under `root` (named as torch names its debug runs), the
    same for every graph it compiles."""
    key = (os.fspath(root), os.getpid())
    with _runs_lock:
        if key not in _runs:
            stamp = datetime.datetime.now().strftime("%Y_%m_%d_%H_%M_%S_%f")
            _runs[key] = os.path.join(key[0], f"run_{stamp}-pid_{key[1]}")
        return _runs[key]


def dump_folder(debug_dir: str | None, compile_debug: bool) -> str | None:
    """Where this process writes its graphs' folders, or None for no files."""
    if debug_dir:
        return run_folder(debug_dir)
    if compile_debug:
        import torch._dynamo.config as dynamo_config
        return os.path.join(_torch_run() or run_folder(dynamo_config.debug_dir_root), "brrr")
    return None


def _torch_run() -> str | None:
    """The run folder torch's own TORCH_COMPILE_DEBUG output goes to, while Dynamo
    compiles: its log file is <run>/torchdynamo/debug.log (torch._dynamo.utils)."""
    for handler in logging.getLogger("torch._dynamo").handlers:
        path = getattr(handler, "baseFilename", "")
        if path.endswith(os.path.join("torchdynamo", "debug.log")):
            return os.path.dirname(os.path.dirname(path))
    return None


class _Once:
    """A text, or the function making it, made at most once; None when it cannot be made
    (the reason is logged: NotImplementedError for what a dump cannot show, any other
    error is a bug in the dump, which must not fail the compile)."""

    def __init__(self, text, what: str):
        self.text, self.what, self.made = text, what, not callable(text)

    def __call__(self):
        if not self.made:
            self.made = True
            try:
                self.text = self.text()
            except Exception as err:     # noqa: BLE001 - a debug aid never fails a compile
                logger.warning("brrr: %s not written: %s", self.what, err)
                self.text = None
        return self.text


class GraphDump:
    """The debug output of one compiled graph; `folder` is dump_folder's answer."""

    def __init__(self, folder: str | None, graph: str):
        self.graph = graph
        self.folder = os.path.join(folder, graph) if folder else None
        self._made = False

    @property
    def active(self) -> bool:
        """Whether anything is written whatever the log settings (files, TORCH_TRACE)."""
        return self.folder is not None or bool(trace_log.handlers)

    def write(self, filename: str, text) -> None:
        """`text` (a str, or a function making it) as `filename`, as a log artifact and
        as a structured-trace artifact, for whichever of them is on."""
        made = _Once(text, f"{self.graph}/{filename}")
        if self.folder and made() is not None:
            self._write_file(filename, made())
        if filename in ARTIFACT_OF:
            log_artifact(ARTIFACT_OF[filename], f"brrr {self.graph}/{filename}:", made)
        stem = os.path.splitext(filename)[0]
        trace_structured("artifact", metadata_fn=lambda: {
            "name": f"brrr_{self.graph}_{stem}" if stem != self.graph else f"brrr_{stem}_runnable",
            "encoding": "string"}, payload_fn=made)

    def _make_folder(self) -> None:
        """The graph's folder, new: a graph of the same name dumped earlier in this run
        (graph names can repeat, e.g. across explain calls) keeps its own."""
        base, n = self.folder, 0
        while True:
            try:
                os.makedirs(self.folder)
                break
            except FileExistsError:
                n += 1
                self.folder = f"{base}.{n}"
        self._made = True

    def _write_file(self, filename: str, text: str) -> None:
        try:
            if not self._made:
                self._make_folder()
            with open(os.path.join(self.folder, filename), "w") as f:
                f.write(text)
        except OSError as err:
            logger.warning("brrr: could not write debug dump %s/%s: %s", self.folder,
                           filename, err)
