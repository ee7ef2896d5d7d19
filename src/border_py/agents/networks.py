"""Network building blocks shared by agents."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from border_py.config import ConfigError


def mlp(in_dim: int, hidden_sizes: Sequence[int], out_dim: int) -> nn.Sequential:
    """A ReLU multi-layer perceptron ``in_dim -> hidden... -> out_dim`` (no output activation)."""
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden_sizes:
        layers += [nn.Linear(last, width), nn.ReLU()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(nn.Flatten(), *layers)


def flat_dim(shape: Sequence[int]) -> int:
    """Number of scalars in an observation of ``shape``."""
    return int(math.prod(shape))


def polyak_update(online: nn.Module, target: nn.Module, tau: float) -> None:
    """target <- tau * online + (1 - tau) * target, in place."""
    with torch.no_grad():
        for p_t, p in zip(target.parameters(), online.parameters(), strict=True):
            p_t.lerp_(p, tau)


def resolve_device(device: str) -> torch.device:
    """``torch.device(device)``, refusing CUDA when it is not available."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"device={device!r}: must be cpu, cuda or cuda:<index>") from None
    if dev.type not in ("cpu", "cuda"):
        raise ConfigError(f"device={device!r}: must be cpu, cuda or cuda:<index>")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError(
            f"device={device!r}: this machine has {torch.cuda.device_count()} CUDA devices"
        )
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={device!r}: CUDA is not available on this machine (use cpu)")
    return dev
