"""One session of a run, as one object: its dir settled (``resume=``), held, claimed, its saved
config resumed and checked against the agent, and its outcome recorded in ``result.json``.

Every session of ``border train`` and :func:`border_py.train` follows these rules, in this order:

1. ``resume=`` is settled (:func:`~border_py.runs.run_dir.settle_resume`); a resumed run's dir is
   held (:func:`~border_py.runs.lock.session_lock`) before anything in it is read for the run
   or moved, and ``resume=auto`` without a checkpoint sets an earlier attempt's files aside;
2. a resumed run's saved config takes the command line's overrides
   (:func:`~border_py.runs.resume.resumed_config`, a run dir being data:
   :mod:`border_py.runs.trust`);
3. the trainer validates the config (the caller's step), then :meth:`RunSession.fits` checks the
   checkpoint's budgets and state against it;
4. :meth:`RunSession.start`: a fresh run claims its dir and holds it;
5. :meth:`RunSession.repair`, once the run logs to its ``train.log``: the run's checkpoints are
   put in order (what a killed write left, a newer timeline set aside, each move logged);
6. :meth:`RunSession.finish` records the summary; leaving the session after :meth:`start` with an
   exception records the run as ``interrupted`` (a second Ctrl-C) or ``failed``.

Validating a run without a session of it (``border train``'s checks, the tuner's) takes the same
route through steps 2 and 3 (:meth:`RunSession.resolve`, :meth:`RunSession.fits`) without entering
the session: nothing is settled, locked, moved or written.

The session reads ``train.yaml``'s own keys of its config through its :attr:`RunSession.settings`
(:class:`~border_py.runs.settings.RunSettings`), read once per config: the command's, then a
resumed run's (the saved config with the overrides).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path
from types import TracebackType
from typing import Any

from border_py.agents.base import Agent
from border_py.config import require
from border_py.errors import ConfigError, RunError, first_line
from border_py.layout import CHECKPOINTS, RESULT
from border_py.runs.checkpoint import Checkpoint, load_checkpoint, recover
from border_py.runs.lock import session_lock
from border_py.runs.results import objective_value, read_result, write_result
from border_py.runs.resume import check_fits, resumed_config
from border_py.runs.run_dir import RunCompleted, claim, settle_resume, start_afresh
from border_py.runs.settings import RunSettings
from border_py.runs.timeline import run_dir_of_checkpoint, set_aside_newer
from border_py.runs.trust import Trust

__all__ = ["RunSession", "restore_agent"]

log = logging.getLogger(__name__)


class RunSession(contextlib.AbstractContextManager["RunSession"]):
    """One session of a run (see the module docstring); a context manager.

    Args:
        config: the command's resolved config (its ``resume`` not settled yet).
        settings: ``config``'s own keys (:meth:`RunSettings.of <border_py.runs.settings.
            RunSettings.of>`).
        overrides: the command line's overrides: a resume's changes to the saved config, a fresh
            run's record in its claim.
        run_dir: ``run_dir``, else the launcher's (Hydra's) dir of this job (None: neither).
        launcher_files: what the launcher wrote into ``run_dir`` before the session (kept in
            place when ``resume=auto`` sets an earlier attempt's files aside).

    Attributes:
        config: the session's config (a resumed run's: the saved one with the overrides).
        settings: the session's config's own keys (``resume`` settled once entered).
        checkpoint: the checkpoint a resumed run continues (None: a fresh run).
        completed: ``resume=auto`` found the run completed: its recorded summary (nothing to do).
        dir: the run's dir.
    """

    def __init__(
        self,
        config: dict[str, Any],
        settings: RunSettings,
        overrides: list[str],
        run_dir: Path | None,
        launcher_files: tuple[str, ...] = (),
    ) -> None:
        self.config, self.settings, self.overrides = config, settings, overrides
        self.checkpoint: Checkpoint | None = None
        self.completed: dict[str, Any] | None = None
        self.dir = run_dir
        self._launcher_files = launcher_files
        self._held = contextlib.ExitStack()
        self._locked = False  # the session holds the run's dir
        self._started = False

    def __enter__(self) -> RunSession:
        resume = self.settings.resume
        if resume:
            try:
                settled = settle_resume(resume, self.dir if resume == "auto" else None)
            except RunCompleted as done:
                log.info("%s", done)
                self.completed = self.objective(dict(done.result.get("summary") or {}))
                return self
            self.dir = settled.run_dir
            self._held.enter_context(session_lock(settled.run_dir))  # before anything moves
            self._locked = True
            if settled.fresh:
                start_afresh(settled.run_dir, keep=self._launcher_files)
            settled_resume = None if settled.checkpoint is None else str(settled.checkpoint)
            self.config["resume"] = settled_resume
            self.settings = dataclasses.replace(self.settings, resume=settled_resume)
        self.resolve()
        if self.checkpoint is not None:
            self.dir = run_dir_of_checkpoint(self.checkpoint.path)
        if self.dir is None:
            raise ConfigError(
                "run_dir: not set and no Hydra run dir is active (set run_dir=<path>)"
            )
        return self

    def resolve(self) -> None:
        """The session's config and the checkpoint it continues: for ``resume=<checkpoint>``, the
        saved config with the overrides applied (what the command trusts: :meth:`Trust.of` its
        own config), and its :attr:`settings`; else the config itself. Reads the checkpoint;
        writes nothing.

        Raises:
            ConfigError: one line: a bad checkpoint, override or untrusted saved config.
        """
        if self.settings.resume:
            checkpoint = load_checkpoint(self.settings.resume)
            trust = Trust.of(self.config)
            self.config = resumed_config(checkpoint, self.overrides, trust, self.config)
            self.settings = RunSettings.of(self.config)
            self.checkpoint = checkpoint

    def fits(
        self,
        agent: Agent,
        spaces: tuple[Any, Any],
        max_opts: int | None,
        max_env_steps: int | None,
    ) -> None:
        """For a resumed run: refuse budgets the checkpoint has already reached, settings its state
        cannot follow, and an agent or spaces its state does not fit; then load the agent's state
        (checking that it fits is loading it: the agent holds the checkpoint's state from now on).

        Raises:
            ConfigError: one line naming the key and the checkpoint.
        """
        checkpoint = self.checkpoint
        if checkpoint is None:
            return
        for key, unit, budget, done in (
            ("trainer.max_opts", "opt steps", max_opts, checkpoint.state.opt_steps),
            ("trainer.max_env_steps", "env steps", max_env_steps, checkpoint.state.env_steps),
        ):
            if budget is not None:
                require(
                    key,
                    budget > done,
                    f"> {done}, the {unit} {checkpoint.path} already has (raise it to continue)",
                    budget,
                )
        check_fits(checkpoint, self.config, self.settings.check_resources)
        restore_agent(checkpoint, agent, spaces)

    def start(self) -> Path:
        """A fresh run claims its dir (refused when the dir holds a run) and holds it; return the
        run's dir. From now on, leaving the session with an exception records the run's end.
        Nothing in the dir is moved yet: the caller repairs it (:meth:`repair`) once the run
        logs to its ``train.log``, so that what the repair moves is logged there."""
        assert self.dir is not None, "entered"
        if self.checkpoint is None:
            claim(self.dir, self.overrides)
        if not self._locked:  # resume= took the lock before the run's files were read
            self._held.enter_context(session_lock(self.dir))
            self._locked = True
        self._started = True
        return self.dir

    def repair(self) -> None:
        """Put the run's ``checkpoints/`` in order for this session (after :meth:`start`: its dir
        held): what a process killed while writing left is cleaned up
        (:func:`~border_py.runs.checkpoint.recover`), and a run resumed from an older checkpoint
        sets the newer ones aside, each logged as a warning: they are another timeline's
        (:func:`~border_py.runs.timeline.set_aside_newer`)."""
        assert self.dir is not None, "entered"
        checkpoints = self.dir / CHECKPOINTS
        recover(checkpoints)
        if self.checkpoint is not None:
            for path in set_aside_newer(checkpoints, self.checkpoint.state.opt_steps):
                log.warning("resuming from an older checkpoint: moved %s aside", path)

    def recorded_overrides(self) -> list[str]:
        """What ``result.json`` records: the run's first overrides, then each resumed session's,
        marked ``(resume)``."""
        if self.checkpoint is None:
            return list(self.overrides)
        earlier = read_result(self.dir) if self.dir is not None else None
        first = list((earlier or {}).get("overrides", []))
        return first + [f"(resume) {o}" for o in self.overrides]

    def finish(self, summary: dict[str, Any]) -> None:
        """Record the session's summary (see :meth:`objective`) in ``result.json``.

        Raises:
            RunError: ``result.json`` could not be written (the checkpoints and log have the run).
        """
        assert self.dir is not None, "entered"
        self._started = False  # the run has ended: what follows records no failure of it
        status = "interrupted" if summary["interrupted"] else "completed"
        try:
            write_result(self.dir, status, summary, overrides=self.recorded_overrides())
        except OSError as exc:  # e.g. the disk is full: the checkpoints and the log have the run
            raise RunError(
                f"{self.dir / RESULT}: could not be written ({exc.strerror or exc}); the run's"
                " checkpoints are intact and its summary is in train.log"
            ) from exc

    def objective(self, summary: dict[str, Any]) -> dict[str, Any]:
        """``summary`` with its ``objective``: the value a sweeper optimizes (the config's
        ``objective`` return)."""
        return summary | {"objective": objective_value(summary, self.settings.objective)}

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._started and exc is not None and self.dir is not None:
                status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
                try:
                    write_result(self.dir, status, error=exc, overrides=self.recorded_overrides())
                except OSError as write_error:  # e.g. a full disk: the run's own error first
                    log.error("result.json could not be written: %s", write_error)
        finally:
            self._held.close()


def restore_agent(checkpoint: Checkpoint, agent: Agent, spaces: tuple[Any, Any]) -> None:
    """Load a checkpoint's agent state, or explain in one line why it does not fit the config."""
    saved = checkpoint.meta.get("spaces", {})
    for name, space in zip(("observation_space", "action_space"), spaces, strict=True):
        if saved.get(name) not in (None, str(space)):
            raise ConfigError(
                f"{checkpoint.path}: its {name} {saved[name]} does not match the env's {space}"
            )
    try:
        agent.load_state_dict(checkpoint.agent_state)
    except (RuntimeError, KeyError, ValueError) as exc:
        first = first_line(exc)
        raise ConfigError(f"{checkpoint.path}: does not fit the agent config ({first})") from None
