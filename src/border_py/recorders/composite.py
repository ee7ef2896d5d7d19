"""Several recorders at once (``recorder=both``: TensorBoard and MLflow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from border_py.config import build
from border_py.errors import ConfigError
from border_py.recorders.base import Recorder


class Recorders:
    """Records to every member, in order.

    Args:
        recorders: name -> the member's spec (a ``_target_`` and its keys), e.g.
            ``{"tensorboard": {"_target_": "border_py.recorders.TensorBoardRecorder"}}``.
    """

    def __init__(self, recorders: dict[str, dict[str, Any]]) -> None:
        if not isinstance(recorders, dict) or not recorders:
            raise ConfigError(f"recorders={recorders!r}: must map names to recorder specs")
        self.members: list[Recorder] = [
            build(f"recorders.{name}", dict(spec)) for name, spec in recorders.items()
        ]

    def open(self, run_dir: Path, config: dict[str, Any], resume_step: int | None) -> None:
        """Open every member."""
        for member in self.members:
            member.open(run_dir, config, resume_step)

    def scalars(self, values: dict[str, Any], step: int) -> None:
        """Record to every member."""
        for member in self.members:
            member.scalars(values, step)

    def close(self, status: str = "completed", final: dict[str, float] | None = None) -> None:
        """Close every member, even when one of them fails (the first error is raised after)."""
        errors = []
        for member in self.members:
            try:
                member.close(status, final)
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
