"""Weight publishing: how the learner's acting weights reach its actors, one publisher per kind.

Every publisher keeps to :class:`WeightPublisher` (the learner publishes; each publication gets
the next version); each kind of actors (:class:`~border_py.actors.runtime.Actors`) picks the one
it uses:

- :class:`SharedWeights` (local actor processes, the evaluator): a lock-free copy in shared
  memory that every actor reads when its version changed; nothing is pickled per actor and
  nothing queues up: a slow actor simply skips versions.
- :class:`RayWeights` (Ray actors): each publication is put in Ray's object store at most once,
  when the first actor needs it, as :class:`PolicyWeights` (numpy arrays, read zero-copy); an
  actor whose weights are older gets the reference with its next call, and Ray copies the object
  once per node. ``ray`` is imported only inside its methods.
- :class:`InlineWeights` (the serial trainer's in-process actor): the actor acts with the
  learner's own agent, so there is nothing to copy; it keeps the version and opt steps.
"""

from __future__ import annotations

import struct
import time
import zlib
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

__all__ = ["InlineWeights", "PolicyWeights", "RayWeights", "SharedWeights", "WeightPublisher"]

Layout = tuple[tuple[str, tuple[int, ...]], ...]
SEQ, VERSION, OPT_STEPS, CRC = range(4)
_LABEL = struct.Struct("=qq")  # (version, opt steps), as the CRC covers them


@runtime_checkable
class WeightPublisher(Protocol):
    """Where the learner publishes the weights its actors act with."""

    @property
    def version(self) -> int:
        """How many times weights were published (0: never)."""

    def publish(self, state: dict[str, torch.Tensor], opt_steps: int) -> int:
        """Publish ``state`` (the weights after ``opt_steps`` opt steps); return its version."""


def _checksum(version: int, opt_steps: int, data: memoryview) -> int:
    """CRC-32 of a publication's label (version, opt steps) and its weights, together."""
    return zlib.crc32(data, zlib.crc32(_LABEL.pack(version, opt_steps)))


def layout_of(state: dict[str, torch.Tensor]) -> Layout:
    """The (key, shape) order in which a state dict is flattened."""
    return tuple((key, tuple(value.shape)) for key, value in state.items())


