"""MLflow recording (the ``[mlflow]`` extra): a local SQLite store in the run dir, no server needed.

At its end a run also gets artifacts: the best policy, its config, and the videos in its run dir.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from border_py.config import require
from border_py.errors import ConfigError, printable
from border_py.files import make_dir, open_regular, read_json, write_file
from border_py.layout import (
    BEST,
    CHECKPOINTS,
    HYDRA,
    HYDRA_RECORDS,
    META,
    MLFLOW_ARTIFACTS,
    MLFLOW_RUN,
    MLFLOW_STORE,
    POLICY,
    WANDB,
)
from border_py.recorders.base import hyperparameters
from border_py.recorders.mlflow_store import (
    artifact_roots,
    choose_store,
    inspect,
    moved_from,
    own_artifacts,
    store_named,
    store_uri,
)
from border_py.secrets import redact, redact_text

__all__ = ["RUN_ID_FILE", "MlflowRecorder"]

RUN_ID_FILE = MLFLOW_RUN  # in the run dir: a resumed run continues the same MLflow run
STATUS = {"completed": "FINISHED", "interrupted": "KILLED", "failed": "FAILED"}
BATCH = 100  # MLflow's limit on params per log_batch call
BEST_DIR = Path(CHECKPOINTS) / BEST  # in the run dir: the best policy's checkpoint
NOT_VIDEOS = (WANDB, MLFLOW_ARTIFACTS)  # dirs of the run that other tools fill: never uploaded
MLFLOW_DEFAULT = "Default"  # the experiment MLflow makes in every store, its artifacts in ./mlruns

log = logging.getLogger(__name__)


def default_store(run_dir: Path) -> Path:
    """Where the SQLite store goes by default: the sweep dir for a multirun job (so the jobs of a
    sweep are compared in one MLflow experiment), else the run dir."""
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return Path(HydraConfig.get().sweep.dir).resolve()
    return Path(run_dir)


class MlflowRecorder:
    """Params (the flattened config), metrics at each opt step, tags and the run's end status in
    MLflow, through ``MlflowClient`` (no process-global active run, so sweep jobs never mix).

    When the run ends, its artifacts: ``best/policy.pt`` and ``best/meta.json`` (the best
    policy, see ``checkpoints/best/``), ``config.yaml`` (the resolved config), ``hydra/`` (Hydra's
    composed config and overrides, when Hydra ran it) and ``videos/`` (every ``.mp4`` under the run
    dir, e.g. from ``border eval eval.video=true`` or a ``RecordVideo`` wrapper; none under
    ``wandb/`` or ``mlartifacts/``). Each is read never through a link (:func:`stage_artifacts`).

    With ``tracking_uri`` null, the store is border's own: a store found in the run or sweep dir
    is used only when its artifacts stay under the run or store dir, else the run records to a
    store beside it (:mod:`border_py.recorders.mlflow_store`).

    Args:
        tracking_uri: an MLflow tracking URI (``http://...``, ``sqlite:///...``); null: a SQLite
            store ``mlflow.db`` in the run dir (in the sweep dir for the jobs of a multirun).
        experiment_name: the MLflow experiment the run belongs to (not MLflow's own
            ``Default`` in border's own store: its artifacts are in the working dir).
        run_name: the MLflow run name (null: the run dir's name).
    """

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment_name: str = "border-py",
        run_name: str | None = None,
    ) -> None:
        require(
            "tracking_uri",
            tracking_uri is None or isinstance(tracking_uri, str),
            "null or a tracking URI string",
            tracking_uri,
        )
        require(
            "experiment_name",
            isinstance(experiment_name, str) and experiment_name != "",
            "a non-empty string",
            experiment_name,
        )
        require(
            "experiment_name",
            tracking_uri is not None or experiment_name != MLFLOW_DEFAULT,
            "another name than MLflow's own experiment when border keeps the store (MLflow makes"
            " Default with its artifacts in mlruns/ of the working dir, outside the run): e.g."
            " border-py, or name a store with recorder.mlflow.tracking_uri=...",
            experiment_name,
        )
        try:
            from mlflow.tracking import MlflowClient  # noqa: F401
        except ImportError:
            raise ConfigError(
                "_target_: the MLflow recorder needs MLflow: pip install 'border-py[mlflow]'"
            ) from None
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.client: Any = None
        self.run_id: str | None = None
        self.last_step = 0
        self.run_dir = Path()
        self.config: dict[str, Any] = {}
        self.roots: tuple[Path, ...] = ()  # where the run's artifacts may go (none: anywhere)

    def open(self, run_dir: Path, config: dict[str, Any], resume_step: int | None) -> None:
        """Connect, then create the MLflow run, or reopen it when the run is resumed. When a
        resumed run's MLflow run is not continued, or a store found is left alone, one line says
        why and where the new MLflow run records.

        Raises:
            ConfigError: border's own store's experiment keeps its artifacts elsewhere than under
                the run or store dir (see :mod:`border_py.recorders.mlflow_store`).
            RunError: a store found stayed locked by another process (see
                :func:`~border_py.recorders.mlflow_store.inspect`).
        """
        for name in ("alembic", "mlflow.store.db.utils"):  # schema creation chatter
            logging.getLogger(name).setLevel(logging.WARNING)
        run_dir = Path(run_dir).resolve()  # as store_dir: paths are compared resolved
        self.run_dir, self.config = run_dir, config
        self.last_step = resume_step or 0
        store_dir = default_store(run_dir)
        saved = _saved_run(run_dir / RUN_ID_FILE) if resume_step is not None else None
        client, why = self._reopen(saved, run_dir, store_dir) if saved else (None, None)
        if client is not None:
            self.client = client
            return
        aside = None
        if self.tracking_uri is None:
            store, aside = choose_store(store_dir, run_dir, self.experiment_name)
            uri, self.roots = store_uri(store), artifact_roots(run_dir, store_dir)
        else:
            uri = self.tracking_uri
        said = [reason for reason in (why, aside) if reason is not None]
        if said:
            log.warning(
                "%s; recording to a new MLflow run in %s", "; ".join(said), redact_text(uri)
            )
        store_dir.mkdir(parents=True, exist_ok=True)
        self.client = self._new_run(uri, store_dir / MLFLOW_ARTIFACTS)
        record = {"tracking_uri": redact_text(uri), "run_id": self.run_id}
        write_file(run_dir / RUN_ID_FILE, json.dumps(record).encode())

    def _reopen(
        self, saved: dict[str, str], run_dir: Path, store_dir: Path
    ) -> tuple[Any, str | None]:
        """The client of the MLflow run ``mlflow_run.json`` names (``saved``), reopened, when it
        is in the store this command records to: the one the command names, else border's own
        store of the run (or of its sweep) it names, holding the run with its artifacts there.
        Else None, with why (None: :func:`choose_store` says it, of the same store)."""
        from mlflow.tracking import MlflowClient

        run_id, named = saved["run_id"], saved["tracking_uri"]
        id_file = run_dir / RUN_ID_FILE
        if self.tracking_uri is not None:
            uri = self.tracking_uri
            if named != redact_text(uri):
                mine = redact_text(uri)
                return None, f"{id_file} names the store {printable(named)}, not this run's {mine}"
        else:
            dirs = tuple(dict.fromkeys((run_dir, store_dir, run_dir.parent)))
            store = store_named(named, dirs)
            if store is None:
                old = moved_from(named, dirs)
                if old is not None:
                    return None, (
                        f"{id_file} names the MLflow store in {printable(str(old))}: the run was"
                        " moved or copied from there"
                    )
                mine = f"a store in {run_dir} or {store_dir}"
                return None, f"{id_file} names the store {printable(named)}, not this run's {mine}"
            roots = artifact_roots(run_dir, store.parent)
            found = inspect(store, self.experiment_name, run_id, roots)
            if found.foreign is not None or not found.has_run:
                if found.foreign is not None and store == store_dir / MLFLOW_STORE:
                    return None, None  # choose_store's reason names it
                why = found.foreign or f"it holds no run {printable(run_id)}"
                return None, f"{store}: not border's own MLflow store of this run ({why})"
            uri, self.roots = store_uri(store), roots
        client = MlflowClient(tracking_uri=uri)
        client.update_run(run_id, status="RUNNING")
        self.run_id = run_id
        return client, None

    def _new_run(self, uri: str, artifacts: Path) -> Any:
        """Connect to ``uri``, create the MLflow run (and its experiment, its artifacts in
        ``artifacts``) and log the params; return the client."""
        from mlflow.entities import Param
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name(self.experiment_name)
        if experiment is None:
            with contextlib.suppress(MlflowException):  # another job of the sweep's made it
                client.create_experiment(self.experiment_name, artifact_location=artifacts.as_uri())
            experiment = client.get_experiment_by_name(self.experiment_name)
            assert experiment is not None, "created just above, by this job or another"
        if self.roots:
            what = f"its experiment {self.experiment_name!r}"
            own_artifacts(experiment.artifact_location, self.roots, what)
        run = client.create_run(
            experiment.experiment_id,
            run_name=self.run_name or self.run_dir.name,
            tags={"border_py.run_dir": str(self.run_dir)},
        )
        self.run_id = run.info.run_id
        params = [Param(k, str(v)) for k, v in hyperparameters(self.config).items()]
        for i in range(0, len(params), BATCH):
            client.log_batch(self.run_id, params=params[i : i + BATCH])
        return client

    def scalars(self, values: dict[str, Any], step: int) -> None:
        """Log each ``tag: value`` at ``step`` in one batch."""
        from mlflow.entities import Metric

        assert self.client is not None, "recorder is not open"
        now = int(time.time() * 1000)
        metrics = [Metric(tag, float(value), now, step) for tag, value in values.items()]
        self.client.log_batch(self.run_id, metrics=metrics)
        self.last_step = step

    def close(self, status: str = "completed", final: dict[str, float] | None = None) -> None:
        """Log the final metrics and end the MLflow run with ``status`` (idempotent)."""
        if self.client is None:
            return
        if final:
            self.scalars(final, self.last_step)
        try:
            self.log_artifacts()
        except Exception as exc:  # an unreachable artifact store must not lose the run's end
            log.warning("MLflow: the run's artifacts were not logged (%s)", printable(str(exc)))
        self.client.set_terminated(self.run_id, STATUS[status])
        self.client = None

    def log_artifacts(self) -> None:
        """The best policy, the config, Hydra's files and the videos of the run (see the class),
        copied first into a private dir of their own (:func:`stage_artifacts`).

        Raises:
            ConfigError: border's own store's run keeps its artifacts elsewhere than under the
                run or store dir (nothing is sent).
        """
        client, run_id = self.client, self.run_id
        if self.roots:
            own_artifacts(client.get_run(run_id).info.artifact_uri, self.roots, "its run")
        client.log_dict(run_id, redact(self.config), "config.yaml")
        with tempfile.TemporaryDirectory(prefix="border-mlflow-") as staging:
            stage_artifacts(self.run_dir, Path(staging))
            client.log_artifacts(run_id, staging)


def stage_artifacts(run_dir: Path, staging: Path) -> None:
    """Copy the run's artifacts into ``staging``: ``best/`` (policy and meta of
    ``checkpoints/best/``), ``hydra/`` (Hydra's records) and ``videos/<where>/`` (every ``.mp4``
    in the run dir, but under :data:`NOT_VIDEOS`). Each is opened never through a link and only
    if it is a regular file (:func:`~border_py.files.open_regular`); one that is not is left out
    with one line naming it. Nothing outside the run dir is read.
    """
    chosen = [(BEST_DIR / name, Path(BEST, name)) for name in (POLICY, META)]
    chosen += [(Path(HYDRA, name), Path("hydra", name)) for name in HYDRA_RECORDS]
    for top, dirs, files in os.walk(run_dir):  # never descends into a linked dir
        where = Path(top).relative_to(run_dir)
        dirs[:] = sorted(d for d in dirs if where != Path() or d not in NOT_VIDEOS)
        chosen += [
            (where / f, Path("videos", where, f)) for f in sorted(files) if f.endswith(".mp4")
        ]
    for source, target in chosen:
        if not os.path.lexists(run_dir / source):
            continue
        try:
            with open_regular(run_dir / source) as handle:
                make_dir(staging / target.parent)
                with open(staging / target, "xb") as copy:  # in a private dir of its own
                    shutil.copyfileobj(handle, copy)
        except OSError as exc:
            log.warning(
                "MLflow: %s left out of the run's artifacts (%s)",
                printable(str(run_dir / source)),  # a name found in the run dir
                printable(str(exc.strerror or exc)),
            )


def _saved_run(id_file: Path) -> dict[str, str] | None:
    """``mlflow_run.json``'s store (its URI, redacted) and run id, or None (none, or not one)."""
    try:
        saved = read_json(id_file)
    except (OSError, ValueError):
        return None
    fields = ("tracking_uri", "run_id")
    if isinstance(saved, dict) and all(isinstance(saved.get(f), str) for f in fields):
        return {f: saved[f] for f in fields}
    return None
