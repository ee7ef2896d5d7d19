"""The learning loop's view of evaluation: ask for one, collect results later.

Two services implement :class:`EvalService`: :class:`InlineEvaluation` plays the episodes at once
in the learner's process (the serial trainer), :class:`~border_py.evaluation.worker.EvalWorker`
in an evaluator process while the learner keeps optimizing (the async trainer). Either way a
result comes back as an :class:`EvalOutcome` tagged with the opt step of the weights it evaluated.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from border_py.agents.base import Agent
from border_py.evaluation.evaluator import EvalResult, EvaluationStopped, Evaluator

__all__ = ["EvalOutcome", "EvalService", "InlineEvaluation", "Snapshot"]

log = logging.getLogger(__name__)

# the learner's (agent state, trainer state) at the evaluated opt step, for a best checkpoint (the
# trainer state is the learner's own: carried, never read, here)
Snapshot = Callable[[], tuple[dict[str, Any], Any]]


@dataclass
class EvalOutcome:
    """An evaluation of the weights of ``opt_steps`` (taken after ``env_steps`` env steps)."""

    opt_steps: int
    env_steps: int
    result: EvalResult
    policy: dict[str, torch.Tensor]
    snapshot: Snapshot


class EvalService(Protocol):
    """Where evaluations run."""

    @property
    def busy(self) -> bool:
        """Whether an evaluation is in flight."""

    def request(
        self,
        opt_steps: int,
        env_steps: int,
        policy: dict[str, torch.Tensor],
        snapshot: Snapshot,
        seeds: range | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Evaluate ``policy`` (the weights of ``opt_steps``) on the reset seeds ``seeds`` (None:
        the run's selection evaluation episodes); False if busy (not queued).

        ``stop``: for an evaluation this call plays itself, asked at every step; once it returns
        True the evaluation is abandoned and no outcome comes. A service whose evaluations run
        elsewhere needs none (its caller stops waiting for the outcome) and ignores it.
        """

    def poll(self, timeout: float = 0.0) -> list[EvalOutcome]:
        """Finished evaluations, waiting up to ``timeout`` seconds for one."""

    def check(self) -> None:
        """Restart an evaluator that died or went silent (raises when it may not)."""

    def restarts(self) -> int:
        """Restarts so far."""

    def close(self) -> None:
        """Release everything (idempotent)."""


class InlineEvaluation:
    """Evaluation in the learner's process, with the learner's agent, right when asked.

    Args:
        evaluator: plays the episodes.
        agent: the learner's agent (acting greedily does not touch its training state).
    """

    def __init__(self, evaluator: Evaluator, agent: Agent) -> None:
        self.evaluator, self.agent = evaluator, agent
        self._done: list[EvalOutcome] = []

    @property
    def busy(self) -> bool:
        """Never: an evaluation is over when :meth:`request` returns."""
        return False

    def request(
        self,
        opt_steps: int,
        env_steps: int,
        policy: dict[str, torch.Tensor],
        snapshot: Snapshot,
        seeds: range | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Play the evaluation episodes now, unless ``stop()`` ends them (then no outcome comes).

        A selection evaluation (``seeds`` None) plays the learner's agent as it is: its weights are
        ``policy``. One on ``seeds`` (the run's final evaluations) may be of other weights (the
        best checkpoint's): the agent plays them, then gets its own back, stopped or not.
        """
        try:
            if seeds is None:
                result = self.evaluator.evaluate(self.agent, stop=stop)
            else:
                own = {k: v.detach().clone() for k, v in self.agent.policy_state().items()}
                self.agent.load_policy_state(policy)
                try:
                    result = self.evaluator.evaluate(self.agent, seeds, stop)
                finally:
                    self.agent.load_policy_state(own)
        except EvaluationStopped as stopped:
            log.info("evaluation of the opt %d weights %s", opt_steps, stopped)
            return True
        self._done.append(EvalOutcome(opt_steps, env_steps, result, policy, snapshot))
        return True

    def poll(self, timeout: float = 0.0) -> list[EvalOutcome]:
        """The evaluations done since the last call."""
        done, self._done = self._done, []
        return done

    def check(self) -> None:
        """Nothing to watch."""

    def restarts(self) -> int:
        """Never restarted."""
        return 0

    def close(self) -> None:
        """Close the evaluation env."""
        self.evaluator.close()
