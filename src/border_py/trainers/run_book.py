"""A run's bookkeeping: recording, progress, evaluation results, best and periodic checkpoints,
and the run's callbacks (:mod:`border_py.callbacks`), which hear each of these."""

from __future__ import annotations

import io
import logging
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from rich.console import Console
from rich.table import Table

from border_py._version import __version__
from border_py.agents.base import Agent
from border_py.callbacks import Callbacks
from border_py.config import is_number
from border_py.evaluation.history import Evaluations, read_evaluations
from border_py.files import read_json
from border_py.layout import BEST, CHECKPOINTS, EVALUATIONS, META
from border_py.recorders import Recorder
from border_py.recorders.composite import build_recorders
from border_py.recorders.console import format_number
from border_py.recorders.progress import Budget, ProgressView, Steps
from border_py.runs.checkpoint import save_checkpoint
from border_py.runs.settings import RunSettings
from border_py.runs.state import TrainerState
from border_py.runs.timeline import is_complete, prune, step_name
from border_py.secrets import redact
from border_py.trainers.settings import LoopSettings, RunState

if TYPE_CHECKING:
    from border_py.actors.runtime import ActorRecord
    from border_py.evaluation.service import EvalOutcome

__all__ = ["RunBook"]

log = logging.getLogger(__name__)


def kept_best_return(checkpoints: Path, saved: float) -> float:
    """The best return a run resumed with its checkpoints in ``checkpoints`` goes on from, so that
    it always names the weights of ``checkpoints/best``: the return that checkpoint was saved for
    (its ``meta.json``; ``saved``, the resumed checkpoint's, when its meta does not say), or -inf
    when there is no complete ``best`` (the session's repair moved it aside:
    :meth:`~border_py.runs.session.RunSession.repair`; the run's next evaluation writes a new one).

    ``best`` can be newer than the checkpoint's evaluations without being set aside: an
    evaluation asked for at the checkpoint's opt step may end after it was written.
    """
    best = checkpoints / BEST
    if not is_complete(best):
        return -math.inf
    try:
        value = read_json(best / META).get("best_return")
    except (OSError, ValueError, AttributeError):
        return saved
    if not is_number(value) or not math.isfinite(value):
        return saved
    return float(value)


