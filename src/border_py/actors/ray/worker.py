"""The Ray side of an actor slot: :class:`SamplerActor`, run by ``ray.remote`` in a Ray worker.

It steps the same sampler as a local actor process (:func:`~border_py.actors.process.build_sampler`:
envs, a CPU copy of the agent, Ape-X epsilons, n-step, frames, actor-side priorities; a recurrent
agent's memory per env and its sequences) and returns each batch as its call's result. Ray's
workers import this module to unpickle the class: like the other child-process entry points it
imports no command-line, recording or Hydra machinery.
"""

from __future__ import annotations

import time
from typing import Any

from border_py.actors.clock import LocalClock
from border_py.actors.process import ActorSpec, build_sampler
from border_py.actors.sampler import Sampler, SampleStats
from border_py.agents.precision import resolve_on_cpu
from border_py.processes.children import worker_cpu
from border_py.transport.batch import ReceivedBatch
from border_py.transport.weights import PolicyWeights

__all__ = ["SamplerActor"]


class SamplerActor:
    """One incarnation of an actor slot inside a Ray worker process (wrapped by ``ray.remote``).

    Each :meth:`sample` call loads the weights it carries (if any), samples ``n_buffer``
    transitions (a recurrent agent's: sequences; each env's memory carries over from call to
    call) with the same sampler as an actor process and returns them with what the actor
    knew, as a :class:`~border_py.transport.batch.ReceivedBatch`. Its exploration starts at the
    run's env steps the call carries: what the learner received plus a batch for each call in
    flight before it (:meth:`~border_py.actors.ray.calls.Calls.top_up`).

    Args:
        spec: the slot, its incarnation, envs, batch size and exploration.
        config: the resolved run config (plain data).
    """

    def __init__(self, spec: ActorSpec, config: dict[str, Any]) -> None:
        worker_cpu()
        self.spec, self.config = spec, config
        self.sampler: Sampler | None = None
        self.clock = LocalClock()
        self.policy_opt_steps = 0
        self.loaded_at = 0.0
        self.sent = 0
        self.idle_since: float | None = None

    def node(self) -> tuple[str, str, str]:
        """(node id, node IP address, the precision this actor acts in) of the Ray node this
        actor runs on: ``policy_dtype=auto`` is decided by this node's CPU, as the sampler
        decides it (:func:`~border_py.actors.process.build_sampler`)."""
        import ray

        node_id, ip = ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()
        return node_id, ip, resolve_on_cpu(self.spec.policy_dtype)

    def sample(self, weights: PolicyWeights | None, position: int) -> ReceivedBatch:
        """Load ``weights`` (None: keep the current ones), sample one batch exploring from the
        run's env step ``position``, and return it.

        The envs and the agent copy are built by the first call (a bad env fails that call).
        ``waited`` is the time since the previous call ended: the actor idled, waiting for the
        learner to ask for more.
        """
        began = time.monotonic()
        waited = 0.0 if self.idle_since is None else began - self.idle_since
        if self.sampler is None:
            self.sampler = build_sampler(self.spec, self.config, self.clock)
        agent = self.sampler.agent
        if weights is not None:
            agent.load_policy_state(weights.state())
            self.policy_opt_steps, self.loaded_at = weights.opt_steps, time.time()
        self.clock.set(position)
        stats = SampleStats()
        batch = self.sampler.sample(self.spec.n_buffer, stats)
        self.sent += len(batch)
        self.idle_since = time.monotonic()
        return ReceivedBatch(
            actor=self.spec.index,
            transitions=batch,
            env_steps=stats.env_steps,
            episode_returns=stats.episode_returns,
            episode_lengths=stats.episode_lengths,
            policy_opt_steps=self.policy_opt_steps,
            loaded_at=self.loaded_at,
            exploration={k: float(v) for k, v in agent.exploration_stats().items()},
            waited=waited,
        )

    def finish(self) -> int:
        """Close the envs; return the transitions (sequences) this incarnation sent."""
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None
        return self.sent
