"""Several recorders at once: the ``recorder`` group composes a mapping ``name -> spec``.

Each option of the group (``conf/recorder/<name>.yaml``) is placed at ``recorder.<name>``, so
``recorder=[tensorboard,wandb]`` composes both and ``recorder=both`` is TensorBoard and MLflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from border_py.config import build
from border_py.errors import ConfigError
from border_py.recorders.base import Recorder

__all__ = ["Recorders", "build_recorders"]

DEFAULT_RECORDERS = {"tensorboard": {"_target_": "border_py.recorders.TensorBoardRecorder"}}


def build_recorders(spec: Mapping[str, Any] | None) -> Recorder:
    """The run's recorder from its ``recorder`` config: a mapping ``name -> member spec``
    (TensorBoard when there is none), or one spec with a ``_target_`` (configs saved by earlier
    versions). Nothing is opened or written; a bad key is one :class:`ConfigError` line naming
    ``recorder.<name>.<key>``."""
    spec = spec or DEFAULT_RECORDERS
    if "_target_" in spec:
        return build("recorder", spec)
    return Recorders(spec, group="recorder")


class Recorders:
    """Records to every member, in order.

    Args:
        recorders: name -> the member's spec (a ``_target_`` and its keys), e.g.
            ``{"tensorboard": {"_target_": "border_py.recorders.TensorBoardRecorder"}}``.
        group: where the members sit in the config (error messages name ``<group>.<name>.<key>``).
    """

    def __init__(self, recorders: Mapping[str, Any], group: str = "recorders") -> None:
        if not isinstance(recorders, Mapping) or not recorders:
            raise ConfigError(f"recorders={recorders!r}: must map names to recorder specs")
        for name, member in recorders.items():
            if not isinstance(member, Mapping):
                raise ConfigError(f"{group}.{name}={member!r}: must be a recorder spec")
        self.members: list[Recorder] = [
            build(f"{group}.{name}", dict(member)) for name, member in recorders.items()
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
