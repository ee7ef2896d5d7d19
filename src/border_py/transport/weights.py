"""Weight publication through shared memory: one flat float32 buffer, a version, a lock.

The learner writes the policy's weights into the buffer and bumps the version; actors compare the
version with the one they hold (a cheap read, no lock) and copy the weights only when it changed.
Nothing is pickled per actor and nothing queues up: a slow actor simply skips versions.
"""

from __future__ import annotations

from multiprocessing.context import BaseContext
from typing import Any

import numpy as np
import torch

from border_py.errors import RunError

Layout = tuple[tuple[str, tuple[int, ...]], ...]


def layout_of(state: dict[str, torch.Tensor]) -> Layout:
    """The (key, shape) order in which a state dict is flattened."""
    return tuple((key, tuple(value.shape)) for key, value in state.items())


class SharedWeights:
    """A versioned, shared-memory copy of a policy's weights.

    Built by the learner with :meth:`create`; the object itself is passed to child processes as a
    ``Process`` argument (its arrays are shared, not copied).
    """

    def __init__(self, layout: Layout, header: Any, data: Any, lock: Any) -> None:
        self.layout = layout
        self._raw = (header, data)
        self.lock = lock
        self._header = np.frombuffer(header, dtype=np.int64)  # [version, opt_steps of the weights]
        self._data = np.frombuffer(data, dtype=np.float32)

    @classmethod
    def create(cls, ctx: BaseContext, state: dict[str, torch.Tensor]) -> SharedWeights:
        """Allocate shared memory for weights shaped like ``state`` (version 0: nothing published)."""
        layout = layout_of(state)
        n = sum(int(np.prod(shape)) for _, shape in layout)
        return cls(layout, ctx.RawArray("q", 2), ctx.RawArray("f", n), ctx.Lock())

    def __getstate__(self) -> dict[str, Any]:
        return {"layout": self.layout, "raw": self._raw, "lock": self.lock}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["layout"], *state["raw"], state["lock"])  # type: ignore[misc]

    @property
    def version(self) -> int:
        """How many times weights were published (0: never)."""
        return int(self._header[0])

    def publish(self, state: dict[str, torch.Tensor], opt_steps: int, timeout: float = 10.0) -> int:
        """Write ``state`` (the weights after ``opt_steps`` opt steps); return the new version.

        Raises:
            RunError: the lock stayed taken for ``timeout`` seconds (a reader died holding it).
        """
        flat = torch.cat([state[key].detach().reshape(-1).float().cpu() for key, _ in self.layout])
        if not self.lock.acquire(timeout=timeout):
            raise RunError(
                f"the shared weights stayed locked for {timeout:.0f} s (an actor died reading them?)"
            )
        try:
            self._data[:] = flat.numpy()
            self._header[1] = opt_steps
            self._header[0] += 1
            return int(self._header[0])
        finally:
            self.lock.release()

    def read(self, timeout: float = 5.0) -> tuple[int, int, dict[str, torch.Tensor]] | None:
        """(version, opt_steps, state) of the latest weights, or None if the lock was not had in time."""
        if not self.lock.acquire(timeout=timeout):
            return None
        try:
            version, opt_steps = int(self._header[0]), int(self._header[1])
            flat = torch.from_numpy(self._data.copy())
        finally:
            self.lock.release()
        state, offset = {}, 0
        for key, shape in self.layout:
            n = int(np.prod(shape))
            state[key] = flat[offset : offset + n].view(shape)
            offset += n
        return version, opt_steps, state
