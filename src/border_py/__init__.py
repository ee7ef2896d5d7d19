"""border-py: asynchronous multi-process off-policy deep RL driven by Hydra configs.

The package is imported lazily: ``import border_py`` loads nothing heavy, so child processes (actors,
the evaluator) import only the modules they use. ``border_py.train`` is the training entry point,
``border_py.load_policy`` loads a trained policy to act with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from border_py._version import __version__

__all__ = ["__version__", "load_policy", "train"]

if TYPE_CHECKING:
    from border_py.deploy.load import load_policy
    from border_py.trainers.train import train


def __getattr__(name: str) -> Any:
    if name == "train":
        from border_py.trainers.train import train

        return train
    if name == "load_policy":
        from border_py.deploy.load import load_policy

        return load_policy
    raise AttributeError(f"module 'border_py' has no attribute {name!r}")
