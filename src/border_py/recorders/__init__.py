"""Recorders: where a run's metrics go (the ``recorder`` config group)."""

from border_py.recorders.base import Recorder
from border_py.recorders.composite import Recorders
from border_py.recorders.tensorboard import TensorBoardRecorder

__all__ = ["Recorder", "Recorders", "TensorBoardRecorder"]
