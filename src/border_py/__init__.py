"""border-py: asynchronous multi-process off-policy deep RL driven by Hydra configs."""

__version__ = "0.1.0"

from border_py.train import train

__all__ = ["train"]
