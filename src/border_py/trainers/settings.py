"""What a trainer is configured with: the ``trainer`` group's common keys, the run's counters,
and the pieces a trainer wires the learning loop with (its actors, evaluation and gate).

A leaf of ``trainers/``: the loop (:mod:`border_py.trainers.loop`), the run's bookkeeping
(:mod:`border_py.trainers.run_book`) and the trainers import it; it imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from border_py.actors.runtime import Actors
from border_py.config import count, flag, fraction, non_negative, null_or, number, positive, require
from border_py.evaluation.service import EvalService
from border_py.resources import MAX_EPISODE_STEPS, MAX_PREFETCH, at_most, disk, size_text
from border_py.runs.settings import RunSettings
from border_py.trainers.components import Components, checkpoint_nbytes, reclaimed_nbytes

__all__ = ["Gate", "LoopSettings", "RunState", "Wiring"]


@dataclass
class RunState:
    """The run's counters (they continue across resumes)."""

    opt_steps: int = 0
    env_steps: int = 0  # env steps the actors took
    samples: int = 0  # transitions received into the replay buffer

    def state(self) -> dict[str, int]:
        """The counters, for a checkpoint."""
        return {"opt_steps": self.opt_steps, "env_steps": self.env_steps, "samples": self.samples}

    def restore(self, saved: dict[str, int]) -> None:
        """Continue from :meth:`state`."""
        self.opt_steps, self.env_steps = int(saved["opt_steps"]), int(saved["env_steps"])
        self.samples = int(saved["samples"])


class Gate(Protocol):
    """When the learner may optimize, and when it may take more data (the replay ratio)."""

    wait_seconds: float  # how long the learner blocks for data while it may not optimize
    warmup_period: int  # transitions collected before the first opt step (trainer.warmup_period)

    def may_optimize(self, state: RunState, buffered: int) -> bool:
        """Whether an opt step may run now (``buffered``: transitions in the replay buffer)."""

    def may_ingest(self, state: RunState, buffered: int) -> bool:
        """Whether the learner may take more batches now."""

    def restart(self, state: RunState) -> None:
        """Count the warmup again from now (a resume whose replay buffer was not saved)."""

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the gate."""

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state`."""


@dataclass
class Wiring:
    """How a trainer connects the learning loop to its actors and evaluation."""

    actors: Actors
    evaluation: EvalService
    gate: Gate
    publish_interval: int


