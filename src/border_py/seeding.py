"""Seed derivation: one root seed, an independent stream per named consumer."""

from __future__ import annotations

import zlib

import numpy as np


def derive_seed(root: int, *names: str | int) -> int:
    """A 31-bit seed for the consumer named by ``names`` (e.g. ``"actor", 3, "env"``).

    Streams for different names are statistically independent (numpy's SeedSequence spawn keys),
    and the same (root, names) always gives the same seed.
    """
    key = tuple(zlib.crc32(str(n).encode()) for n in names)
    state = np.random.SeedSequence(entropy=int(root), spawn_key=key).generate_state(1)[0]
    return int(state) & 0x7FFFFFFF