class SharedWeights:
    """A versioned, shared-memory copy of a policy's weights: one flat float32 buffer and a small
    header, no lock.

    The learner (the only writer) makes the header's sequence number odd, writes the weights,
    records the new version, the opt steps and the CRC-32 of those two and the weights together,
    and makes the sequence even again. A reader copies the weights and keeps the copy only if the
    sequence was even and unchanged around the copy and the CRC of the version and opt steps it
    read and of its copy matches: it never blocks the writer, a torn copy (a publication under
    way, on any memory model) is never used, nor a whole copy under another publication's version
    and opt steps (a weakly ordered CPU may reorder the header's loads around the copy), and a
    reader killed mid-copy leaves nothing behind (no lock to stay taken).

    Built by the learner with :meth:`create`; the object itself is passed to child processes as a
    ``Process`` argument (its arrays are shared, not copied).
    """

    def __init__(self, layout: Layout, header: Any, data: Any) -> None:
        self.layout = layout
        self._raw = (header, data)
        self._header = np.frombuffer(header, dtype=np.int64)
        self._data = np.frombuffer(data, dtype=np.float32)

    @classmethod
    def create(cls, ctx: BaseContext, state: dict[str, torch.Tensor]) -> SharedWeights:
        """Allocate shared memory for weights shaped like ``state`` (version 0: nothing published)."""
        layout = layout_of(state)
        n = sum(int(np.prod(shape)) for _, shape in layout)
        return cls(layout, ctx.RawArray("q", 4), ctx.RawArray("f", n))

    def __getstate__(self) -> dict[str, Any]:
        return {"layout": self.layout, "raw": self._raw}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["layout"], *state["raw"])  # type: ignore[misc]

    @property
    def version(self) -> int:
        """How many times weights were published (0: never)."""
        return int(self._header[VERSION])

    def publish(self, state: dict[str, torch.Tensor], opt_steps: int) -> int:
        """Write ``state`` (the weights after ``opt_steps`` opt steps); return the new version."""
        flat = torch.cat([state[key].detach().reshape(-1).float().cpu() for key, _ in self.layout])
        values = flat.numpy()
        header = self._header
        version = int(header[VERSION]) + 1
        header[SEQ] += 1  # odd: a write is under way
        self._data[:] = values
        header[VERSION] = version
        header[OPT_STEPS] = opt_steps
        header[CRC] = _checksum(version, opt_steps, values.data)
        header[SEQ] += 1  # even: consistent
        return version

    def read(self, attempts: int = 20) -> tuple[int, int, dict[str, torch.Tensor]] | None:
        """(version, opt_steps, state) of the latest weights; None if no consistent copy could be
        taken in ``attempts`` tries (the learner publishing non-stop): try again later."""
        header = self._header
        for attempt in range(attempts):
            seq = int(header[SEQ])
            version, opt_steps, crc = (int(header[i]) for i in (VERSION, OPT_STEPS, CRC))
            copy = self._data.copy()
            if (
                seq % 2 == 0
                and int(header[SEQ]) == seq
                and _checksum(version, opt_steps, copy.data) == crc
            ):
                return version, opt_steps, self._unflatten(torch.from_numpy(copy))
            time.sleep(0.0002 * (attempt + 1))
        return None

    def _unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        state, offset = {}, 0
        for key, shape in self.layout:
            n = int(np.prod(shape))
            state[key] = flat[offset : offset + n].view(shape)
            offset += n
        return state


@dataclass(frozen=True)
class PolicyWeights:
    """One publication of the learner's acting weights, as numpy arrays (zero-copy in Ray's
    object store)."""

    opt_steps: int
    arrays: dict[str, np.ndarray]

    def state(self) -> dict[str, torch.Tensor]:
        """The weights as tensors, copied out of the read-only object-store views."""
        return {k: torch.tensor(v) for k, v in self.arrays.items()}


class RayWeights:
    """Weights published through Ray's object store, put there once per publication."""

    def __init__(self) -> None:
        self._version = 0
        self._latest: tuple[int, dict[str, torch.Tensor]] | None = None  # (opt steps, policy)
        self._ref: Any = None  # the object-store copy of the latest publication

    @property
    def version(self) -> int:
        """How many times weights were published (0: never)."""
        return self._version

    def publish(self, state: dict[str, torch.Tensor], opt_steps: int) -> int:
        """Keep the weights; they go into the object store when an actor next needs them."""
        self._version += 1
        self._latest = (opt_steps, state)
        self._ref = None
        return self._version

    def since(self, version: int) -> tuple[Any, int]:
        """For an actor that holds ``version``: (the object-store reference of the latest
        publication, or None when it holds that one; the version it then holds)."""
        if version == self._version:
            return None, version
        return self._current(), self._version

    def _current(self) -> Any:
        """The object-store reference of the latest publication (put there once)."""
        import ray

        if self._ref is None:
            assert self._latest is not None, "publish() first"
            opt_steps, policy = self._latest
            arrays = {k: v.detach().cpu().numpy() for k, v in policy.items()}
            self._ref = ray.put(PolicyWeights(opt_steps, arrays))
        return self._ref


class InlineWeights:
    """Weights of an actor that acts with the learner's own agent: nothing to copy."""

    def __init__(self) -> None:
        self.version = 0
        self.opt_steps = 0  # the opt steps of the weights the actor acts with

    def publish(self, state: dict[str, torch.Tensor], opt_steps: int) -> int:
        """Note the opt steps of the agent's weights (the agent holds them already)."""
        self.version += 1
        self.opt_steps = opt_steps
        return self.version
