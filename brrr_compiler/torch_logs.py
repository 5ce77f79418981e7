"""brrr's names in torch's logging: the `brrr` log and its artifacts (a leaf).

Note on the registration. brrr's logger and artifacts are registered with torch._logging,
so `TORCH_LOGS="brrr"` (INFO: each graph's report), `"+brrr"` (DEBUG) and the artifact
names in ARTIFACTS work like torch's own. torch parses TORCH_LOGS once, eagerly, at the
end of `import torch` (`torch._logging._init_logs()`), and rejects a name nobody has
registered by then; the `torch_dynamo_backends` entry point that makes backend="brrr"
work is loaded only when torch.compile looks the name up, far too late. What torch
loads in time is its `torch.backends` entry-point group ("autoload"), called just before
TORCH_LOGS is parsed so that extensions can register their log names (torch's own
comment there). pyproject.toml points that group at `register_with_torch`, which only
fills torch's registry (no logger is touched, nothing can raise: an error there would
fail `import torch`; so would a renamed target, in an install made before the rename,
until it is reinstalled). Loading it imports the brrr_compiler package while torch is half
imported, so the package's __init__ and what it imports at the top must stay light
(tests/test_logging.py and test_backend_api.py import torch afresh). With autoload off
(TORCH_DEVICE_BACKEND_AUTOLOAD=0) the names are registered when this module is first
imported (debug.py imports it), in time for `torch._logging.set_logs` but not for
TORCH_LOGS. Each artifact also answers to
torch's name for the same thing (TORCH_ARTIFACT), so `TORCH_LOGS=output_code` shows
brrr's code as it shows inductor's.
"""
import logging

logger = logging.getLogger("brrr")

# brrr's artifacts: off unless named in TORCH_LOGS or set_logs (like torch's output_code)
ARTIFACTS = {
    "brrr_graphs": "brrr: each graph's ATen code before and after brrr's passes",
    "brrr_fusion": "brrr: each graph's fusion plan, with every merge decision and its reason",
    "brrr_output_code": "brrr: each graph's generated kernels (C++ or Triton) and runner",
}
TORCH_ARTIFACT = {"brrr_fusion": "fusion", "brrr_output_code": "output_code"}


def register_with_torch() -> None:
    """Register the `brrr` log and ARTIFACTS with torch._logging (idempotent, never
    raises: torch calls it from inside `import torch`)."""
    try:
        from torch._logging import _internal
        _internal.register_log("brrr", "brrr")
        for name, description in ARTIFACTS.items():
            _internal.register_artifact(name, description, off_by_default=True)
    except Exception as err:     # noqa: BLE001 - a torch without this API: plain logging
        logger.debug("brrr: not registered with torch._logging: %s", err)


_artifact_loggers: dict[str, list[logging.Logger]] = {}


def _loggers_of(artifact: str) -> list[logging.Logger]:
    """torch's artifact loggers for `artifact` and for its torch counterpart."""
    if artifact not in _artifact_loggers:
        from torch._logging import getArtifactLogger
        names = [artifact] + ([TORCH_ARTIFACT[artifact]] if artifact in TORCH_ARTIFACT else [])
        _artifact_loggers[artifact] = [getArtifactLogger("brrr", n) for n in names]
    return _artifact_loggers[artifact]


def log_artifact(artifact: str, title: str, text) -> None:
    """Log `text` (a str, or a function making it, called only if someone reads it) as
    `artifact`, once, when it or its torch counterpart is enabled."""
    from torch._logging._internal import log_state
    for log in _loggers_of(artifact):
        if log_state.is_artifact_enabled(log.artifact_name):
            log.debug("%s\n%s", title, text() if callable(text) else text, stacklevel=3)
            return


register_with_torch()
