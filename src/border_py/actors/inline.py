"""One actor inside the learner's process: the serial trainer's actors.

It steps its vector env with the learner's own agent (so weights need no copying:
:class:`~border_py.transport.weights.InlineWeights`; the exploration schedule is the agent's), one
vector step per :meth:`InlineActors.poll`, and checkpoints its envs exactly (their current episodes
are replayed on resume): on CPU with a fixed seed, a serial run is exactly reproducible, across a
stop and a resume too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from border_py.actors.clock import LocalClock
from border_py.actors.runtime import ActorRecord, Deliver, Launch, accounting_of
from border_py.actors.sampler import Sampler, SampleStats, sampler_options
from border_py.actors.settings import ActorSettings
from border_py.agents.base import FixedEpsilon
from border_py.envs.factory import build_env_factory
from border_py.seeding import derive_seed
from border_py.transport.batch import ReceivedBatch
from border_py.transport.weights import InlineWeights

__all__ = ["InlineActors"]


class InlineActors:
    """The serial trainer's actors: one, in the learner's process (an
    :class:`~border_py.actors.runtime.Actors`).

    Args:
        settings: the ``actor_manager`` group (``n_envs_per_actor`` and the exploration keys
            apply; the process keys do not).
    """

    def __init__(self, settings: ActorSettings) -> None:
        self.settings = settings
        self.records = [ActorRecord()]
        self.sampler: Sampler | None = None
        self.weights = InlineWeights()
        self._resume: dict[str, Any] | None = None  # the envs' saved episodes (see restore)

    def start(self, launch: Launch) -> None:
        """Build the envs (a resumed run's replay their saved episodes: :meth:`restore`)."""
        config, agent = launch.config, launch.agent
        self.records[0].policy_dtype = "float32"  # it acts with the learner's own network
        epsilons = self.settings.epsilons(n_actors=1)[0]
        if epsilons is not None:
            if not isinstance(agent, FixedEpsilon):  # refused earlier, in build_components
                raise TypeError(f"{type(agent).__name__} cannot fix its epsilon (set_epsilon)")
            agent.set_epsilon(np.asarray(epsilons))
        self.sampler = Sampler(
            build_env_factory(config),
            agent,
            self.settings.n_envs_per_actor,
            derive_seed(launch.seed, "actor", 0, "env"),
            replayable=True,
            clock=LocalClock(launch.env_steps),  # the run's env steps: this actor takes them all
            **sampler_options(config),
        )
        self.publish(launch.policy, launch.opt_steps)
        if self._resume is not None:
            self.sampler.restore(self._resume)

    def publish(self, policy: dict[str, torch.Tensor], opt_steps: int) -> None:
        """Nothing to copy: the sampler acts with the learner's agent itself."""
        self.weights.publish(policy, opt_steps)

    def poll(self, timeout: float, deliver: Deliver) -> int:
        """Step every env once and deliver what that finished (transitions may still be None
        while n-step windows fill; a recurrent agent's: sequences, None while windows fill)."""
        assert self.sampler is not None, "start() first"
        stats = SampleStats()
        transitions = self.sampler.step(stats)
        batch = ReceivedBatch(
            actor=0,
            transitions=transitions,
            env_steps=stats.env_steps,
            episode_returns=stats.episode_returns,
            episode_lengths=stats.episode_lengths,
            policy_opt_steps=self.weights.opt_steps,
            exploration={k: float(v) for k, v in self.sampler.agent.exploration_stats().items()},
        )
        self.records[0].count(batch)
        if transitions is not None:
            self.records[0].sent += len(transitions)
        deliver(batch)
        return 1

    def halt(self) -> None:
        """Nothing to tell: the actor steps only when polled."""

    def check(self) -> None:
        """Nothing to watch: the actor is this process."""

    def stop(self, deliver: Deliver | None = None, drain_timeout: float = 10.0) -> None:
        """Close the envs (idempotent; nothing to drain)."""
        if self.sampler is not None:
            self.sampler.close()

    def state(self) -> dict[str, Any]:
        """The envs' current episodes and pending n-step windows, and the slot's counters."""
        assert self.sampler is not None
        return {"sampler": self.sampler.state(), "actor": self.records[0].state()}

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue from :meth:`state`: the slot's counters now, the envs' episodes as
        :meth:`start` builds the envs."""
        self._resume = saved["sampler"]
        self.records[0] = ActorRecord.resumed(saved.get("actor", _fresh()))

    def accounting(self) -> dict[str, int]:
        """Every transition the sampler emitted went straight into the replay buffer."""
        return accounting_of(self.records)

    def alive(self) -> int:
        """One actor: this process."""
        return 1

    def restarts(self) -> int:
        """Never restarted."""
        return 0


def _fresh() -> dict[str, Any]:
    return ActorRecord().state() | {"incarnation": -1}
