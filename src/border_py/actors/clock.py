"""The run's clock: env steps acted by all actors of the run together, which is where every
actor's exploration schedule stands.

Exploration schedules (an epsilon decay, SAC's uniformly random first steps) count the run's env
steps, not an actor's: before each exploring policy call a sampler moves its agent's schedule to
:meth:`RunClock.position` (:class:`~border_py.agents.base.ExplorationPosition`), and after the env
step it :meth:`~RunClock.advance`\\ s the clock by the envs it stepped. So 1 actor, several
actors and the serial trainer act with the same epsilon at the same total env step, and a run
resumed with more actors goes on where it stood (the clock starts at the env steps its checkpoint
counted).

Three clocks, one per kind of actors:

- :class:`LocalClock`: one counter in the actor's own process (the serial trainer's actor; a Ray
  actor, whose counter the learner sets with each call).
- :class:`SharedClock`: local actor processes. One int64 per actor slot in shared memory, plus the
  run's env steps before this session; each actor adds to its own slot only (no lock, no torn
  write), and the position is their sum. With ``n`` actors stepping at once, an actor may not yet
  see the step the others are taking: the position it acts at is behind the true total by at most
  one vector step of each other actor.
"""

from __future__ import annotations

from multiprocessing.context import BaseContext
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["LocalClock", "RunClock", "SharedClock"]


@runtime_checkable
class RunClock(Protocol):
    """Where the run stands in env steps, all actors together, as one actor sees it."""

    def position(self) -> int:
        """The run's env steps acted so far."""

    def advance(self, env_steps: int) -> None:
        """This actor acted ``env_steps`` more env steps."""


class LocalClock:
    """A clock only one actor advances.

    Args:
        position: the run's env steps when this actor starts.
    """

    def __init__(self, position: int = 0) -> None:
        self._position = int(position)

    def position(self) -> int:
        """The run's env steps acted so far."""
        return self._position

    def advance(self, env_steps: int) -> None:
        """This actor acted ``env_steps`` more env steps."""
        self._position += env_steps

    def set(self, position: int) -> None:
        """Move to ``position`` (a Ray actor's call carries the learner's reckoning)."""
        self._position = int(position)


class SharedClock:
    """A clock shared by the local actor processes of a run: the run's env steps before this
    session plus each slot's env steps since, in shared memory.

    Built by the learner with :meth:`create`; each actor gets :meth:`slot`, the clock it advances,
    as a ``Process`` argument (the array is shared, not copied).
    """

    def __init__(self, counts: Any, slot: int | None = None) -> None:
        self._raw = counts
        self._counts = np.frombuffer(counts, dtype=np.int64)  # [base, slot 0, slot 1, ...]
        self._slot = slot

    @classmethod
    def create(cls, ctx: BaseContext, n_actors: int, base: int) -> SharedClock:
        """A clock for ``n_actors`` slots, starting at ``base`` (the run's env steps so far)."""
        clock = cls(ctx.RawArray("q", 1 + n_actors))
        clock._counts[0] = base
        return clock

    def __getstate__(self) -> dict[str, Any]:
        return {"counts": self._raw, "slot": self._slot}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["counts"], state["slot"])  # type: ignore[misc]

    def slot(self, index: int) -> SharedClock:
        """The clock actor ``index`` reads and advances."""
        return SharedClock(self._raw, index)

    def position(self) -> int:
        """The run's env steps acted so far (this session's, all slots, plus the base)."""
        return int(self._counts.sum())

    def advance(self, env_steps: int) -> None:
        """This slot's actor acted ``env_steps`` more env steps.

        Raises:
            RuntimeError: the learner's own view (no slot) cannot advance.
        """
        if self._slot is None:
            raise RuntimeError("the learner's view of the clock has no slot to advance")
        self._counts[1 + self._slot] += env_steps
