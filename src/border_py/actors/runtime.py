"""The actors of a run at run time: the seam between the learning loop and wherever they run.

The loop (:mod:`border_py.trainers.loop`) talks to actors only through :class:`Actors`: it starts
them, publishes weights, polls for batches, checks their health, stops them, and saves their state.
Three runtimes implement it around the same sampler code
(:class:`~border_py.actors.sampler.Sampler`): one actor in the learner's own process
(:class:`~border_py.actors.inline.InlineActors`, the serial trainer), local actor processes
(:class:`~border_py.actors.local.LocalActors`) and, with the ``[ray]`` extra, Ray actors
(:class:`~border_py.actors.ray.actors.RayActors`). Each has its settings
(:class:`~border_py.actors.settings.ActorSettings`, the ``actor_manager`` group), and each keeps one
:class:`ActorRecord` per actor slot.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import torch

from border_py.agents.base import Agent, RecurrentActing
from border_py.errors import RunError
from border_py.processes.supervision import RestartPolicy
from border_py.transport.batch import ReceivedBatch

__all__ = [
    "ActorFailure",
    "ActorRecord",
    "Actors",
    "Deliver",
    "Launch",
    "accounting_of",
    "env_steps_per_batch",
    "policy_dtype_of",
    "slots_state",
]

log = logging.getLogger(__name__)

Deliver = Callable[[ReceivedBatch], None]


class ActorFailure(RunError):
    """An actor (or the evaluator) failed in a way a restart cannot mend."""


@dataclass
class ActorRecord:
    """Counters of one actor slot, across its incarnations (restarts)."""

    incarnation: int = 0
    restarts: int = 0
    received: int = 0  # transitions received from this slot, all sessions of the run
    received_session: int = 0  # ... in this session (since this process started the run)
    sent: int = 0  # transitions this session's finished incarnations sent
    dropped: int = 0  # sampled but not sent, because the stop came first
    incarnation_batches: int = 0  # batches received from the current incarnation
    incarnation_received: int = 0  # transitions received from the current incarnation
    episodes: int = 0
    return_sum: float = 0.0
    env_steps: int = 0  # env steps received from this slot (all incarnations and sessions)
    said_bye: bool = False
    incarnation_error: str | None = None  # the exception the current incarnation reported
    policy_dtype: str | None = None  # what the current incarnation acts in (None: not known yet)

    def state(self) -> dict[str, Any]:
        """What a resumed run carries over (plain data)."""
        return {
            "incarnation": self.incarnation,
            "received": self.received,
            "episodes": self.episodes,
            "return_sum": self.return_sum,
            "env_steps": self.env_steps,
        }

    @classmethod
    def resumed(cls, saved: dict[str, Any]) -> ActorRecord:
        """A slot continuing from its saved :meth:`state`, with the next incarnation."""
        record = cls.kept(saved)
        record.incarnation += 1
        return record

    @classmethod
    def kept(cls, saved: dict[str, Any]) -> ActorRecord:
        """A slot this session does not run, as saved (its :meth:`state` is ``saved`` again)."""
        return cls(
            incarnation=int(saved["incarnation"]),
            received=int(saved["received"]),
            episodes=int(saved["episodes"]),
            return_sum=float(saved["return_sum"]),
            env_steps=int(saved["env_steps"]),
        )

    def begin_incarnation(self) -> None:
        """A new incarnation of the slot starts."""
        self.incarnation_batches = self.incarnation_received = 0
        self.said_bye = False
        self.incarnation_error = None

    def end_incarnation(self, sent: int | None, dropped: int = 0) -> None:
        """The current incarnation ended: with its goodbye (``sent``, ``dropped``), or killed
        (``sent`` None: what it sent is what arrived, every announcement being atomic)."""
        self.sent += self.incarnation_received if sent is None else sent
        self.dropped += dropped
        self.said_bye = sent is not None

    def restart_or_fail(
        self,
        index: int,
        policy: RestartPolicy,
        cause: str,
        error: str | None,
        exitcode: int | None = None,
    ) -> None:
        """After the death of actor ``index``'s incarnation: raise :class:`ActorFailure` with the
        policy's one line when it may not restart, else count the restart and log it (the caller
        then starts the next incarnation)."""
        delivered = self.incarnation_batches > 0
        verdict = policy.verdict(cause, error, delivered=delivered, exitcode=exitcode)
        if verdict is not None:
            raise ActorFailure(verdict)
        self.restarts += 1
        self.incarnation += 1
        log.warning(
            "actor %d died (%s): restart %d of %d", index, cause, self.restarts, policy.max_restarts
        )

    def count(self, batch: ReceivedBatch) -> None:
        """Account for a batch received from this slot."""
        n = 0 if batch.transitions is None else len(batch.transitions)
        self.received += n
        self.received_session += n
        self.incarnation_received += n
        self.incarnation_batches += 1
        self.env_steps += batch.env_steps
        self.episodes += len(batch.episode_returns)
        self.return_sum += sum(batch.episode_returns)


@dataclass
class Launch:
    """What the actors need to start.

    Attributes:
        config: the resolved run config (actors build their env and agent from it).
        spaces: the env's (observation, action) spaces.
        agent: the learner's agent (the in-process actor acts with it).
        policy: the learner's current acting weights (what actors start from).
        opt_steps: the learner's opt steps (a resumed run starts later).
        env_steps: the run's env steps so far (where the actors' exploration schedules start:
            :mod:`border_py.actors.clock`).
        seed: the run's root seed (each actor derives its agent's and envs' seeds from it).
        check_resources: the run's ``check_resources`` (whether a bound refuses or warns).
    """

    config: dict[str, Any]
    spaces: tuple[gym.Space, gym.Space]
    agent: Agent
    policy: dict[str, torch.Tensor]
    opt_steps: int
    env_steps: int = 0
    seed: int = field(kw_only=True)
    check_resources: bool = field(kw_only=True)

    def env_steps_per_batch(self, n_buffer: int) -> int:
        """About the env steps an actor takes to fill a batch of ``n_buffer``
        (:func:`env_steps_per_batch`)."""
        return env_steps_per_batch(n_buffer, self.agent)


@runtime_checkable
class Actors(Protocol):
    """The actors of a run, wherever they run: what the learning loop needs from them.

    An implementation is built from its settings (an
    :class:`~border_py.actors.settings.ActorSettings`) and starts nothing before :meth:`start`; a
    resumed run's are restored (:meth:`restore`) before they start.
    """

    records: list[ActorRecord]  # one per actor slot it runs

    def start(self, launch: Launch) -> None:
        """Start the actors; they act with the weights of ``launch.policy`` from their first step."""

    def publish(self, policy: dict[str, torch.Tensor], opt_steps: int) -> None:
        """Make the weights of ``opt_steps`` the ones actors act with from their next batch on."""

    def poll(self, timeout: float, deliver: Deliver) -> int:
        """Hand every batch waiting (up to a bound) to ``deliver``, waiting up to ``timeout``
        seconds for the first; return how many were delivered."""

    def halt(self) -> None:
        """The env-step budget is reached: the actors start no new batch (idempotent). What they
        already sampled still reaches :meth:`poll` and :meth:`stop`, and none is restarted."""

    def check(self) -> None:
        """Restart actors that died or went silent; raise :class:`ActorFailure` when one may not."""

    def stop(self, deliver: Deliver | None = None, drain_timeout: float = 10.0) -> None:
        """Staged, idempotent shutdown; batches drained meanwhile (up to ``drain_timeout``
        seconds; 0: an immediate stop) go to ``deliver``."""

    def state(self) -> dict[str, Any]:
        """The actors' state for a checkpoint (plain data)."""

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue from :meth:`state` (before :meth:`start`)."""

    def accounting(self) -> dict[str, int]:
        """Transitions this session: ``sent``, ``received``, ``dropped`` (sampled, not sent at
        the stop); ``received_total``: received over all sessions of the run."""

    def alive(self) -> int:
        """Actors running now."""

    def restarts(self) -> int:
        """Restarts so far, all actors together."""


def accounting_of(
    records: Sequence[ActorRecord], kept: Sequence[ActorRecord] = ()
) -> dict[str, int]:
    """The :meth:`Actors.accounting` of the records of the slots a session runs and of those it
    keeps (see :meth:`~border_py.actors.settings.ActorSettings.slots`: they count in
    ``received_total`` alone)."""
    return {
        "sent": sum(r.sent for r in records),
        "received": sum(r.received_session for r in records),
        "dropped": sum(r.dropped for r in records),
        "received_total": sum(r.received for r in [*records, *kept]),
    }


def policy_dtype_of(records: Sequence[ActorRecord]) -> str | None:
    """The precision a session's actors acted in (``result.json``'s ``policy_dtype``): float32 or
    bfloat16 when every actor that said acted in it, ``mixed`` when they differ (Ray actors on
    nodes with and without AMX: the log's line of each says which), None when none said."""
    found = {r.policy_dtype for r in records if r.policy_dtype is not None}
    if not found:
        return None
    return found.pop() if len(found) == 1 else "mixed"


def slots_state(records: Sequence[ActorRecord], kept: Sequence[ActorRecord]) -> dict[str, Any]:
    """What actors of slots save (their :meth:`Actors.state`): the record of every slot of the
    run, those they run first (``records``), then those they keep (``kept``)."""
    return {"actors": [record.state() for record in [*records, *kept]]}


def env_steps_per_batch(n_buffer: int, agent: Agent) -> int:
    """About the env steps an actor takes to fill a batch of ``n_buffer`` (``actor_manager.
    n_buffer``): one per transition; for a recurrent agent, whose envs each start a sequence every
    ``period`` env steps, ``period`` per sequence."""
    return n_buffer * agent.period if isinstance(agent, RecurrentActing) else n_buffer