class RunBook:
    """Run bookkeeping shared by trainers: recording, progress, evaluations, best and periodic
    checkpoints; the owner of the run's evaluation history and training seconds (its
    :meth:`state`). Nothing is opened before :meth:`open`.

    Args:
        run_dir: the run directory.
        config: the resolved config (recorded, saved into checkpoints; its ``recorder`` group
            says where metrics go).
        run: the run's settings of ``config`` (``progress``/``progress_interval``: how the console
            shows the run).
        loop: the loop settings.
        spaces: the env's (observation, action) spaces, saved into checkpoints' meta.
        capacity: the replay buffer's capacity (shown as a fill ratio).
        n_actors: actor processes (None: the serial trainer).
        callbacks: the run's callbacks.
    """

    def __init__(
        self,
        run_dir: Path,
        config: dict[str, Any],
        run: RunSettings,
        loop: LoopSettings,
        spaces: tuple[Any, Any],
        capacity: int,
        n_actors: int | None = None,
        callbacks: Callbacks | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.callbacks = Callbacks() if callbacks is None else callbacks
        self.stopped_by_callback = False
        self.checkpoints = self.run_dir / CHECKPOINTS
        self.config, self.run, self.loop = config, run, loop
        self.spaces = {"observation_space": str(spaces[0]), "action_space": str(spaces[1])}
        self.capacity, self.n_actors = capacity, n_actors
        self.best_return = float("-inf")
        self.eval_returns: list[float] = []  # eval/return_mean of every evaluation, in order
        self.evaluations = Evaluations()  # their episodes: evaluations.npz
        self.final_scalars: dict[str, float] = {}  # the final evaluations' (trainers/final.py)
        self.seconds_before = 0.0
        self.resumed = False
        self.recorder: Recorder = build_recorders(config.get("recorder"))
        self._progress: ProgressView | None = None
        self.solved_at: dict[str, float] | None = None
        self.start = time.perf_counter()

    def state(self) -> dict[str, Any]:
        """The book's part of the run's state: the best return, every evaluation's, and the
        training seconds of all sessions."""
        return {
            "best_return": self.best_return,
            "eval_returns": list(self.eval_returns),
            "seconds": self.elapsed(),
        }

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue from :meth:`state`: recording then continues after the resumed opt steps, the
        evaluation history carries over, and the best return is that of the ``best`` checkpoint
        the run keeps (:func:`kept_best_return`); ``evaluations.npz`` keeps the evaluations the
        checkpoint counts (:func:`~border_py.evaluation.history.read_evaluations`)."""
        self.resumed = True
        self.best_return = kept_best_return(self.checkpoints, saved["best_return"])
        self._log_best_return(saved["best_return"])
        self.eval_returns = list(saved["eval_returns"])
        self.evaluations = read_evaluations(self.run_dir / EVALUATIONS, len(self.eval_returns))
        self.seconds_before = float(saved["seconds"])

    def open(self, counters: RunState) -> None:
        """Start recording and showing the run where its ``counters`` stand, and tell the
        callbacks it starts."""
        start = Steps(counters.opt_steps, counters.env_steps)
        resume_step = self.step_of(start.opt_steps, start.env_steps) if self.resumed else None
        try:  # a resumed run's events after the checkpoint (written before a crash) are discarded
            self.recorder.open(self.run_dir, self.config, resume_step)
        except BaseException:
            self.recorder.close("failed")  # whatever did open (e.g. TensorBoard of recorder=both)
            raise
        self._progress = ProgressView(
            Budget.of(self.loop.max_opts, self.loop.max_env_steps),
            start,
            self.run.progress,
            self.run.progress_interval,
            self.capacity,
            self.n_actors,
        )
        self.start = time.perf_counter()
        self.callbacks.on_start(self.run_dir, redact(self.config), start.opt_steps, start.env_steps)

    @property
    def progress(self) -> ProgressView:
        """The progress view (:meth:`open` first)."""
        assert self._progress is not None, "open() first"
        return self._progress

    def _log_best_return(self, saved: float) -> None:
        """Say why a resumed run's best return is not its checkpoint's (``saved``)."""
        best, was = format_number(self.best_return), format_number(saved)
        if not math.isfinite(self.best_return) and math.isfinite(saved):
            log.warning(
                "the best return starts afresh, not at the checkpoint's %s: no best/ holds weights"
                " of this timeline (the next evaluation writes one)",
                was,
            )
        elif self.best_return != saved:
            log.warning(
                "the best return is best/'s %s, not the checkpoint's %s: an evaluation that ended"
                " after the checkpoint saved it",
                best,
                was,
            )

    def step_of(self, opt_steps: int, env_steps: int) -> int:
        """The recorded step of a moment of the run (``trainer.log_step``)."""
        return env_steps if self.loop.log_step == "env_steps" else opt_steps

    def record(self, scalars: dict[str, Any], opt_steps: int, env_steps: int) -> None:
        """Record scalars at the moment (opt steps, env steps) on the run's step axis."""
        step = self.step_of(opt_steps, env_steps)
        self.recorder.scalars(scalars, step)
        self.callbacks.on_record(step, scalars)

    @property
    def finished(self) -> bool:
        """Whether an evaluation ended the run early (``target_return`` reached, or the
        callbacks asked to stop)."""
        return self.solved_at is not None or self.stopped_by_callback

    def elapsed(self) -> float:
        """Training seconds so far, earlier sessions of a resumed run included."""
        return self.seconds_before + time.perf_counter() - self.start

    def on_eval(self, outcome: EvalOutcome) -> None:
        """Record an evaluation at the opt step of the weights it evaluated (its episodes in
        ``evaluations.npz`` too); save ``best`` if it is a new best; note whether it ends the run
        (``target_return``, the callbacks)."""
        result, opt_steps, env_steps = outcome.result, outcome.opt_steps, outcome.env_steps
        self.record(result.scalars() | {"eval/env_steps": env_steps}, opt_steps, env_steps)
        self.eval_returns.append(result.return_mean)
        self.evaluations.add(
            self.run_dir / EVALUATIONS,
            outcome.env_steps,
            result.episode_returns,
            result.episode_lengths,
            self.loop.eval_episodes,
        )
        new_best = result.return_mean > self.best_return
        if new_best:
            self.best_return = result.return_mean
            agent_state, trainer_state = outcome.snapshot()  # as the evaluation was asked for
            path = self._write(
                BEST, outcome.policy, agent_state, trainer_state, None, {"eval": result.scalars()}
            )
            self.callbacks.on_save(path, opt_steps, env_steps)
        self.progress.on_eval(result.return_mean, self.best_return)
        target = self.loop.target_return
        if target is not None and self.solved_at is None and result.return_mean >= target:
            self.solved_at = {
                "opt_steps": opt_steps,
                "env_steps": env_steps,
                "seconds": self.elapsed(),
            }
        log.info(
            "opt %d | env steps %d | eval return %s ± %s (min %s, max %s)%s | %.0fs",
            opt_steps,
            env_steps,
            format_number(result.return_mean),
            format_number(result.return_std),
            format_number(result.return_min),
            format_number(result.return_max),
            " | new best" if new_best else "",
            self.elapsed(),
        )
        if self.callbacks.on_eval(opt_steps, env_steps, result.return_mean):
            log.info("stopping early at opt step %d: a callback's on_eval asked to", opt_steps)
            self.stopped_by_callback = True

    def save(
        self, agent: Agent, trainer_state: TrainerState, buffer: dict[str, Any] | None
    ) -> Path:
        """A checkpoint of the run as it is now (``trainer_state``, just captured),
        ``checkpoints/<opt_steps:09d>/``; older ones pruned.

        ``buffer`` (the replay buffer's arrays) is written when ``save_replay_buffer`` is on.
        """
        path = self._write(
            step_name(trainer_state.opt_steps),
            agent.policy_state(),
            agent.state_dict(),
            trainer_state,
            buffer if self.loop.save_replay_buffer else None,
            {},
        )
        prune(self.checkpoints, self.loop.keep_checkpoints)
        self.callbacks.on_save(path, trainer_state.opt_steps, trainer_state.env_steps)
        return path

    def _write(
        self,
        name: str,
        policy: dict[str, torch.Tensor],
        agent_state: dict[str, Any],
        trainer_state: TrainerState,
        buffer: dict[str, Any] | None,
        extra: dict[str, Any],
    ) -> Path:
        """Write checkpoint ``name`` of ``trainer_state`` with the book's part as it is now (a
        best checkpoint's state was captured when its evaluation was asked for); its
        ``meta.json`` is the state's summary and what people want to know of the checkpoint."""
        state = replace(trainer_state, **self.state())
        meta = state.summary() | {
            "spaces": self.spaces,
            "replay_buffer": buffer is not None,
            "border_py": __version__,
        }
        return save_checkpoint(
            self.checkpoints,
            name,
            policy=policy,
            agent_state=agent_state,
            state=state,
            config=redact(self.config),  # secrets are never recorded
            meta=meta | extra,
            buffer=buffer,
        )

    def returns(self) -> dict[str, float | None]:
        """Best, final (the last evaluation's) and mean ``eval/return_mean`` (None before any)."""
        history = self.eval_returns
        return {
            "best_return": self.best_return if math.isfinite(self.best_return) else None,
            "final_return": history[-1] if history else None,
            "mean_return": sum(history) / len(history) if history else None,
        }

    def summary(self) -> dict[str, Any]:
        """What every trainer's run summary holds: the selection evaluations' returns and their
        episodes, seconds, when the target was hit."""
        return self.returns() | {
            "selection_episodes": self.loop.eval_episodes,
            "seconds": self.elapsed(),
            "solved_at": self.solved_at,
            "stopped_by_callback": self.stopped_by_callback,
        }

    def close(self, status: str) -> None:
        """End the run's recording with ``status`` (``completed``, ``interrupted``, ``failed``),
        its final returns and its final evaluations' scores (:attr:`final_scalars`:
        ``eval/final_*``, ``eval/best_*``; every recorder gets them); stop the progress view
        (idempotent)."""
        if self._progress is not None:
            self._progress.close()
        final = {
            f"hparams/{key}": value for key, value in self.returns().items() if value is not None
        }
        self.recorder.close(status, final | self.final_scalars)

    def log_actors(self, records: list[ActorRecord], summary: dict[str, Any], table: bool) -> None:
        """Log a per-actor table (``table``) and the accounting of the run's end, in what the
        actors send: transitions, or sequences (``summary["sample_unit"]``, a recurrent agent's
        run)."""
        if table:
            rows = Table(title="actors")
            for column in ("actor", "samples", "episodes", "mean return", "restarts", "acted in"):
                rows.add_column(column, justify="right")
            for i, r in enumerate(records):
                mean = format_number(r.return_sum / r.episodes) if r.episodes else "-"
                dtype = r.policy_dtype or "-"
                rows.add_row(str(i), str(r.received), str(r.episodes), mean, str(r.restarts), dtype)
            console = Console(file=io.StringIO(), width=80)
            console.print(rows)
            log.info("\n%s", console.file.getvalue().rstrip())  # type: ignore[attr-defined]
        acc = summary["accounting"]
        log.info(
            "%s this session: sent %d, received %d, dropped at stop %d; all sessions:"
            " received %d (opt steps %d, env steps %d)",
            summary.get("sample_unit", "transitions"),
            acc["sent"],
            acc["received"],
            acc["dropped"],
            acc["received_total"],
            summary["opt_steps"],
            summary["env_steps"],
        )
