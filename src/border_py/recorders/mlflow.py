"""MLflow recording (the ``[mlflow]`` extra): a local SQLite store in the run dir, no server needed.

At its end a run also gets artifacts: the best policy, its config, and the videos in its run dir.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from border_py.config import require
from border_py.errors import ConfigError
from border_py.files import read_json, write_file
from border_py.layout import BEST, CHECKPOINTS, HYDRA, META, MLFLOW_RUN, MLFLOW_STORE, POLICY
from border_py.recorders.base import hyperparameters
from border_py.secrets import redact, redact_text

RUN_ID_FILE = MLFLOW_RUN  # in the run dir: a resumed run continues the same MLflow run
STATUS = {"completed": "FINISHED", "interrupted": "KILLED", "failed": "FAILED"}
BATCH = 100  # MLflow's limit on params per log_batch call
BEST_DIR = Path(CHECKPOINTS) / BEST  # in the run dir: the best policy's checkpoint

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
    dir, e.g. from ``border eval eval.video=true`` or a ``RecordVideo`` wrapper).

    Args:
        tracking_uri: an MLflow tracking URI (``http://...``, ``sqlite:///...``); null: a SQLite
            store ``mlflow.db`` in the run dir (in the sweep dir for the jobs of a multirun).
        experiment_name: the MLflow experiment the run belongs to.
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

    def open(self, run_dir: Path, config: dict[str, Any], resume_step: int | None) -> None:
        """Connect, then create the MLflow run, or reopen it when the run is resumed."""
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        for name in ("alembic", "mlflow.store.db.utils"):  # schema creation chatter
            logging.getLogger(name).setLevel(logging.WARNING)
        run_dir = Path(run_dir)
        self.run_dir, self.config = run_dir, config
        self.last_step = resume_step or 0
        id_file = run_dir / RUN_ID_FILE
        store = default_store(run_dir)
        uri = self.tracking_uri or f"sqlite:///{store / MLFLOW_STORE}"
        saved = _saved_run(id_file) if resume_step is not None else None
        if saved is not None:  # a resume continues the MLflow run if it is in this run's store
            stores = {redact_text(uri): uri}  # as saved (redacted) -> to connect to
            if self.tracking_uri is None:  # border's own store of the run, or of its sweep
                own = (f"sqlite:///{d / MLFLOW_STORE}" for d in (run_dir, run_dir.parent))
                stores |= {u: u for u in own}
            if saved["tracking_uri"] in stores:
                self.client = MlflowClient(tracking_uri=stores[saved["tracking_uri"]])
                self.run_id = saved["run_id"]
                self.client.update_run(self.run_id, status="RUNNING")
                return
            log.warning(
                "%s names the store %s, not this run's %s: recording to a new MLflow run",
                id_file,
                saved["tracking_uri"],
                redact_text(uri),
            )
        store.mkdir(parents=True, exist_ok=True)
        self.client = MlflowClient(tracking_uri=uri)
        experiment = self.client.get_experiment_by_name(self.experiment_name)
        if experiment is None:
            experiment_id = self.client.create_experiment(
                self.experiment_name, artifact_location=(store / "mlartifacts").as_uri()
            )
        else:
            experiment_id = experiment.experiment_id
        run = self.client.create_run(
            experiment_id,
            run_name=self.run_name or run_dir.name,
            tags={"border_py.run_dir": str(run_dir)},
        )
        self.run_id = run.info.run_id
        params = [Param(k, str(v)) for k, v in hyperparameters(config).items()]
        for i in range(0, len(params), BATCH):
            self.client.log_batch(self.run_id, params=params[i : i + BATCH])
        write_file(
            id_file, json.dumps({"tracking_uri": redact_text(uri), "run_id": self.run_id}).encode()
        )

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
            log.warning("MLflow: the run's artifacts were not logged (%s)", exc)
        self.client.set_terminated(self.run_id, STATUS[status])
        self.client = None

    def log_artifacts(self) -> None:
        """The best policy, the config, Hydra's files and the videos of the run (see the class)."""
        client, run_id = self.client, self.run_id
        client.log_dict(run_id, redact(self.config), "config.yaml")
        best = self.run_dir / BEST_DIR
        for name in (POLICY, META):
            if (best / name).is_file():
                client.log_artifact(run_id, str(best / name), BEST)
        hydra_dir = self.run_dir / HYDRA
        if hydra_dir.is_dir():
            client.log_artifacts(run_id, str(hydra_dir), "hydra")
        for video in sorted(self.run_dir.rglob("*.mp4")):
            where = video.parent.relative_to(self.run_dir)
            client.log_artifact(run_id, str(video), str(Path("videos") / where))


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
