"""The actors' settings: the ``actor_manager`` group's keys, what every kind of actors shares.

:class:`ActorSettings` holds the keys every runtime of :class:`~border_py.actors.runtime.Actors`
takes, checks them, and derives from them what an actor slot starts with (its spec, its restart
policy, its record on a resume). A settings object starts nothing and opens nothing: the kinds
that run actors of their own subclass it and build their runtime in :meth:`ActorSettings.runtime`
(:class:`~border_py.actors.local.LocalActorSettings`,
:class:`~border_py.actors.ray.actors.RayActorSettings`); the serial trainer's in-process actor
takes any of them (:class:`~border_py.actors.inline.InlineActors`).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym

from border_py.actors.process import ActorSpec
from border_py.actors.runtime import ActorRecord, Actors
from border_py.agents.base import Agent
from border_py.agents.precision import POLICY_DTYPES
from border_py.config import fraction, non_negative, positive, require
from border_py.errors import ConfigError
from border_py.processes.children import Context, forkserver_context
from border_py.processes.supervision import RestartPolicy
from border_py.resources import MAX_N_BUFFER, MAX_QUEUE_SIZE, at_most

__all__ = ["ActorSettings", "apex_epsilons"]

log = logging.getLogger(__name__)


def apex_epsilons(n: int, eps: float, alpha: float) -> list[float]:
    """Ape-X's epsilons for ``n`` explorers: eps_i = eps ** (1 + alpha * i / (n - 1)); eps alone
    when n == 1."""
    if n == 1:
        return [eps]
    return [eps ** (1 + alpha * i / (n - 1)) for i in range(n)]


@dataclass(kw_only=True)
class ActorSettings:
    """The ``actor_manager`` keys every kind of actors shares; their values come from the config
    (``conf/actor_manager/_actors.yaml`` ships them: no field here has a default of its own).

    Args:
        n_actors: actors (processes, or Ray actors).
        n_envs_per_actor: envs each actor steps together as a gymnasium vector env, with one
            batched policy call per step.
        n_buffer: transitions an actor accumulates before sending them (border's name; a
            recurrent agent's actor: sequences).
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
        policy_dtype: the precision actors act in: ``auto`` (bfloat16 where the agent offers it
            and the actors' CPU has AMX bfloat16 units, float32 elsewhere and in the serial
            trainer: :mod:`border_py.agents.precision`), ``float32``, or ``bfloat16`` for agents
            that offer it (DQN with a CNN torso: :class:`~border_py.agents.inference.
            ConvInference`): on CPUs with AMX, 2.4x faster for Pong's Nature CNN and 1.4x for
            MinAtar's network. The learner, its updates and the evaluator stay float32.
    """

    n_actors: int
    n_envs_per_actor: int
    n_buffer: int
    exploration: str
    apex_eps: float
    apex_alpha: float
    queue_size: int
    max_restarts: int
    heartbeat_timeout: float
    policy_dtype: str

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
            self.policy_dtype in POLICY_DTYPES,
            f"one of {', '.join(POLICY_DTYPES)}",
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

    def spec(
        self, index: int, record: ActorRecord, seed: int, policy_dtype: str | None = None
    ) -> ActorSpec:
        """What starts the current incarnation of actor ``index`` (``record``: the slot's
        counters; ``seed``: the run's root seed): its envs, batch size and exploration, and the
        precision it acts in (``policy_dtype``, the setting resolved by the runtime: see
        :mod:`border_py.agents.precision`; None: the setting as it is)."""
        return ActorSpec(
            index=index,
            incarnation=record.incarnation,
            n_envs=self.n_envs_per_actor,
            n_buffer=self.n_buffer,
            epsilons=self.epsilons()[index],
            policy_dtype=self.policy_dtype if policy_dtype is None else policy_dtype,
            seed=seed,
        )

    def slots(
        self, resume: dict[str, Any] | None
    ) -> tuple[list[ActorRecord], list[ActorRecord], list[RestartPolicy]]:
        """The records of the slots a start runs and of those it keeps, and each run slot's
        restart policy.

        ``resume``: what the actors saved (:func:`~border_py.actors.runtime.slots_state`). The first ``n_actors`` slots
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
        self,
        config: dict[str, Any],
        spaces: tuple[gym.Space, gym.Space],
        agent: Agent,
        enforce: bool,
    ) -> None:
        """Bound what these actors would take before any starts (see :mod:`border_py.resources`;
        ``config``: the run's, ``spaces`` and ``agent``: the batches' shapes, ``enforce``: the
        run's ``check_resources``). Here the batch counts every kind of actors shares; each adds
        what it takes of the machine."""
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

    def runtime(self) -> Actors:
        """The actors these settings configure, not started yet (the async trainer's wiring
        builds them; :meth:`~border_py.actors.runtime.Actors.start` starts them).

        Raises:
            ConfigError: these settings have no actors of their own (the serial trainer's
                in-process actor takes any settings; the async trainer needs a kind that runs).
        """
        raise ConfigError(
            f"actor_manager: {type(self).__name__} holds settings only; the async trainer needs"
            " settings of actors that run (actor_manager=default)"
        )