@dataclass(kw_only=True)
class LoopSettings:
    """Settings every trainer shares (border's names and semantics); their values come from the
    config (``conf/trainer/_loop.yaml`` ships them: no field here has a default of its own).

    Budgets and intervals count optimizer steps (border's unit) or env steps (RL Zoo's and the
    papers' unit): the run stops at whichever budget it reaches first, and evaluates (saves) when
    either interval is due.

    Args:
        max_opts: optimization steps of the run (None: no opt-step budget).
        max_env_steps: env steps of the run, all actors together (None: no env-step budget).
        warmup_period: transitions collected before the first optimization step; below
            ``max_env_steps`` when that is set (an opt-step budget only counts after it).
        replay_ratio: opt steps x batch size per env step, the rate at which the learner replays
            data (None: each trainer's own keys decide: ``opt_interval``, or
            ``min_samples_per_opt``/``max_samples_per_opt``).
        eval_interval: opt steps between evaluations (None: none on this count).
        eval_env_interval: env steps between evaluations (None: none on this count).
        eval_episodes: episodes per evaluation.
        eval_max_steps: step cap of an evaluation episode.
        record_interval: opt steps between training scalars.
        save_interval: opt steps between periodic checkpoints (0 disables them; a final
            checkpoint is always written once an opt step was made).
        save_env_interval: env steps between periodic checkpoints (None: none on this count).
        log_step: the step axis of recorded scalars: ``opt_steps`` or ``env_steps``.
        keep_checkpoints: periodic checkpoints kept, newest first (``best`` is always kept).
        save_replay_buffer: put the replay buffer into periodic and final checkpoints.
        target_return: stop early once ``eval/return_mean`` reaches it (None: never).
        eval_epsilon: probability of a random action in evaluation episodes (None: the env's
            default, 0.001 for Atari as in Dopamine, 0 elsewhere).
        final_eval_episodes: episodes of the run's final evaluations: at its end (the budget or
            the target return reached), the final weights and the ``best`` checkpoint's each play
            this many episodes on reset seeds that no selection evaluation used, the score
            ``result.json`` reports as ``final_eval`` and ``best_eval`` (0: none; None: the env's
            default, 100, or 10 for Atari, whose episodes are thousands of steps long).
        prefetch: batches a background thread samples and copies to the device ahead of the
            update, priorities written back one step late (0: none, the serial learn step;
            :mod:`border_py.trainers.prefetch`).
    """

    max_opts: int | None
    max_env_steps: int | None
    warmup_period: int
    replay_ratio: float | None
    eval_interval: int | None
    eval_env_interval: int | None
    eval_episodes: int
    eval_max_steps: int
    record_interval: int
    save_interval: int
    save_env_interval: int | None
    log_step: str
    keep_checkpoints: int
    save_replay_buffer: bool
    target_return: float | None
    eval_epsilon: float | None
    final_eval_episodes: int | None
    prefetch: int

    def __post_init__(self) -> None:
        for key in ("max_opts", "max_env_steps", "eval_interval", "eval_env_interval"):
            if getattr(self, key) is not None:
                positive(key, getattr(self, key), int)
        if self.save_env_interval is not None:
            positive("save_env_interval", self.save_env_interval, int)
        require(
            "max_opts",
            self.max_opts is not None or self.max_env_steps is not None,
            "set, or max_env_steps set (a run needs a budget)",
            self.max_opts,
        )
        non_negative("warmup_period", self.warmup_period)
        budget = self.max_env_steps
        require(  # a warmup that fills the budget ends the run before its first opt step
            "warmup_period",
            budget is None or self.warmup_period < budget,
            f"below trainer.max_env_steps={budget}, the run's budget in env steps: no opt step"
            " would run (lower trainer.warmup_period or raise trainer.max_env_steps)",
            self.warmup_period,
        )
        if self.replay_ratio is not None:
            positive("replay_ratio", self.replay_ratio)
        require(
            "log_step",
            self.log_step in ("opt_steps", "env_steps"),
            "'opt_steps' or 'env_steps'",
            self.log_step,
        )
        positive("eval_episodes", self.eval_episodes, int)
        positive("eval_max_steps", self.eval_max_steps, int)
        positive("record_interval", self.record_interval, int)
        non_negative("save_interval", self.save_interval)
        positive("keep_checkpoints", self.keep_checkpoints, int)
        flag("save_replay_buffer", self.save_replay_buffer)
        null_or(number)("target_return", self.target_return)
        if self.eval_epsilon is not None:
            fraction("eval_epsilon", self.eval_epsilon)
        final = self.final_eval_episodes
        require(
            "final_eval_episodes",
            null_or(count).ok(final),
            "null (the env's default: 100, Atari 10) or an int >= 0 (0: no final evaluation)",
            final,
        )
        non_negative("prefetch", self.prefetch)

    def evaluation_epsilon(self, env_default: float) -> float:
        """``eval_epsilon``, or ``env_default`` (the env's own evaluation epsilon)."""
        return float(env_default if self.eval_epsilon is None else self.eval_epsilon)

    def final_episodes(self, env_default: int) -> int:
        """``final_eval_episodes``, or ``env_default`` (the env's own, e.g. 10 for Atari)."""
        return env_default if self.final_eval_episodes is None else self.final_eval_episodes

    def wiring(self, config: dict[str, Any], parts: Components, run: RunSettings) -> Wiring:
        """The trainer's actors, evaluation service and gate (started by the loop); ``run``: the
        run's settings (the seeds derive from its root seed)."""
        raise NotImplementedError

    def actors_shown(self, parts: Components) -> int | None:
        """Actors the progress view counts (None: none, the serial trainer)."""
        return None

    def check_components(self, parts: Components) -> None:
        """Refuse components this trainer cannot run (one line); nothing by default."""

    def check_sizes(self, config: dict[str, Any], parts: Components, run: RunSettings) -> None:
        """Bound the sizes these settings ask for (see :mod:`border_py.resources`): the batches
        sampled ahead, an evaluation episode's steps, and the checkpoints kept (periodic ones, one
        more while the newest is written, and ``best``) against the disk free in the run dir; a
        resumed run's own checkpoints, which its new ones replace, are credited
        (:func:`~border_py.trainers.components.reclaimed_nbytes`). ``run``: the run's settings
        (``check_resources``, ``run_dir``, ``resume``)."""
        enforce = run.check_resources
        at_most(
            "trainer.prefetch",
            self.prefetch,
            MAX_PREFETCH,
            "batches sampled ahead of the update (each a whole batch in memory)",
            enforce,
        )
        at_most(
            "trainer.eval_max_steps",
            self.eval_max_steps,
            MAX_EPISODE_STEPS,
            "steps per evaluation episode (a policy that never ends one plays them all)",
            enforce,
        )
        weights, replay = checkpoint_nbytes(config, parts, self.save_replay_buffer)
        periodic = self.save_interval > 0 or self.save_env_interval is not None
        copies = self.keep_checkpoints + 1 if periodic else 1  # else the final checkpoint alone
        setting = f"trainer.keep_checkpoints={self.keep_checkpoints}"
        each = f"~{size_text(weights)} of weights"
        if self.save_replay_buffer:
            setting += " x save_replay_buffer=true"
            each += f" and the replay buffer's ~{size_text(replay)}"
        what = f"{copies:,} checkpoints of {each} each, and best,"
        # a resumed run replaces its own checkpoints: pruning frees them as it saves new ones
        freed = reclaimed_nbytes(run, copies - 1, weights + replay, weights)
        if freed:
            what += f" less the ~{size_text(freed)} of the run's own that they replace,"
        disk(
            setting,
            what,
            copies * (weights + replay) + 2 * weights - freed,
            Path(run.run_dir or "."),  # null: Hydra's dir, under the working dir
            enforce,
        )

    def check_resources(self, config: dict[str, Any], parts: Components, run: RunSettings) -> None:
        """Bound what the trainer's own processes would take (see :mod:`border_py.resources`;
        ``run``: the run's settings, whose ``check_resources`` says refuse or warn); nothing by
        default."""
