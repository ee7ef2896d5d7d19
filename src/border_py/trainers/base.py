"""What every trainer shares: the ``trainer`` group's common keys, and how a run is assembled.

A trainer is its settings plus a :meth:`LoopSettings.wiring`: which actor backend, evaluation
service and gate the learning loop (:mod:`border_py.trainers.loop`) runs with.
:meth:`LoopSettings.run` assembles a run the same way for every trainer: it puts a resumed run's
buffer, gate and RNGs back, starts the actors, runs the loop with the run's book
(:mod:`border_py.trainers.run_book`: recording, evaluations, checkpoints), stops the actors and
evaluation on every path, and returns the summary.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from border_py.actors.backend import ActorBackend, Launch
from border_py.config import flag, fraction, non_negative, positive, require
from border_py.evaluation.service import EvalService
from border_py.processes import StopSignals
from border_py.resources import MAX_EVAL_EPISODES, at_most, enforced
from border_py.runs.checkpoint import Checkpoint
from border_py.seeding import set_global_rng_state
from border_py.trainers.components import Components, build_components
from border_py.trainers.loop import Gate, Learner, RunState
from border_py.trainers.run_book import EvalCallback, RunBook

log = logging.getLogger(__name__)


@dataclass
class Wiring:
    """How a trainer connects the learning loop to its actors and evaluation."""

    backend: ActorBackend
    evaluation: EvalService
    gate: Gate
    publish_interval: int


@dataclass
class LoopSettings:
    """Settings every trainer shares (border's names and semantics).

    Budgets and intervals count optimizer steps (border's unit) or env steps (RL Zoo's and the
    papers' unit): the run stops at whichever budget it reaches first, and evaluates (saves) when
    either interval is due.

    Args:
        max_opts: optimization steps of the run (None: no opt-step budget).
        max_env_steps: env steps of the run, all actors together (None: no env-step budget).
        warmup_period: transitions collected before the first optimization step.
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
    """

    max_opts: int | None = None
    max_env_steps: int | None = None
    warmup_period: int = 1000
    replay_ratio: float | None = None
    eval_interval: int | None = 1000
    eval_env_interval: int | None = None
    eval_episodes: int = 10
    eval_max_steps: int = 10000
    record_interval: int = 100
    save_interval: int = 10000
    save_env_interval: int | None = None
    log_step: str = "opt_steps"
    keep_checkpoints: int = 3
    save_replay_buffer: bool = False
    target_return: float | None = None
    eval_epsilon: float | None = None

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
        target = self.target_return
        number = isinstance(target, (int, float)) and not isinstance(target, bool)
        require("target_return", target is None or number, "null or a number", target)
        if self.eval_epsilon is not None:
            fraction("eval_epsilon", self.eval_epsilon)

    def evaluation_epsilon(self, parts: Components) -> float:
        """``eval_epsilon``, or the env's default."""
        if self.eval_epsilon is not None:
            return float(self.eval_epsilon)
        return float(parts.env_factory.eval_epsilon)

    def check(self, config: dict[str, Any]) -> Components:
        """Validate the config's components against these settings without training; return them.

        Also bounds what the run would take (see :mod:`border_py.resources`).
        """
        at_most(
            "trainer.eval_episodes",
            self.eval_episodes,
            MAX_EVAL_EPISODES,
            "episodes per evaluation (they run one after another)",
            enforced(config),
        )
        return build_components(config, self.warmup_period)

    def wiring(self, config: dict[str, Any], parts: Components) -> Wiring:
        """The trainer's actor backend, evaluation service and gate (started by the loop)."""
        raise NotImplementedError

    def actors_shown(self, parts: Components) -> int | None:
        """Actors the progress view counts (None: none, the serial trainer)."""
        return None

    def run(
        self,
        config: dict[str, Any],
        parts: Components,
        run_dir: Path,
        resume: Checkpoint | None,
        signals: StopSignals,
        on_eval: EvalCallback | None = None,
    ) -> dict[str, Any]:
        """Train ``parts`` (built from the resolved ``config`` by :meth:`check`; with ``resume``,
        the agent already holds the checkpoint's state) into ``run_dir``.

        The actors start first (their envs and first steps overlap the learner's own set-up).
        Returns the run summary (see :func:`border_py.trainers.train.train`).
        """
        state = RunState() if resume is None else RunState.resumed(resume.trainer_state)
        status = "failed"
        book: RunBook | None = None
        wiring: Wiring | None = None
        try:
            wiring = self.wiring(config, parts)
            if resume is not None:
                self._restore(resume, parts, wiring.gate, state)
            started = not signals.requested  # a stop signal during start-up: start nothing
            if started:
                wiring.backend.start(
                    Launch(
                        config=config,
                        spaces=parts.env_factory.spaces(),
                        agent=parts.agent,
                        policy=parts.agent.policy_state(),
                        opt_steps=state.opt_steps,
                        resume=None if resume is None else resume.trainer_state,
                    )
                )
            book = RunBook(
                run_dir,
                config,
                self,
                parts.env_factory.spaces(),
                parts.buffer.capacity,
                self.actors_shown(parts),
                resume,
                on_eval,
            )
            learner = Learner(
                self,
                parts,
                wiring.backend,
                wiring.evaluation,
                wiring.gate,
                book,
                state,
                signals,
                config,
                None if resume is None else resume.trainer_state,
                wiring.publish_interval,
            )
            interrupted = learner.run() if started else True
            status = "interrupted" if interrupted else "completed"
        finally:
            now = isinstance(sys.exc_info()[1], KeyboardInterrupt)  # a second Ctrl-C: no drain
            if wiring is not None:
                with signals.shielded():  # bounded steps: a third Ctrl-C must not cut one
                    wiring.backend.stop(drain_timeout=0.0 if now else 10.0)
                    wiring.evaluation.close()
            if book is not None:  # uploads (MLflow, W&B) have no time limit: Ctrl-C may cut them
                book.close(status)
        summary = book.summary() | {
            "opt_steps": state.opt_steps,
            "env_steps": state.env_steps,
            "samples": state.samples,
            "opt_steps_per_sec": learner.opt_steps_per_sec(),
            "interrupted": status == "interrupted",
            "accounting": wiring.backend.accounting(),
            "restarts": wiring.backend.restarts() + wiring.evaluation.restarts(),
        }
        book.log_actors(wiring.backend.records, summary, table=self.actors_shown(parts) is not None)
        return summary

    def _restore(self, resume: Checkpoint, parts: Components, gate: Gate, state: RunState) -> None:
        """Put the replay buffer, the gate and the RNGs back as the checkpoint left them."""
        trainer_state = resume.trainer_state
        gate.restore(trainer_state["gate"])
        arrays = resume.buffer()
        if arrays is not None:
            parts.buffer.load(trainer_state["replay"], arrays)
        else:
            parts.buffer.continue_schedule(trainer_state["replay"])
            gate.restart(state)
            log.warning(
                "resuming without a replay buffer (trainer.save_replay_buffer was off):"
                " collecting %d transitions before optimizing again",
                self.warmup_period,
            )
        set_global_rng_state(trainer_state["rng"])
        log.info(
            "resumed from %s at opt step %d, env step %d",
            resume.path,
            state.opt_steps,
            state.env_steps,
        )
