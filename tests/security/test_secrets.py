"""Secrets in config values (``border_py.secrets``): what is redacted, in configs, overrides and
text, and the refusal of a config that holds the marker. The run that records nothing of them is
in ``test_secrets_recorded.py``."""

from __future__ import annotations

import copy
import json
import logging
import re

import pytest
import yaml

from border_py.cli.hydra_callbacks import _redact_record
from border_py.errors import ConfigError
from border_py.recorders.base import hyperparameters
from border_py.secrets import (
    REDACTED,
    RedactingFormatter,
    redact,
    redact_override,
    redact_text,
    refuse_redacted,
    secret_key,
)

SECRET_KEYS = [
    "password",
    "db_password",
    "PGPASSWORD",
    "passwd",
    "passphrase",
    "client_secret",
    "AWS_SECRET_ACCESS_KEY",
    "credentials",
    "api_key",
    "apikey",
    "api-key",
    "apiKey",
    "WANDB_API_KEY",
    "private_key",
    "token",
    "HF_TOKEN",
    "accessToken",
    "auth",
    "basic_auth",
    "Authorization",
    "access_key",
    "ssh_key",
    "encryption_key",
    "azure_storage_key",
    "AccountKey",
    "SharedAccessKey",
    "AWS_ACCESS_KEY",
    "github_pat",
    "PAT",
    "cookie",
    "Cookie",
    "session_cookies",
    "dsn",
    "SENTRY_DSN",
    "webhook",
    "slack_webhook_url",
    "Pwd",
]
PLAIN_KEYS = [
    "max_tokens",
    "tokenizer",
    "token_url",
    "author",
    "auth_mode",
    "RAY_AUTH_MODE",
    "tracking_uri",
    "lr",
    "env",
    "n_step",
    "kwargs",
    "key",  # alone: a word too common (a dict's key, "key=value" in a message)
    "keys",
    "key_or_group",
    "monkey",
    "hotkey",
    "obs_key",  # gymnasium's wrappers name entries of an observation or info dict
    "render_key",
    "stats_key",
    "dict_time_key",
    "patience",
    "patch_size",
    "path",
    "cookiecutter",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_keys_that_name_a_secret(key):
    assert secret_key(key)


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_keys_that_do_not(key):
    assert not secret_key(key)


def test_redact_copies_the_config_with_every_secret_replaced():
    config = {
        "recorder": {
            "mlflow": {"tracking_uri": "postgresql://alice:S3CRET@db:5432/mlflow"},
            "plain": {"tracking_uri": "http://mlflow.lan:5000"},
        },
        "actor_manager": {
            "runtime_env": {"env_vars": {"HF_HOME": "/data/hf", "UNSET": None}, "pip": ["x"]}
        },
        "env": {
            "id": "CartPole-v1",
            "kwargs": {"api_key": "K3Y", "auth": False, "timeout": 5},
            "wrappers": [{"_target_": "w", "token": "T0K"}, {"_target_": "v"}],
        },
        "credentials": {"user": "alice", "pin": 1234},
        "overrides": ["seed=1", "a.password=pw,pw2"],
    }
    before = copy.deepcopy(config)
    assert redact(config) == {
        "recorder": {
            "mlflow": {"tracking_uri": "postgresql://alice:***@db:5432/mlflow"},
            "plain": {"tracking_uri": "http://mlflow.lan:5000"},
        },
        "actor_manager": {
            "runtime_env": {"env_vars": {"HF_HOME": REDACTED, "UNSET": None}, "pip": ["x"]}
        },
        "env": {
            "id": "CartPole-v1",
            "kwargs": {"api_key": REDACTED, "auth": False, "timeout": 5},
            "wrappers": [{"_target_": "w", "token": REDACTED}, {"_target_": "v"}],
        },
        "credentials": {"user": REDACTED, "pin": REDACTED},
        "overrides": ["seed=1", "a.password=***"],
    }
    assert config == before  # a copy: the run goes on with the real values
    assert redact(["x", "y"], "a.env_vars.B") == [REDACTED, REDACTED]
    assert redact("http://u:p@h/", "tracking_uri") == "http://u:***@h/"


@pytest.mark.parametrize(
    ("override", "recorded"),
    [
        (
            "recorder.mlflow.tracking_uri=postgresql://alice:S3CRET@db/mlflow",
            "recorder.mlflow.tracking_uri=postgresql://alice:***@db/mlflow",
        ),
        (
            "recorder.mlflow.tracking_uri=http://h:5000",
            "recorder.mlflow.tracking_uri=http://h:5000",
        ),
        ("redis=redis://:pw@h:6379/0", "redis=redis://:***@h:6379/0"),
        ("uri=https://u:p@ss@h/x", "uri=https://u:***@h/x"),  # an unescaped '@' in the password
        ("uri=https://h/x?token=abc&page=2", "uri=https://h/x?token=***&page=2"),
        (  # as Hydra writes a sweep job's overrides: special characters escaped
            r"recorder.mlflow.tracking_uri=file\://alice\:S3CRET@localhost/store",
            r"recorder.mlflow.tracking_uri=file\://alice\:***@localhost/store",
        ),
        (r"uri=https\://h/x?token\=abc", r"uri=https\://h/x?token\=***"),
        (
            "actor_manager.runtime_env.env_vars.HF_HOME=/data",
            "actor_manager.runtime_env.env_vars.HF_HOME=***",
        ),
        (
            "+actor_manager.runtime_env.env_vars={A:1,B:2}",
            "+actor_manager.runtime_env.env_vars=***",
        ),
        (
            "actor_manager.runtime_env={env_vars:{A:1,B:2},working_dir:.}",
            "actor_manager.runtime_env={env_vars:***,working_dir:.}",
        ),
        ("++env.kwargs.api_key='a b,c'", "++env.kwargs.api_key=***"),
        ("env.kwargs.password=pw1,pw2", "env.kwargs.password=***"),  # a sweep: every value
        ("env.kwargs={token: t, n: 2}", "env.kwargs={token: ***, n: 2}"),
        ("(resume) env.kwargs.token=t", "(resume) env.kwargs.token=***"),
        ("env.kwargs.max_tokens=512", "env.kwargs.max_tokens=512"),
        ("needs RAY_AUTH_MODE=token here", "needs RAY_AUTH_MODE=token here"),
        ("env.id=my_pkg.secret_envs:Vault-v0", "env.id=my_pkg.secret_envs:Vault-v0"),  # module:attr
        ("uri=http://auth-server:5000/x", "uri=http://auth-server:5000/x"),  # host:port
        ("agent.hidden_sizes=[64,64]", "agent.hidden_sizes=[64,64]"),
        ("seed=0,1,2", "seed=0,1,2"),
        ("recorder=both", "recorder=both"),
    ],
)
def test_an_override_is_recorded_without_its_secret(override, recorded):
    assert redact_override(override) == recorded


def test_text_keeps_everything_but_the_secrets():
    line = (
        "[12:00:00,001][mlflow][INFO] - connecting to mysql://bob:hunter2@db:3306/m"
        " with {'password': 'hunter2', 'user': 'bob'} and token=abc; pool size: 5"
    )
    assert redact_text(line) == (
        "[12:00:00,001][mlflow][INFO] - connecting to mysql://bob:***@db:3306/m"
        " with {'password': ***, 'user': 'bob'} and token=***; pool size: 5"
    )
    assert redact_text("a:" * 50_000) == "a:" * 50_000  # no pair is a secret; linear time


def test_a_config_holding_the_marker_is_refused_in_one_line_naming_its_keys():
    saved = {
        "recorder": {"mlflow": {"tracking_uri": "file://alice:***@localhost/store"}},
        "actor_manager": {"runtime_env": {"env_vars": {"HF_TOKEN": "***"}}},
        "env": {"wrappers": [{"token": "***"}]},
        "seed": 0,
    }
    with pytest.raises(ConfigError) as err:
        refuse_redacted(saved)
    message = str(err.value)
    assert "\n" not in message
    assert message == (
        "recorder.mlflow.tracking_uri, actor_manager.runtime_env.env_vars.HF_TOKEN,"
        " env.wrappers.0.token (saved as ***: secrets are never recorded): give them again on"
        " the command line, or a value that takes the secret from an environment variable (see"
        ' README, "Credentials")'
    )
    assert redact_text(message) == message  # printed whole by border's error line
    refuse_redacted(redact({"seed": 0, "recorder": {"tracking_uri": "http://h"}}))  # nothing held


def test_hyperparameters_hold_no_secret():
    config = {
        "recorder": {"mlflow": {"tracking_uri": "postgresql://u:S3CRET@db/m"}},
        "actor_manager": {"runtime_env": {"env_vars": {"TOKEN_A": "T0K"}}},
    }
    assert hyperparameters(config) == {
        "recorder.mlflow.tracking_uri": "postgresql://u:***@db/m",
        "actor_manager.runtime_env.env_vars.TOKEN_A": REDACTED,
    }


def test_a_log_line_and_its_traceback_are_redacted():
    formatter = RedactingFormatter("%(levelname)s %(message)s")
    try:
        raise RuntimeError("cannot reach postgresql://u:S3CRET@db/m")
    except RuntimeError as exc:
        record = logging.LogRecord(
            "x",
            logging.ERROR,
            __file__,
            1,
            "run failed: %s",
            (exc,),
            exc_info=(type(exc), exc, exc.__traceback__),
        )
    text = formatter.format(record)
    assert "S3CRET" not in text
    assert text.count("postgresql://u:***@db/m") == 3  # message, traceback's source line and end


def test_a_resumed_mlflow_run_connects_with_the_uri_given_again(tmp_path, monkeypatch, caplog):
    """``mlflow_run.json`` keeps the URI without its password; the resumed session connects
    with this session's ``tracking_uri``, which the resume made the user give again. A file that
    names another store is never connected to: the session's config decides (a run dir is data)."""
    pytest.importorskip("mlflow", reason="the [mlflow] extra is not installed")
    from border_py.recorders.mlflow import RUN_ID_FILE, MlflowRecorder

    connected = []

    class NewRun(Exception):
        pass

    class Client:
        def __init__(self, tracking_uri):
            connected.append(tracking_uri)

        def update_run(self, run_id, status):
            connected.append(run_id)

        def get_experiment_by_name(self, name):
            raise NewRun  # a new MLflow run would be made here

    monkeypatch.setattr("mlflow.tracking.MlflowClient", Client)
    saved = {"tracking_uri": "postgresql://alice:***@db/m", "run_id": "r1"}
    (tmp_path / RUN_ID_FILE).write_text(json.dumps(saved))
    MlflowRecorder("postgresql://alice:S3CRET@db/m").open(tmp_path, {}, resume_step=10)
    assert connected == ["postgresql://alice:S3CRET@db/m", "r1"]
    saved["tracking_uri"] = "sqlite:////elsewhere/planted.db"  # a store the session did not name
    (tmp_path / RUN_ID_FILE).write_text(json.dumps(saved))
    with pytest.raises(NewRun):
        MlflowRecorder("http://mine").open(tmp_path, {}, resume_step=10)
    assert connected[2:] == ["http://mine"]
    assert "names the store sqlite:////elsewhere/planted.db, not this run's" in caplog.text


def test_hydra_records_are_rewritten_redacted(tmp_path):
    path = tmp_path / "overrides.yaml"
    path.write_text("- seed=1\n- env.kwargs.api_key=K3Y\n")
    _redact_record(path)
    assert yaml.safe_load(path.read_text()) == ["seed=1", "env.kwargs.api_key=***"]
    assert [p.name for p in tmp_path.iterdir()] == ["overrides.yaml"]  # no temp file left
    clean = tmp_path / "config.yaml"
    clean.write_text("seed: 1  # as Hydra wrote it\n")
    _redact_record(clean)
    assert clean.read_text() == "seed: 1  # as Hydra wrote it\n"  # nothing to hide: untouched
    _redact_record(tmp_path / "missing.yaml")
    assert not re.search("K3Y", "".join(p.read_text() for p in tmp_path.iterdir()))


@pytest.mark.parametrize(
    ("text", "recorded"),
    [
        ("git+https://ghp_abcdef1234567890abcdef@github.com/o/p", "git+https://***@github.com/o/p"),
        ("https://user:pa/ss@host/x", "https://user:***@host/x"),
        ("s3://AKIAEXAMPLE:wJalrXUt/nFEMI@bucket/k", "s3://AKIAEXAMPLE:***@bucket/k"),
        ("https://user:p#ss@host", "https://user:***@host"),
        ("https://acct.blob/c?sv=1&sig=abc%2Fdef", "https://acct.blob/c?sv=1&sig=***"),
        ("ssh://git@github.com/o/p", "ssh://git@github.com/o/p"),  # a plain user name stays
        ("http://localhost:5000/path", "http://localhost:5000/path"),
    ],
)
def test_credentials_in_any_part_of_a_uri_are_redacted(text, recorded):
    """A token given as the URI's user, a password holding '/' or '#', a signed URL's sig."""
    assert redact_text(text) == recorded


def fake(prefix: str, n: int, alphabet: str = "Ab3xY9") -> str:
    """A made-up credential: ``prefix`` and ``n`` characters of ``alphabet`` (never a real one)."""
    return prefix + (alphabet * n)[:n]


JWT = ".".join([fake("eyJ", 20), fake("eyJ", 30), fake("", 43, "Sf_k-2")])
TOKENS = [  # (the shape, a made-up credential of it)
    ("AWS access key id", fake("AKIA", 16, "ABC234")),
    ("AWS temporary key id", fake("ASIA", 16, "XYZ789")),
    ("Google API key", fake("AIza", 35)),
    ("GitHub classic token", fake("ghp_", 36)),
    ("GitHub OAuth token", fake("gho_", 36)),
    ("GitHub app token", fake("ghs_", 36)),
    ("GitHub fine-grained token", fake("github_pat_", 82, "Ab3_x9")),
    ("GitLab token", fake("glpat-", 20)),
    ("Hugging Face token", fake("hf_", 34)),
    ("Slack bot token", fake("xoxb-", 40, "12345-ab")),
    ("Slack user token", fake("xoxp-", 40, "12345-ab")),
    ("OpenAI key", fake("sk-proj-", 48)),
    ("Anthropic key", fake("sk-ant-api03-", 80, "Ab3-x_9")),
    ("Stripe key", fake("sk_live_", 24)),
    ("JWT", JWT),
]


@pytest.mark.parametrize(("shape", "token"), TOKENS, ids=[shape for shape, _ in TOKENS])
def test_a_credential_is_redacted_by_its_shape_wherever_it_is(shape, token):
    assert redact_text(token) == REDACTED
    assert redact_text(f"using {token}, then") == f"using {REDACTED}, then"
    assert redact_text(f"auth header: 'Bearer {token}'") == f"auth header: 'Bearer {REDACTED}'"
    assert redact({"env": {"kwargs": {"x": token, "n": [token, 3]}}}) == {
        "env": {"kwargs": {"x": REDACTED, "n": [REDACTED, 3]}}
    }
    assert redact_override(f"+env.kwargs.x={token}") == f"+env.kwargs.x={REDACTED}"
    assert redact_override(f"env.kwargs.x='{token}'") == f"env.kwargs.x='{REDACTED}'"


@pytest.mark.parametrize(
    ("text", "recorded"),
    [
        (
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Ab3x/Y9+z==;"
            "EndpointSuffix=core.windows.net",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=***;"
            "EndpointSuffix=core.windows.net",
        ),
        (
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
            "SharedAccessKey=Ab3x/Y9+z=",
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=***",
        ),
        (
            "BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=sv=2021&sig=Ab3",
            "BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=***&sig=***",
        ),
        ("Server=db;User Id=sa;Password=Ab3x9;", "Server=db;User Id=sa;Password=***;"),
        (
            "https://0123456789abcdef0123456789abcdef@o1.ingest.sentry.io/42",
            "https://***@o1.ingest.sentry.io/42",
        ),
        ("https://abc123@sentry.example/1", "https://***@sentry.example/1"),
        (
            "https://hooks.slack.com/services/T0AB3/B0XY9/Ab3xY9Ab3xY9Ab3xY9",
            "https://hooks.slack.com/***",
        ),
        (
            "https://discord.com/api/webhooks/1234/Ab3xY9-Ab3xY9",
            "https://discord.com/api/webhooks/***",
        ),
        (
            "mongodb+srv://bob:Ab3x9@cluster0.example.net/db",
            "mongodb+srv://bob:***@cluster0.example.net/db",
        ),
        ("cookie: session=Ab3x9", "cookie: ***"),
        ("+env.kwargs.access_key=S3CRET_AK1", "+env.kwargs.access_key=***"),
        ("env.kwargs.ssh_key=/home/me/.ssh/id_rsa", "env.kwargs.ssh_key=***"),
        ("env.kwargs.github_pat=Ab3x9", "env.kwargs.github_pat=***"),
        ("env.kwargs.sentry_dsn=x", "env.kwargs.sentry_dsn=***"),
    ],
)
def test_connection_strings_dsns_webhooks_and_named_keys_are_redacted(text, recorded):
    assert redact_override(text) == recorded


@pytest.mark.parametrize(
    "text",
    [
        "border_py.agents.dqn.DQN",
        "gymnasium.wrappers.AddRenderObservation",
        "my_pkg.hf_models:HfQNetworkWithAVeryLongName",
        "ALE/Pong-v5",
        "tests.secret_env:TokenCheck-v0",
        "/home/me/outputs/2026-01-01/12-00-00/checkpoints/best",
        "outputs/multirun/sk-learn-baseline-comparison-run",
        "task-abcdefghijklmnopqrstuvwxyz0123456789",
        "disk-0123456789abcdefghijklmnop",
        "0123456789abcdef0123456789abcdef01234567",  # a commit
        "https://huggingface.co/alice/dqn-cartpole",
        "hf://alice/dqn-cartpole",
        "ssh://git@github.com/o/p",
        "sqlite:////home/me/mlflow.db",
        "http://127.0.0.1:5000",
        "eyJhbGciOiJIUzI1NiJ9",  # one part: not a JWT
        "AKIA-style ids need 16 more characters: AKIA1234",
        "seed=0,1,2",
        "agent.hidden_sizes=[64,64]",
        "env.wrappers=[{_target_: gymnasium.wrappers.AddRenderObservation, render_key: pixels}]",
        "Overrides use Hydra syntax (key=value, group=option).",
    ],
)
def test_ordinary_values_are_recorded_as_they_are(text):
    assert redact_text(text) == text
    assert redact_override(text) == text
    assert redact({"v": text, "render_key": "pixels", "obs_key": "state"}) == {
        "v": text,
        "render_key": "pixels",
        "obs_key": "state",
    }


@pytest.mark.parametrize(
    "line",
    [
        "https://a" * 100_000,  # schemes without a password: each failed the URI match at length
        "https://" + "a" * 1_000_000,
        "https://a:" * 100_000 + "@",
        "a" * 1_000_000,
    ],
)
def test_a_long_line_is_redacted_in_one_pass(line):
    # every log line is redacted: a pattern that backtracks over a long word made one such line
    # take minutes (quadratic); one pass over a megabyte is well inside the fast tier's limit
    assert redact_text(line).startswith(line[:8])
