"""Evaluation in its own process, so the learner never stops optimizing to evaluate.

The learner hands the worker a copy of the weights of opt step N; the worker plays the
evaluation episodes and returns the result tagged with N. At most one request is in flight: a
request made while the worker is busy is refused (and logged) rather than queued.
"""

from __future__ import annotations

import contextlib
import logging
import queue as queue_lib
import traceback
from multiprocessing.context import BaseContext
from typing import Any

import torch

from border_py.agents.factory import build_agent
from border_py.envs.factory import build_env_factory
from border_py.errors import RunError
from border_py.evaluation.evaluator import EvalResult, Evaluator
from border_py.processes import init_child, parent_alive

log = logging.getLogger(__name__)


def eval_main(
    config: dict[str, Any], settings: dict[str, int], requests: Any, results: Any
) -> None:
    """Entry point of the evaluator process."""
    parent_pid = init_child("evaluator")
    try:
        env_factory = build_env_factory(config)
        agent = build_agent(config, env_factory.spaces(), "cpu", "evaluator")
        evaluator = Evaluator(
            env_factory, settings["episodes"], settings["seed"], settings["max_steps"]
        )
        while parent_alive(parent_pid):
            try:
                request = requests.get(timeout=0.5)
            except queue_lib.Empty:
                continue
            if request is None:
                break
            opt_steps, env_steps, state = request
            agent.load_policy_state(state)
            results.put((opt_steps, env_steps, evaluator.evaluate(agent)), timeout=60)
        evaluator.close()
    except Exception:
        results.put(("error", traceback.format_exc(), None), timeout=5)
        raise SystemExit(1) from None


class EvalWorker:
    """The learner's handle on the evaluator process.

    Args:
        ctx: the multiprocessing context.
        config: the resolved run config.
        episodes: episodes per evaluation.
        seed: base reset seed of the evaluation episodes.
        max_steps: step cap per episode.
    """

    def __init__(
        self, ctx: BaseContext, config: dict[str, Any], episodes: int, seed: int, max_steps: int
    ) -> None:
        self.requests = ctx.Queue(maxsize=1)
        self.results = ctx.Queue()
        settings = {"episodes": episodes, "seed": seed, "max_steps": max_steps}
        self.process = ctx.Process(
            target=eval_main,
            args=(config, settings, self.requests, self.results),
            name="border-evaluator",
        )
        self.process.start()
        self.pending: dict[
            int, tuple[dict[str, torch.Tensor], Any]
        ] = {}  # opt step -> (weights, snapshot)
        self._closed = False

    @property
    def busy(self) -> bool:
        """Whether an evaluation is in flight."""
        return bool(self.pending)

    def request(
        self, opt_steps: int, env_steps: int, state: dict[str, torch.Tensor], snapshot: Any = None
    ) -> bool:
        """Ask for an evaluation of ``state`` (the weights of ``opt_steps``); False if busy.

        ``snapshot`` (e.g. the learner's full state at ``opt_steps``) comes back with the result.
        """
        if self.busy:
            return False
        self.pending[opt_steps] = (state, snapshot)
        self.requests.put((opt_steps, env_steps, state), timeout=5)
        return True

    def poll(
        self, timeout: float = 0.0
    ) -> list[tuple[int, int, EvalResult, dict[str, torch.Tensor]]]:
        """Finished evaluations as (opt_steps, env_steps, result, weights evaluated)."""
        done = []
        while True:
            try:
                item = (
                    self.results.get(timeout=timeout) if timeout > 0 else self.results.get_nowait()
                )
            except queue_lib.Empty:
                break
            timeout = 0.0
            if item[0] == "error":
                log.error("the evaluator crashed:\n%s", item[1].rstrip())
                raise RunError("the evaluator crashed; see the log for its traceback")
            opt_steps, env_steps, result = item
            done.append((opt_steps, env_steps, result, *self.pending.pop(opt_steps)))
        if self.busy and not self.process.is_alive():
            raise RunError(f"the evaluator died (exit code {self.process.exitcode})")
        return done

    def close(self, timeout: float = 5.0) -> None:
        """Ask the worker to exit, then join, then kill (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(queue_lib.Full):
            self.requests.put(None, timeout=1)
        self.process.join(timeout=timeout)
        if self.process.is_alive():  # it ignores SIGTERM (see init_child): kill it
            self.process.kill()
            self.process.join(timeout=timeout)
        for q in (self.requests, self.results):
            q.close()
            q.cancel_join_thread()
