"""Runs given a password in ``recorder.mlflow.tracking_uri`` and a token in the environment of
their processes record neither anywhere (every file under the run or sweep dir, binary ones
included), while the run itself uses both; a resume refuses the saved marker until they are given
again."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import psutil
import pytest
import yaml

from .. import conftest
from ..conftest import BORDER, REPO

pytest.importorskip("mlflow", reason="the [mlflow] extra is not installed")
pytest.importorskip("wandb", reason="the [wandb] extra is not installed")

TINY = [
    "experiment=none",
    "env=gym",
    "env.id=tests.secret_env:TokenCheck-v0",
    *conftest.TINY,
    "progress=false",
]
TRUST = "trust=[tests]"  # the saved config's env comes from tests/ (see README, trust)
# what a run records: each must exist, so that a recording path that went missing is noticed
RECORDS = [
    ".border_run",
    ".hydra/config.yaml",
    ".hydra/hydra.yaml",
    ".hydra/overrides.yaml",
    "checkpoints/best/config.json",
    "checkpoints/000000300/config.json",
    "mlflow_run.json",
    "result.json",
    "train.log",
    "wandb_run.json",
]


def holding(root: Path, *secrets: str) -> list[str]:
    """The files under ``root`` whose bytes contain one of ``secrets`` (links not followed)."""
    found = []
    for where, _, names in os.walk(root):
        for name in names:
            path = Path(where, name)
            if not path.is_symlink() and any(s.encode() in path.read_bytes() for s in secrets):
                found.append(str(path.relative_to(root)))
    return found


def border(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run ``border <args>`` in its own process group (killed whole on a timeout); return its
    exit status and its output."""
    proc = subprocess.Popen(
        [*BORDER, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, output


@pytest.fixture
def secrets(tmp_path, monkeypatch):
    """A password, a token, the MLflow file store (outside the run dir, as a remote server would
    be) and the dir where the env's processes note that they saw the token."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # a store MLflow accepts credentials in
    password, token = f"pw-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    store, seen = tmp_path / "store", tmp_path / "seen"
    seen.mkdir()
    digest = hashlib.sha256(token.encode()).hexdigest()
    return {
        "password": password,
        "token": token,
        "store": store,
        "seen": seen,
        "uri": f"file://alice:{password}@localhost{store}",
        "env": [f"+env.kwargs.digest={digest}", f"+env.kwargs.seen_dir={seen}"],
        "process_env": {
            "MLFLOW_ALLOW_FILE_STORE": "true",
            "WANDB_MODE": "offline",
            "WANDB_SILENT": "true",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        },
    }


def store_holding(secrets: dict) -> list[str]:
    """The MLflow store's files holding the password: only MLflow's own record of its Default
    experiment (``0/meta.yaml``: an artifact location under the store's URI, as given)."""
    return holding(secrets["store"], secrets["password"])


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_ray_run_records_no_secret_and_its_resume_needs_them_given_again(tmp_path, secrets):
    from mlflow.tracking import MlflowClient

    from ..actors.test_ray_cli import left_behind, ray_tmpdir  # skips without the [ray] extra

    run, seen = tmp_path / "run", secrets["seen"]
    marker, ray_tmp = f"secrets-{uuid.uuid4().hex}", ray_tmpdir()
    env = secrets["process_env"] | {"BORDER_TEST_MARKER": marker, "RAY_TMPDIR": ray_tmp}
    token_env = f"{{env_vars:{{BORDER_TEST_TOKEN:{secrets['token']}}}}}"
    common = ["actor_manager=ray", "actor_manager.object_store_memory=100000000"]
    try:
        status, output = border(
            [
                "train",
                *TINY,
                *common,
                *secrets["env"],
                "actor_manager.n_actors=1",
                "trainer.save_interval=100",
                "recorder=[tensorboard,mlflow,wandb]",
                f"recorder.mlflow.tracking_uri={secrets['uri']}",
                f"actor_manager.runtime_env={token_env}",
                f"run_dir={run}",
            ],
            tmp_path,
            env,
            timeout=150,
        )
        assert status == 0, output[-3000:]
        first_session = set(os.listdir(seen))
        assert first_session, "no Ray worker saw the token"  # the workers got the real value
        for name in RECORDS:
            assert (run / name).is_file(), name
        assert list((run / "tensorboard").glob("events.out.tfevents.*"))
        assert list((run / "wandb").glob("offline-run-*/run-*.wandb"))
        assert list((run / "mlartifacts").rglob("config.yaml"))
        assert holding(run, secrets["password"], secrets["token"]) == []
        assert holding(run, f"alice:***@localhost{secrets['store']}")  # recorded, redacted
        config = json.loads((run / "checkpoints/best/config.json").read_text())
        assert config["actor_manager"]["runtime_env"] == {"env_vars": {"BORDER_TEST_TOKEN": "***"}}
        assert store_holding(secrets) == ["0/meta.yaml"]

        before = (run / "result.json").read_bytes()
        again = f"actor_manager.runtime_env.env_vars.BORDER_TEST_TOKEN={secrets['token']}"
        status, output = border(
            ["train", f"resume={run}", "trainer.max_opts=400", TRUST, again],
            tmp_path,
            env,
            timeout=60,
        )
        assert status == 2, output[-3000:]
        line = output.strip().splitlines()[-1]  # the store's URI is given again, or not used
        assert line.startswith("border: error: recorder.mlflow.tracking_uri=file://alice:***@")
        assert line.endswith(
            "a saved run's recorder.mlflow.tracking_uri is used only when you give it again on"
            " this command line (the run's metrics, config and best policy go there)"
        )
        assert "Traceback" not in output
        assert (run / "result.json").read_bytes() == before
        assert not (run / "checkpoints/000000400").exists()

        status, output = border(
            [
                "train",
                f"resume={run}",
                "trainer.max_opts=400",
                TRUST,
                again,
                f"recorder.mlflow.tracking_uri={secrets['uri']}",
            ],
            tmp_path,
            env,
            timeout=150,
        )
        assert status == 0, output[-3000:]
        assert set(os.listdir(seen)) > first_session  # the new session's workers: the real token
        assert (run / "checkpoints/000000400/config.json").is_file()
        assert holding(run, secrets["password"], secrets["token"]) == []
        assert store_holding(secrets) == ["0/meta.yaml"]
        run_id = json.loads((run / "mlflow_run.json").read_text())["run_id"]
        client = MlflowClient(tracking_uri=f"file://{secrets['store']}")
        steps = [m.step for m in client.get_metric_history(run_id, "hparams/best_return")]
        assert steps == [300, 400]  # the same MLflow run, continued through the URI given again
        params = client.get_run(run_id).data.params
        assert (
            params["recorder.mlflow.tracking_uri"]
            == f"file://alice:***@localhost{secrets['store']}"
        )
    finally:  # a failed run may leave its local Ray behind
        left = left_behind(marker, ray_tmp)
        for process in left:
            process.kill()
        psutil.wait_procs(left, timeout=10)
        shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_sweep_records_no_secret_and_border_eval_needs_it_given_again(tmp_path, secrets):
    """A local sweep job gets the token as an env kwarg (``api_key``) and, through Hydra's
    ``env_set``, in its environment: its env sees both, its dir and the sweep's
    ``multirun.yaml`` record neither. ``border eval`` of the job refuses the marker."""
    sweep, seen, token = tmp_path / "sweep", secrets["seen"], secrets["token"]
    status, output = border(
        [
            "train",
            "-m",
            *TINY,
            *secrets["env"],
            f"+env.kwargs.api_key={token}",
            "trainer=serial",
            "recorder=both",
            f"recorder.mlflow.tracking_uri={secrets['uri']}",
            f"+hydra.job.env_set.BORDER_TEST_TOKEN={token}",
            f"hydra.sweep.dir={sweep}",
            "seed=0",
        ],
        tmp_path,
        secrets["process_env"],
        timeout=150,
    )
    assert status == 0, output[-3000:]
    assert {name.split("-")[0] for name in os.listdir(seen)} == {"kwarg", "env"}
    assert holding(sweep, secrets["password"], token) == []
    for record in (sweep / "multirun.yaml", sweep / "0" / ".hydra" / "hydra.yaml"):
        recorded = yaml.safe_load(record.read_text())["hydra"]
        assert recorded["job"]["env_set"] == {"BORDER_TEST_TOKEN": "***"}, record
    assert store_holding(secrets) == ["0/meta.yaml"]

    job = sweep / "0"
    args = ["eval", str(job), "eval.n_episodes=1", TRUST]
    status, output = border(args, tmp_path, secrets["process_env"], timeout=60)
    assert status == 2 and output.strip().splitlines()[-1].startswith(
        "border: error: env.kwargs.api_key (saved as ***: secrets are never recorded)"
    ), output[-3000:]
    kwarg_seen = {name for name in os.listdir(seen) if name.startswith("kwarg")}
    status, output = border(
        [*args, f"env.kwargs.api_key={token}"], tmp_path, secrets["process_env"], timeout=60
    )
    assert status == 0, output[-3000:]
    assert {n for n in os.listdir(seen) if n.startswith("kwarg")} > kwarg_seen  # the real key
    (written,) = (job / "checkpoints" / "best").glob("eval_*.json")
    assert json.loads(written.read_text())["env"]["kwargs"]["api_key"] == "***"
    assert holding(sweep, secrets["password"], token) == []


def _credentials(unique: str) -> dict[str, str]:
    """An env kwarg for each shape of credential and each key name that names a secret, each
    made up and holding ``unique``; and a plain value that must be recorded as it is."""
    from .test_secrets import TOKENS, fake

    given = {f"value_{i}": token[: -len(unique)] + unique for i, (_, token) in enumerate(TOKENS)}
    return given | {
        "access_key": f"AK1{unique}",
        "ssh_key": f"ssh{unique}",
        "github_pat": f"pat{unique}",
        "session_cookie": f"ck{unique}",
        "sentry_dsn": f"https://{unique}@o1.ingest.sentry.io/2",
        "slack_webhook": f"https://hooks.slack.com/services/T0/B0/{unique}",
        "errors_to": f"https://{unique}@o1.ingest.sentry.io/2",  # plain names: by their shape
        "notify": f"https://hooks.slack.com/services/T0/B0/{unique}",
        "connection_string": f"AccountName=acct;AccountKey={unique}==;EndpointSuffix=x.net",
        "db": f"postgresql://alice:{unique}@db/x",
        "label": fake("plain_value-", 8),
    }


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_credentials_of_every_shape_are_recorded_nowhere(tmp_path):
    """A tiny serial run whose env is given a credential of each shape (as kwargs with plain names,
    and under key names that name a secret) records none of them: not in ``config.json``,
    ``result.json``, ``.border_run``, ``.hydra/*.yaml``, ``train.log`` nor TensorBoard's events
    (every file of the run, binary ones included). The env got the real values."""
    unique = uuid.uuid4().hex[:12].upper()  # in every credential, and nowhere else
    given = _credentials(unique)
    seen, run = tmp_path / "seen", tmp_path / "run"
    seen.mkdir()
    digest = hashlib.sha256(json.dumps(given, sort_keys=True).encode()).hexdigest()
    status, output = border(
        [
            "train",
            "experiment=none",
            "env=gym",
            "env.id=tests.security.kwargs_env:AnyKwargs-v0",
            *conftest.TINY,
            "progress=false",
            "trainer=serial",
            f"+env.kwargs.digest={digest}",
            f"+env.kwargs.seen_dir={seen}",
            *[f"+env.kwargs.{k}='{v}'" for k, v in given.items()],
            f"run_dir={run}",
        ],
        tmp_path,
        {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
        timeout=150,
    )
    assert status == 0, output[-3000:]
    assert os.listdir(seen)  # the env was given the real values
    for name in (".border_run", ".hydra/config.yaml", ".hydra/overrides.yaml", "result.json"):
        assert (run / name).is_file(), name
    assert (run / "checkpoints/best/config.json").is_file()
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert holding(run, unique) == [] and unique not in output
    recorded = json.loads((run / "checkpoints/best/config.json").read_text())["env"]["kwargs"]
    assert recorded["label"] == given["label"]  # an ordinary value stays
    assert recorded["connection_string"] == "AccountName=acct;AccountKey=***;EndpointSuffix=x.net"
    assert recorded["errors_to"] == "https://***@o1.ingest.sentry.io/2"
    assert recorded["notify"] == "https://hooks.slack.com/***"
    assert recorded["access_key"] == recorded["sentry_dsn"] == "***"
    assert {recorded[k] for k in given if k.startswith("value_")} == {"***"}


@pytest.mark.slow
def test_hydras_own_refusal_of_an_override_never_shows_its_secret(tmp_path):
    """``hydra.job.env_set.X=<secret>`` without ``+``: Hydra refuses it, and its message would
    echo the override whole; border's line says the same with the value redacted."""
    secret = f"S3CRET{uuid.uuid4().hex}"
    for extra in ([], ["-m", "seed=0,1"]):
        status, output = border(
            ["train", *extra, f"hydra.job.env_set.MY_SERVICE_TOKEN={secret}", *conftest.TINY],
            tmp_path,
            {},
            timeout=60,
        )
        assert status == 2, output
        assert secret not in output
        (line,) = output.strip().splitlines()
        assert line.startswith(
            "border: error: Could not override 'hydra.job.env_set.MY_SERVICE_TOKEN' (to append"
            " to your config use +hydra.job.env_set.MY_SERVICE_TOKEN=***"
        ), line
    assert os.listdir(tmp_path) == []
