"""The seam between the learning loop and wherever actors run.

The loop (:mod:`border_py.trainers.loop`) talks to actors only through :class:`ActorBackend`:
it starts them, publishes weights, polls for batches, checks their health, stops them, and saves
their state. Three backends implement it around the same sampler code
(:class:`~border_py.actors.sampler.Sampler`): one actor in the learner's own process
(:class:`~border_py.actors.inline.InlineActor`, the serial trainer), local actor processes
(:class:`~border_py.actors.local.ActorManager`) and, with the ``[ray]`` extra, Ray actors.
:class:`ActorSettings` holds the ``actor_manager`` keys they share.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

import gymnasium as gym
import torch

from border_py.actors.process import ActorSpec
from border_py.agents.base import Agent
from border_py.agents.inference import ACTING_DTYPES
from border_py.config import fraction, non_negative, positive, require
from border_py.errors import RunError
from border_py.processes.children import Context, forkserver_context
from border_py.processes.supervision import RestartPolicy
from border_py.resources import MAX_N_BUFFER, MAX_QUEUE_SIZE, at_most, enforced
from border_py.transport.batch import ReceivedBatch

log = logging.getLogger(__name__)

Deliver = Callable[[ReceivedBatch], None]


class ActorFailure(RunError):
    """An actor (or the evaluator) failed in a way a restart cannot mend."""


def apex_epsilons(n: int, eps: float, alpha: float) -> list[float]:
    """Ape-X's epsilons for ``n`` explorers: eps_i = eps ** (1 + alpha * i / (n - 1)); eps alone
    when n == 1."""
    if n == 1:
        return [eps]
    return [eps ** (1 + alpha * i / (n - 1)) for i in range(n)]


@dataclass(eq=False)
class ActorSettings:
    """The ``actor_manager`` keys every backend shares.

    Args:
        n_actors: actors (processes, or Ray actors).
        n_envs_per_actor: envs each actor steps together as a gymnasium vector env, with one
            batched policy call per step.
        n_buffer: transitions an actor accumulates before sending them (border's name).
        exploration: ``schedule`` (every actor follows the agent's own schedule) or ``apex``
            (fixed epsilons over all actors x envs: env j of actor i, the g-th of N = n_actors *
            n_envs_per_actor explorers with g = i * n_envs_per_actor + j, acts with
            eps ** (1 + alpha * g / (N - 1)), as each Ape-X actor in the paper).
        apex_eps: Ape-X's base epsilon.
        apex_alpha: Ape-X's exponent spread.
        queue_size: batches each actor may have in flight to the learner before it waits
            (back-pressure).
        max_restarts: restarts allowed per actor (and for the evaluator) before the run aborts.
        heartbeat_timeout: seconds an actor (or the evaluator) may stay silent (an env whose
            ``step`` never returns, a deadlock) before it is killed and restarted.
        policy_dtype: the precision actors act in: ``float32``, or ``bfloat16`` for agents that
            offer it (DQN with a CNN torso: :class:`~border_py.agents.inference.ConvInference`):
            on CPUs with AMX, 2.4x faster for Pong's Nature CNN and 1.4x for MinAtar's network.
            The learner, its updates and the evaluator stay float32.
    """

    n_actors: int = 1
    n_envs_per_actor: int = 1
    n_buffer: int = 100
    exploration: str = "schedule"
    apex_eps: float = 0.4
    apex_alpha: float = 7.0
    queue_size: int = 8
    max_restarts: int = 3
    heartbeat_timeout: float = 60.0
    policy_dtype: str = "float32"

    def __post_init__(self) -> None:
        positive("n_actors", self.n_actors, int)
        positive("n_envs_per_actor", self.n_envs_per_actor, int)
        positive("n_buffer", self.n_buffer, int)
        require(
            "exploration",
            self.exploration in ("schedule", "apex"),
            "'schedule' or 'apex'",
            self.exploration,
        )
        fraction("apex_eps", self.apex_eps)
        non_negative("apex_alpha", self.apex_alpha, float)
        positive("queue_size", self.queue_size, int)
        non_negative("max_restarts", self.max_restarts)
        positive("heartbeat_timeout", self.heartbeat_timeout)
        self.heartbeat_timeout = float(self.heartbeat_timeout)
        require(
            "policy_dtype",
            self.policy_dtype in ACTING_DTYPES,
            " or ".join(repr(d) for d in ACTING_DTYPES),
            self.policy_dtype,
        )

    def epsilons(self, n_actors: int | None = None) -> list[list[float] | None]:
        """Per actor: the fixed epsilon of each of its envs (Ape-X), or None (the agent's own
        schedule). ``n_actors`` overrides the setting (the serial trainer has one actor)."""
        n = self.n_actors if n_actors is None else n_actors
        if self.exploration != "apex":
            return [None] * n
        k = self.n_envs_per_actor
        flat = apex_epsilons(n * k, self.apex_eps, self.apex_alpha)
        return [flat[i * k : (i + 1) * k] for i in range(n)]

    def spec(self, index: int, record: ActorRecord) -> ActorSpec:
        """What starts the current incarnation of actor ``index`` (``record``: the slot's
        counters): its envs, batch size and exploration."""
        return ActorSpec(
            index=index,
            incarnation=record.incarnation,
            n_envs=self.n_envs_per_actor,
            n_buffer=self.n_buffer,
            epsilons=self.epsilons()[index],
            policy_dtype=self.policy_dtype,
        )

    def slots(
        self, resume: dict[str, Any] | None
    ) -> tuple[list[ActorRecord], list[ActorRecord], list[RestartPolicy]]:
        """The records of the slots a start runs and of those it keeps, and each run slot's
        restart policy.

        ``resume``: what the backend saved (:func:`slots_state`). The first ``n_actors`` slots
        run: a saved one continues its record at its next incarnation, one never run before
        starts afresh. A saved slot beyond ``n_actors`` (a resume lowered it) is kept as saved
        and saved again: a later session that runs it again continues its incarnations, so its
        env seeds and frame source (derived from the incarnation) are never an earlier life's,
        and its transitions stay in the run's totals.
        """
        saved = (resume or {}).get("actors", [])
        records = [ActorRecord.resumed(state) for state in saved[: self.n_actors]]
        records += [ActorRecord() for _ in range(self.n_actors - len(records))]
        kept = [ActorRecord.kept(state) for state in saved[self.n_actors :]]
        if kept:
            log.info(
                "actor_manager.n_actors=%d: not running actor slot%s %s this session (their"
                " records are kept for a later one)",
                self.n_actors,
                "s" if len(kept) > 1 else "",
                ", ".join(str(i) for i in range(self.n_actors, len(saved))),
            )
        policies = [RestartPolicy(f"actor {i}", self.max_restarts) for i in range(self.n_actors)]
        return records, kept, policies

    def check_resources(
        self, config: dict[str, Any], spaces: tuple[gym.Space, gym.Space], n_step: int
    ) -> None:
        """Bound what these actors would take before any starts (see :mod:`border_py.resources`;
        ``config``: the run's, ``spaces`` and ``n_step``: the batches' shapes). Here the batch
        counts every backend shares; backends add what they take of the machine."""
        enforce = enforced(config)
        at_most(
            "actor_manager.queue_size",
            self.queue_size,
            MAX_QUEUE_SIZE,
            "batches in flight per actor (locally each also puts a ~360 B notice in the actor's"
            " 64 KiB pipe, which blocks the actor and its heartbeat when full)",
            enforce,
        )
        at_most(
            "actor_manager.n_buffer",
            self.n_buffer,
            MAX_N_BUFFER,
            "transitions per batch (each sampled with one copy of the weights)",
            enforce,
        )

    def context(self) -> Context:
        """The multiprocessing context of the run's local helper processes (the evaluator)."""
        if "forkserver" in mp.get_all_start_methods():
            return forkserver_context()
        return cast(Context, mp.get_context("spawn"))


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
    """What a backend needs to start its actors.

    Attributes:
        config: the resolved run config (actors build their env and agent from it).
        spaces: the env's (observation, action) spaces.
        agent: the learner's agent (the in-process backend acts with it).
        policy: the learner's current acting weights (what actors start from).
        opt_steps: the learner's opt steps (a resumed run starts later).
        env_steps: the run's env steps so far (where the actors' exploration schedules start:
            :mod:`border_py.actors.clock`).
        resume: the trainer state of the checkpoint a resumed run continues, else None.
    """

    config: dict[str, Any]
    spaces: tuple[gym.Space, gym.Space]
    agent: Agent
    policy: dict[str, torch.Tensor]
    opt_steps: int
    env_steps: int = 0
    resume: dict[str, Any] | None = None


@runtime_checkable
class ActorBackend(Protocol):
    """What the learning loop needs from the actor side, wherever the actors run."""

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
    """The :meth:`ActorBackend.accounting` of the records of the slots a session runs and of
    those it keeps (see :meth:`ActorSettings.slots`: they count in ``received_total`` alone)."""
    return {
        "sent": sum(r.sent for r in records),
        "received": sum(r.received_session for r in records),
        "dropped": sum(r.dropped for r in records),
        "received_total": sum(r.received for r in [*records, *kept]),
    }


def slots_state(records: Sequence[ActorRecord], kept: Sequence[ActorRecord]) -> dict[str, Any]:
    """What a backend of actor slots saves (its :meth:`ActorBackend.state`): the record of every
    slot of the run, those it runs first (``records``), then those it keeps (``kept``)."""
    return {"actors": [record.state() for record in [*records, *kept]]}
