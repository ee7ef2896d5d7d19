"""A run's honest score: its final weights and its best checkpoint's, played on fresh episodes.

A run's ``best`` checkpoint is the one whose selection evaluation (``trainer.eval_episodes``
episodes, on the same reset seeds every time) scored highest, so its score is the maximum of noisy
estimates: optimistic. At the run's end, the final weights and ``best``'s each play
``trainer.final_eval_episodes`` episodes (both the same ones) on reset seeds that no selection
evaluation used (:func:`~border_py.evaluation.seeds.fresh_seeds`, stream ``final``), in the
trainer's own evaluation service (the learner's process, or the evaluator process);
``result.json`` reports them as ``final_eval`` and ``best_eval``. A stop signal ends them within an
env step in either service (a score not measured by then is left out).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from border_py.errors import ConfigError
from border_py.evaluation.evaluator import EvalResult
from border_py.evaluation.seeds import fresh_seeds
from border_py.evaluation.service import EvalService
from border_py.recorders.console import format_number
from border_py.runs.checkpoint import load_checkpoint
from border_py.runs.timeline import is_complete

__all__ = ["PolicySnapshot", "best_snapshot", "final_scores", "final_seeds", "score_scalars"]

log = logging.getLogger(__name__)

FINAL_STREAM = "final"  # the seed stream of the final evaluations
FINAL_SCORE_SECONDS = 3600.0  # the longest one final evaluation is waited for (a hang is caught
# sooner: the evaluator's heartbeat)


def final_seeds(root_seed: int, episodes: int) -> range:
    """The reset seeds of the final evaluations of a run with ``root_seed`` (empty for 0)."""
    return fresh_seeds(root_seed, episodes, FINAL_STREAM) if episodes else range(0)


@dataclass(frozen=True)
class PolicySnapshot:
    """A policy to evaluate and the moment of the run it was taken at."""

    opt_steps: int
    env_steps: int
    policy: dict[str, torch.Tensor]


def best_snapshot(best: Path) -> PolicySnapshot | None:
    """The policy of the run's ``best`` checkpoint dir (None: there is none, or it is unreadable)."""
    if not is_complete(best):
        return None
    try:
        checkpoint = load_checkpoint(best, full=False)
    except ConfigError as exc:
        log.warning("no re-evaluation of the best checkpoint: %s", exc)
        return None
    meta = checkpoint.meta
    return PolicySnapshot(int(meta["opt_steps"]), int(meta["env_steps"]), checkpoint.policy)


def score_record(result: EvalResult, opt_steps: int) -> dict[str, Any]:
    """A final evaluation as ``result.json`` holds it: mean and std of the returns, the episodes,
    their first and last reset seed, the opt step of the weights."""
    seeds = result.seeds
    return {
        "return_mean": result.return_mean,
        "return_std": result.return_std,
        "episodes": len(result.episode_returns),
        "seeds": [seeds[0], seeds[-1]] if seeds else None,
        "opt_steps": opt_steps,
    }


def score_scalars(scores: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The final evaluations as the scalars a run's recorders get at its end:
    ``eval/final_return_mean``, ``eval/final_return_std``, ``eval/final_episodes`` (and
    ``eval/best_*`` the same) for each of ``final_eval`` and ``best_eval`` measured."""
    scalars: dict[str, float] = {}
    for name, score in scores.items():
        prefix = f"eval/{name.removesuffix('_eval')}"
        scalars[f"{prefix}_return_mean"] = score["return_mean"]
        scalars[f"{prefix}_return_std"] = score["return_std"]
        scalars[f"{prefix}_episodes"] = score["episodes"]
    return scalars


def play(
    service: EvalService, snapshot: PolicySnapshot, seeds: range, stop: Callable[[], bool]
) -> EvalResult | None:
    """``snapshot`` played on ``seeds`` by ``service`` (None: it was busy, or ``stop()`` came, or
    :data:`FINAL_SCORE_SECONDS` passed, first). An evaluation in another process is waited for
    while ``stop()`` is False; one in this process asks ``stop()`` at every step."""
    asked = not stop() and service.request(
        snapshot.opt_steps, snapshot.env_steps, snapshot.policy, lambda: ({}, None), seeds, stop
    )
    deadline = time.monotonic() + FINAL_SCORE_SECONDS
    while asked and not stop() and time.monotonic() < deadline:
        for outcome in service.poll(0.2):
            return outcome.result
        service.check()
    return None


def final_scores(
    service: EvalService,
    seeds: range,
    final: PolicySnapshot,
    best: PolicySnapshot | None,
    stop: Callable[[], bool],
) -> dict[str, dict[str, Any]]:
    """``final_eval`` (the final weights) and ``best_eval`` (``best``'s), each played on ``seeds``;
    a key is left out when it was not measured (no best checkpoint, a stop signal, the time limit:
    each said in a warning). Best weights that are the final ones are not played twice."""
    scores: dict[str, dict[str, Any]] = {}
    result = play(service, final, seeds, stop)
    if result is None:
        log.warning("final evaluation cut short%s: result.json has no final_eval", _why(stop))
        return scores
    scores["final_eval"] = score_record(result, final.opt_steps)
    if best is not None:
        same = best.opt_steps == final.opt_steps
        best_result = result if same else play(service, best, seeds, stop)
        if best_result is not None:
            scores["best_eval"] = score_record(best_result, best.opt_steps)
        else:
            log.warning(
                "best/'s final evaluation cut short%s: result.json has no best_eval", _why(stop)
            )
    for name, score in scores.items():
        log.info(
            "%s: %s ± %s over %d fresh episodes (opt %d weights, reset seeds %d..%d)",
            name,
            format_number(score["return_mean"]),
            format_number(score["return_std"]),
            score["episodes"],
            score["opt_steps"],
            *score["seeds"],
        )
    return scores


def _why(stop: Callable[[], bool]) -> str:
    """What cut a final evaluation short, for its warning."""
    if stop():
        return " by a stop signal"
    return f" (the evaluator was busy, or no result within {FINAL_SCORE_SECONDS:g} s)"
