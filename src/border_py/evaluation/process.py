"""The evaluator process: what it is started with, its entry (:func:`eval_main`), and how it
plays a request (the learner's side: :mod:`border_py.evaluation.worker`).

It waits for an :class:`~border_py.transport.messages.EvalRequest`, reads the weights of its
version from shared memory, plays the episodes (beating its heartbeat at every env step) and
answers with an :class:`~border_py.transport.messages.EvalDone`; a crash is reported to the learner
as a :class:`~border_py.transport.messages.WorkerFailed`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import gymnasium as gym

from border_py.agents.contract import failure_report
from border_py.agents.factory import build_agent
from border_py.envs.factory import build_env_factory
from border_py.evaluation.evaluator import EvaluationStopped, Evaluator
from border_py.processes.children import init_child
from border_py.processes.supervision import Heartbeats
from border_py.transport.channel import LearnerGone, receive, send
from border_py.transport.messages import EvalDone, EvalRequest, WorkerFailed
from border_py.transport.weights import SharedWeights

__all__ = ["EvalLinks", "EvalSettings", "eval_main"]

log = logging.getLogger(__name__)

REQUEST_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class EvalSettings:
    """How the evaluator plays: episodes, their base reset seed, the step cap per episode, the
    probability of a random action; and its agent's seed (derived from the run's root seed)."""

    episodes: int
    seed: int
    max_steps: int
    epsilon: float = 0.0
    agent_seed: int = field(kw_only=True)


@dataclass(frozen=True)
class EvalLinks:
    """The evaluator's ends of what it shares with the learner."""

    requests: Connection  # the evaluator reads
    results: Connection  # the evaluator writes
    weights: SharedWeights
    heartbeats: Heartbeats
    stopping: Any


class _Beating(gym.Wrapper):
    """Beats the evaluator's heartbeat at every env step."""

    def __init__(self, env: gym.Env, beat: Callable[[], None]) -> None:
        super().__init__(env)
        self._beat = beat

    def step(self, action: Any) -> Any:
        self._beat()
        return self.env.step(action)


def eval_main(config: dict[str, Any], settings: EvalSettings, links: EvalLinks) -> None:
    """Entry point of the evaluator process."""
    init_child("evaluator", links.stopping)

    def beat() -> None:
        links.heartbeats.beat(0)

    try:
        env_factory = build_env_factory(config)
        agent = build_agent(config, env_factory.spaces(), "cpu", settings.agent_seed)
        evaluator = Evaluator(
            env_factory,
            settings.episodes,
            settings.seed,
            settings.max_steps,
            epsilon=settings.epsilon,
        )
        evaluator.env = _Beating(evaluator.env, beat)
        while not links.stopping.value:
            beat()
            for request in _requests(links.requests):
                _evaluate(request, agent, evaluator, links)
        evaluator.close()
    except LearnerGone:
        return
    except Exception as exc:
        error = failure_report(exc)
        try:
            send(links.results, WorkerFailed(actor=-1, incarnation=0, error=error))
        except OSError:  # the learner is gone too: say it here (stderr) at least
            log.error("the evaluator crashed:\n%s", error)
        raise SystemExit(1) from None


def _requests(requests: Connection) -> list[EvalRequest]:
    """The next request, if one comes within :data:`REQUEST_POLL_SECONDS`.

    Raises:
        LearnerGone: the learner closed its end (an error of the evaluator's own, e.g. an env's
            OSError, is not mistaken for it).
    """
    try:
        if not requests.poll(REQUEST_POLL_SECONDS):
            return []
        return receive(requests, 1)
    except (EOFError, OSError):
        raise LearnerGone("the learner closed the channel") from None


def _evaluate(request: EvalRequest, agent: Any, evaluator: Evaluator, links: EvalLinks) -> None:
    """Load the requested weights (those of ``request.version``) and play the episodes."""
    deadline = time.monotonic() + 60
    while True:
        latest = links.weights.read()
        if latest is not None and latest[0] == request.version:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the weights of version {request.version} never became readable")
        time.sleep(0.01)
    agent.load_policy_state(latest[2])
    try:  # the learner's shutdown ends an evaluation within a step: close() need not kill
        result = evaluator.evaluate(agent, request.seeds, lambda: bool(links.stopping.value))
    except EvaluationStopped:
        return
    done = EvalDone(
        opt_steps=request.opt_steps,
        env_steps=request.env_steps,
        return_mean=result.return_mean,
        return_std=result.return_std,
        return_min=result.return_min,
        return_max=result.return_max,
        length_mean=result.length_mean,
        returns=result.episode_returns,
        lengths=result.episode_lengths,
        seeds=result.seeds,
    )
    try:
        send(links.results, done)
    except OSError:
        raise LearnerGone("the learner closed the channel") from None
