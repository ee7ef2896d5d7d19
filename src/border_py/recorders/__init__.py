"""Recorders: where a run's metrics go (the ``recorder`` config group)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from border_py.recorders.base import Recorder
from border_py.recorders.composite import Recorders

__all__ = ["Recorder", "Recorders", "TensorBoardRecorder"]

if TYPE_CHECKING:  # for type checkers and the API reference; imported lazily below
    from border_py.recorders.tensorboard import TensorBoardRecorder


def __getattr__(name: str) -> Any:
    """``TensorBoardRecorder`` imported on first use (configs name it here): TensorBoard's import
    is left to the runs that record, after their actors have started."""
    if name == "TensorBoardRecorder":
        from border_py.recorders.tensorboard import TensorBoardRecorder

        return TensorBoardRecorder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
