"""The recorder protocol (the ``recorder`` config group) and what every recorder shares.

A recorder is built from its YAML keys before anything starts (so a bad key fails early and builds
nothing on disk), then opened on the run dir by the learner, the only process that records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from border_py.config import flatten
from border_py.secrets import redact

__all__ = ["NOT_HPARAMS", "Recorder", "hyperparameters"]

HParam = float | int | str | bool

# metrics a run reports at its end, next to its hyper-parameters (TensorBoard's HPARAMS tab, MLflow)
FINAL_METRICS = ("hparams/best_return", "hparams/final_return", "hparams/mean_return")
# how, not what, is trained
NOT_HPARAMS = ("run_dir", "resume", "progress", "progress_interval", "check_resources")


@runtime_checkable
class Recorder(Protocol):
    """Where a run's metrics go."""

    def open(self, run_dir: Path, config: dict[str, Any], resume_step: int | None) -> None:
        """Start recording the run in ``run_dir`` (``resume_step``: a resumed run continues after
        that opt step, and whatever an earlier session wrote after it is discarded)."""

    def scalars(self, values: dict[str, Any], step: int) -> None:
        """Record ``tag: value`` pairs at opt step ``step`` (tensors become floats)."""

    def close(self, status: str = "completed", final: dict[str, float] | None = None) -> None:
        """Record the run's end (``completed``, ``interrupted`` or ``failed``) and its ``final``
        metrics (keys of :data:`FINAL_METRICS`, and the scores of its final evaluations,
        ``eval/final_*`` and ``eval/best_*``, when measured), then release everything
        (idempotent)."""


def hyperparameters(config: dict[str, Any]) -> dict[str, HParam]:
    """The resolved config as flat ``group.key: value`` pairs (lists as text), settings only,
    secrets redacted (:mod:`border_py.secrets`)."""
    settings = redact({k: v for k, v in config.items() if k not in NOT_HPARAMS})
    return {key: _hparam(value) for key, value in flatten(settings).items()}


def _hparam(value: Any) -> HParam:
    """A config value as a hyper-parameter: a number, text or bool as it is, None as ``null``,
    anything else (a list) as JSON."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if value is None:
        return "null"
    return json.dumps(value, default=str)
