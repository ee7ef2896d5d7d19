"""Seed derivation: one root seed, an independent stream per named consumer."""

from __future__ import annotations

import random
import zlib
from typing import Any

import numpy as np
import torch

__all__ = ["derive_seed", "global_rng_state", "set_global_rng_state"]


def derive_seed(root: int, *names: str | int) -> int:
    """A 31-bit seed for the consumer named by ``names`` (e.g. ``"actor", 3, "env"``).

    Streams for different names are statistically independent (numpy's SeedSequence spawn keys),
    and the same (root, names) always gives the same seed.
    """
    key = tuple(zlib.crc32(str(n).encode()) for n in names)
    state = np.random.SeedSequence(entropy=int(root), spawn_key=key).generate_state(1)[0]
    return int(state) & 0x7FFFFFFF


def global_rng_state() -> dict[str, Any]:
    """The process-global RNG states (python, numpy, torch), as checkpointable plain data."""
    return {
        "python": random.getstate(),
        "numpy": _numpy_state(),
        "torch": torch.get_rng_state(),
    }


def set_global_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`global_rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    mt = state["numpy"]
    np.random.set_state(
        ("MT19937", np.asarray(mt["key"], dtype=np.uint32), mt["pos"], mt["has_gauss"], mt["gauss"])
    )
    torch.set_rng_state(state["torch"])


def _numpy_state() -> dict[str, Any]:
    _, key, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    return {
        "key": np.asarray(key).tolist(),
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "gauss": float(gauss),
    }
