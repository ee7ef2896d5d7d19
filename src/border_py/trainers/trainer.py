"""A trainer: its settings (the ``trainer`` group's keys, :mod:`border_py.trainers.settings`) and
how a run is assembled from them, the same for every trainer.

The settings say how the learning loop (:mod:`border_py.trainers.loop`) is wired: which actors,
evaluation service and gate (:meth:`~border_py.trainers.settings.LoopSettings.wiring`).
Everything else is done here once: bounding and building the components, restoring a resumed run
(what it restores: :mod:`border_py.runs.state`), starting the actors, the loop, the staged stop and
the summary.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from border_py.actors.runtime import policy_dtype_of
from border_py.agents.base import RecurrentActing
from border_py.callbacks import Callbacks
from border_py.processes.signals import StopSignals
from border_py.resources import MAX_EVAL_EPISODES, at_most
from border_py.runs.checkpoint import Checkpoint
from border_py.runs.settings import RunSettings
from border_py.trainers.cadence import Cadence
from border_py.trainers.components import Components, build_components
from border_py.trainers.final import final_seeds
from border_py.trainers.loop import Learner, LearnerParts
from border_py.trainers.run_book import RunBook
from border_py.trainers.settings import LoopSettings, RunState, Wiring

__all__ = ["Trainer"]

log = logging.getLogger(__name__)


class Trainer:
    """Trains the components a config describes, with ``settings`` (a trainer's config).

    Args:
        settings: the built ``trainer`` group (:class:`~border_py.trainers.serial.SerialSettings`,
            :class:`~border_py.trainers.async_trainer.AsyncSettings`, or a user's subclass of
            :class:`~border_py.trainers.settings.LoopSettings`).
    """

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings

    def check(self, config: dict[str, Any], run: RunSettings) -> Components:
        """Validate the config's components against the settings without training; return them.

        Also bounds what the run would take (see :mod:`border_py.resources`; ``run``: the run's
        settings of ``config``, whose ``check_resources`` says refuse or warn).
        """
        at_most(
            "trainer.eval_episodes",
            self.settings.eval_episodes,
            MAX_EVAL_EPISODES,
            "episodes per evaluation (they run one after another)",
            run.check_resources,
        )
        parts = build_components(config, run, self.settings.warmup_period)
        self.settings.check_components(parts)
        self.settings.check_sizes(config, parts, run)
        at_most(
            "trainer.final_eval_episodes",
            self.settings.final_episodes(parts.env_factory.final_eval_episodes),
            MAX_EVAL_EPISODES,
            "episodes per final evaluation (they run one after another)",
            run.check_resources,
        )
        self.settings.check_resources(config, parts, run)
        return parts

    def run(
        self,
        config: dict[str, Any],
        run: RunSettings,
        parts: Components,
        run_dir: Path,
        resume: Checkpoint | None,
        signals: StopSignals,
        callbacks: Callbacks | None = None,
    ) -> dict[str, Any]:
        """Train ``parts`` (built from the resolved ``config`` and its settings ``run`` by
        :meth:`check`; with ``resume``, the agent already holds the checkpoint's state) into
        ``run_dir``, telling ``callbacks``.

        A resumed run's state goes back to its owners first
        (:meth:`~border_py.runs.state.TrainerState.restore`); then the actors start (their envs
        and first steps overlap the learner's own set-up). Returns the run summary (see
        :func:`border_py.trainers.train.train`).
        """
        settings = self.settings
        state = RunState()
        status = "failed"
        book: RunBook | None = None
        wiring: Wiring | None = None
        try:
            wiring = settings.wiring(config, parts, run)
            spaces, shown = parts.env_factory.spaces(), settings.actors_shown(parts)
            book = RunBook(
                run_dir, config, run, settings, spaces, parts.buffer.capacity, shown, callbacks
            )
            episodes = settings.final_episodes(parts.env_factory.final_eval_episodes)
            seeds = final_seeds(run.seed, episodes)
            learner_parts = LearnerParts(parts, wiring, book, Cadence(settings, state), seeds)
            if resume is not None:
                resume.state.restore(learner_parts.owners(state), resume.buffer())
                log.info(
                    "resumed from %s at opt step %d, env step %d",
                    resume.path,
                    state.opt_steps,
                    state.env_steps,
                )
            started = not signals.requested  # a stop signal during start-up: start nothing
            if started:
                wiring.actors.start(parts.launch(config, run, state.opt_steps, state.env_steps))
            book.open(state)
            learner = Learner(settings, learner_parts, state, signals)
            interrupted = learner.run() if started else True
            status = "interrupted" if interrupted else "completed"
        finally:
            self._stop(wiring, book, signals, status)
        return self._summary(book, learner, wiring, state, status, parts)

    @staticmethod
    def _stop(
        wiring: Wiring | None, book: RunBook | None, signals: StopSignals, status: str
    ) -> None:
        """The staged stop: actors and evaluation first, shielded from further signals, then the
        recording (idempotent pieces: whatever was started is stopped)."""
        now = isinstance(sys.exc_info()[1], KeyboardInterrupt)  # a second Ctrl-C: no drain
        if wiring is not None:
            with signals.shielded():  # bounded steps: a third Ctrl-C must not cut one
                wiring.actors.stop(drain_timeout=0.0 if now else 10.0)
                wiring.evaluation.close()
        if book is not None:  # uploads (MLflow, W&B) have no time limit: Ctrl-C may cut them
            book.close(status)

    def _summary(
        self,
        book: RunBook,
        learner: Learner,
        wiring: Wiring,
        state: RunState,
        status: str,
        parts: Components,
    ) -> dict[str, Any]:
        summary = book.summary() | {
            "opt_steps": state.opt_steps,
            "env_steps": state.env_steps,
            "samples": state.samples,
            "opt_steps_per_sec": learner.opt_steps_per_sec(),
            "interrupted": status == "interrupted",
            "accounting": wiring.actors.accounting(),
            "restarts": wiring.actors.restarts() + wiring.evaluation.restarts(),
            "policy_dtype": policy_dtype_of(wiring.actors.records),
        }
        if isinstance(parts.agent, RecurrentActing):  # its actors send (and count) sequences
            summary["sample_unit"] = "sequences"
        summary |= learner.scores  # final_eval and best_eval, when the run's end measured them
        shown = self.settings.actors_shown(parts) is not None
        book.log_actors(wiring.actors.records, summary, table=shown)
        return summary
