"""The seam between the learning loop and wherever actors run: the actor-backend protocol and
what every backend shares (per-slot records, Ape-X epsilons)."""

from __future__ import annotations

from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import Any, Protocol

from border_py.actors.process import ActorReport
from border_py.errors import RunError
from border_py.transport.weights import SharedWeights


class ActorBackend(Protocol):
    """What the async learner needs from the actor side, wherever the actors run.

    :class:`ActorManager` implements it with local processes; a distributed backend (e.g. Ray
    actors) implements the same methods around the same actor code (:func:`~border_py.actors.process.actor_main`
    and :class:`~border_py.actors.sampler.Sampler`), and the learner does not change.
    """

    actors: list[ActorRecord]  # one record per actor slot: counters for logs and checkpoints

    def context(self) -> BaseContext:
        """The multiprocessing context for the run's local processes (evaluator, weights)."""

    def start(
        self,
        ctx: BaseContext,
        config: dict[str, Any],
        weights: SharedWeights,
        resume: list[dict[str, Any]] | None = None,
    ) -> None:
        """Start the actors from the resolved config; they act with the published weights."""

    def poll(self, timeout: float, max_reports: int = 64) -> list[ActorReport]:
        """Reports (batches, errors, byes) waiting, waiting up to ``timeout`` for the first."""

    def check(self) -> None:
        """Restart dead actors; raise :class:`ActorFailure` when one may not restart again."""

    def stop(self, on_report: Any = None) -> None:
        """Staged, idempotent shutdown; drained reports go to ``on_report``."""

    def accounting(self) -> dict[str, int]:
        """Transitions sent, received and dropped."""

    def queue_depth(self) -> int:
        """Batches waiting for the learner."""

    def alive(self) -> int:
        """Actors alive now."""

    def restarts(self) -> int:
        """Restarts so far."""


class ActorFailure(RunError):
    """An actor crashed more often than ``max_restarts`` allows."""


def apex_epsilons(n_actors: int, eps: float, alpha: float) -> list[float]:
    """Ape-X's per-actor epsilons: eps_i = eps ** (1 + alpha * i / (N - 1)); eps alone when N == 1."""
    if n_actors == 1:
        return [eps]
    return [eps ** (1 + alpha * i / (n_actors - 1)) for i in range(n_actors)]


@dataclass
class ActorRecord:
    """The manager's view of one actor slot."""

    process: Any
    incarnation: int = 0
    restarts: int = 0
    received: int = 0  # transitions received from this slot (all incarnations)
    sent: int = 0  # transitions the finished incarnations said they sent
    dropped: int = 0
    episodes: int = 0
    return_sum: float = 0.0
    env_steps: int = 0  # env steps of this slot (all incarnations): its exploration position
    said_bye: bool = False

    def state(self) -> dict[str, Any]:
        """What a resumed run carries over (plain data)."""
        return {
            "incarnation": self.incarnation,
            "received": self.received,
            "episodes": self.episodes,
            "return_sum": self.return_sum,
            "env_steps": self.env_steps,
        }
