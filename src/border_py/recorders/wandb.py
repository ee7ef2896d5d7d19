"""Weights & Biases recording (the ``[wandb]`` extra); ``WANDB_MODE=offline`` needs no account."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, Literal

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from border_py.config import require
from border_py.errors import ConfigError, RunError, first_line
from border_py.files import read_json, write_file
from border_py.layout import WANDB, WANDB_RUN
from border_py.recorders.base import NOT_HPARAMS
from border_py.recorders.wandb_settings import pinned, refuse_workspace_settings
from border_py.secrets import redact, redact_override

__all__ = ["WandbRecorder"]

log = logging.getLogger(__name__)

RUN_ID_FILE = WANDB_RUN  # in the run dir: a resumed run continues the same W&B run
STEP_METRIC = "opt_step"  # every metric is charted against it (W&B's own step only counts logs)
EXIT_CODES = {"completed": 0, "failed": 1, "interrupted": 130}
MODES = ("online", "offline", "disabled")


def sweep_dir() -> Path | None:
    """The sweep dir of a multirun job, else None."""
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return Path(HydraConfig.get().sweep.dir)
    return None


def sweep_group() -> str | None:
    """``<date>/<time>`` of the sweep dir for the jobs of a multirun (their W&B group), else None."""
    sweep = sweep_dir()
    return None if sweep is None else f"{sweep.parent.name}/{sweep.name}"


class WandbRecorder:
    """Scalars, the config, the final metrics (the run's summary) and the end status in a W&B run.

    Metrics are charted against ``opt_step`` (the optimization step, as in TensorBoard and
    MLflow). W&B's files go to ``<run dir>/wandb/``; the run id is kept in
    ``<run dir>/wandb_run.json`` so that a resumed run continues the same W&B run.

    Args:
        project: the W&B project.
        entity: the W&B entity (user or team; null: your default).
        group: the W&B group (null: ``<date>/<time>`` of the sweep for the jobs of a multirun).
        name: the W&B run name (null: the run dir's name).
        tags: W&B tags of the run.
        mode: ``online``, ``offline`` (files only, ``wandb sync`` later) or ``disabled``; null
            leaves it to W&B (``WANDB_MODE``, ``wandb offline``).
    """

    def __init__(
        self,
        project: str = "border-py",
        entity: str | None = None,
        group: str | None = None,
        name: str | None = None,
        tags: list[str] | None = None,
        mode: str | None = None,
    ) -> None:
        require(
            "project", isinstance(project, str) and project != "", "a non-empty string", project
        )
        for key, value in (("entity", entity), ("group", group), ("name", name)):
            require(key, value is None or isinstance(value, str), "null or a string", value)
        tags = list(tags or [])
        require("tags", all(isinstance(t, str) for t in tags), "a list of strings", tags)
        require("mode", mode is None or mode in MODES, f"null or one of {', '.join(MODES)}", mode)
        try:
            import wandb  # noqa: F401
        except ImportError:
            raise ConfigError(
                "_target_: the W&B recorder needs wandb: pip install 'border-py[wandb]'"
            ) from None
        self.project, self.entity, self.group, self.name = project, entity, group, name
        self.tags, self.mode = tags, mode
        self.run: Any = None

    def open(self, run_dir: Path, config: dict[str, Any], resume_step: int | None) -> None:
        """Start the W&B run, or continue it when the run is resumed.

        W&B is given the user's own settings of where the run goes
        (:func:`~border_py.recorders.wandb_settings.pinned`), over any workspace file's.

        Raises:
            ConfigError: W&B would read settings from a workspace file that is data or sets more
                than W&B's own commands do
                (:func:`~border_py.recorders.wandb_settings.refuse_workspace_settings`); the
                user's settings are not valid ones.
            RunError: W&B did not start.
        """
        import wandb

        run_dir = Path(run_dir)
        refuse_workspace_settings(run_dir, sweep_dir())
        id_file = run_dir / RUN_ID_FILE
        try:  # the rich console stays ours
            settings = wandb.Settings(console="off", **pinned())
        except ValueError as exc:  # pydantic's, of a value of the user's
            raise ConfigError(f"recorder.wandb: your W&B settings: {first_line(exc)}") from None
        hparams = redact({k: v for k, v in config.items() if k not in NOT_HPARAMS})
        resume: Literal["allow"] | None = None
        where: dict[str, Any] = {"project": self.project, "entity": self.entity}  # this config's
        run_id = _saved_run_id(id_file, where) if resume_step is not None else None
        if run_id is not None:  # a resume continues the W&B run of the same project and entity
            resume = "allow"
        mode: Any = self.mode  # checked against MODES
        argv = sys.argv
        sys.argv = [argv[0], *map(redact_override, argv[1:])]  # W&B records the command line
        try:
            self.run = wandb.init(
                **where,
                dir=str(run_dir),
                id=run_id,
                resume=resume,
                name=self.name or run_dir.name,
                group=self.group or sweep_group(),
                tags=self.tags,
                mode=mode,
                config=hparams,
                allow_val_change=resume is not None,  # a resume may change e.g. max_opts
                reinit="create_new",  # our own run object; a user's active run is left alone
                settings=settings,
            )
        except wandb.Error as exc:
            first = first_line(exc)
            raise RunError(
                f"recorder.wandb: W&B did not start ({first}); without an account, record"
                " offline with WANDB_MODE=offline"
            ) from None
        finally:
            sys.argv = argv
        self.run.define_metric(STEP_METRIC)
        self.run.define_metric("*", step_metric=STEP_METRIC)
        record = {"id": self.run.id, "project": where["project"], "entity": where["entity"]}
        write_file(id_file, json.dumps(record).encode())
        log.info("W&B run %s (%s) in %s", self.run.id, self.run.settings.mode, run_dir / WANDB)

    def scalars(self, values: dict[str, Any], step: int) -> None:
        """Log each ``tag: value`` with ``opt_step=step``."""
        assert self.run is not None, "recorder is not open"
        self.run.log({tag: float(value) for tag, value in values.items()} | {STEP_METRIC: step})

    def close(self, status: str = "completed", final: dict[str, float] | None = None) -> None:
        """Put the final metrics and ``status`` in the run's summary and finish it (exit code 0
        when completed, 130 interrupted, 1 failed) (idempotent)."""
        if self.run is None:
            return
        run, self.run = self.run, None
        run.summary.update(dict(final or {}) | {"status": status})
        run.finish(exit_code=EXIT_CODES[status])


def _saved_run_id(id_file: Path, where: dict[str, Any]) -> str | None:
    """The run id ``wandb_run.json`` saved for the project and entity ``where`` (None: no file,
    not one, or another project's or entity's run, which is left alone)."""
    try:
        saved = read_json(id_file)
    except (OSError, ValueError):
        return None
    if not (isinstance(saved, dict) and isinstance(saved.get("id"), str)):
        return None
    if (saved.get("project"), saved.get("entity")) != (where["project"], where["entity"]):
        log.warning("%s is a run of another project or entity: recording to a new run", id_file)
        return None
    return saved["id"]
