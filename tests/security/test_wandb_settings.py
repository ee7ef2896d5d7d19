"""W&B's workspace settings never choose where a border run goes: W&B reads ``wandb/settings`` (or
``.wandb/settings``) of the working dir, and its ``base_url`` would get the user's API key. The
settings that say where the run goes are the user's (``WANDB_*``, the global settings file),
given to ``wandb.init`` over any file's; and a workspace file that is data (in a run or sweep
dir, or a dir of runs), or sets more than W&B's own commands write there, is refused in one line.
Every sink is an HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from border_py.errors import ConfigError
from border_py.recorders.wandb_settings import refuse_workspace_settings

from ..conftest import BORDER, run_border
from .crafted import TINY, copy_run
from .sink import Requests, serving

pytest.importorskip("wandb", reason="the [wandb] extra is not installed")

NOT_WANDB = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
SECRET = {"WANDB_API_KEY": "k" * 40, "WANDB_INIT_TIMEOUT": "20"}


@pytest.fixture
def sink() -> Iterator[tuple[str, Requests]]:
    """See :func:`.sink.serving`."""
    with serving() as served:
        yield served


def settings_file(where: Path, text: str, dot: bool = False) -> Path:
    """W&B's workspace settings ``text`` in ``where`` (``.wandb/settings`` with ``dot``)."""
    path = where / (".wandb" if dot else "wandb") / "settings"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[default]\n{text}")
    return path


# --- which workspace files are refused -----------------------------------------------------------


@pytest.mark.parametrize("dot", [False, True], ids=["wandb", ".wandb"])
@pytest.mark.parametrize(
    "text",
    [
        "base_url = http://127.0.0.1:9\n",
        "https_proxy = http://127.0.0.1:9\n",
        "api_key = " + "a" * 40 + "\n",
        'x_extra_http_headers = {"Authorization": "x"}\n',
        "mode = offline\ninsecure_disable_ssl = true\n",
    ],
)
def test_a_workspace_file_of_the_working_dir_sets_only_what_wandb_writes_there(
    tmp_path, monkeypatch, text, dot
):
    """Wherever the working dir is (here a parent of the run: ``cd received && border train
    resume=run1``), a workspace file setting where W&B sends the run, or how, is refused."""
    run_dir = tmp_path / "run1"
    run_dir.mkdir()
    path = settings_file(tmp_path, text, dot)
    monkeypatch.chdir(tmp_path)
    key = sorted(
        line.split(" = ")[0] for line in text.splitlines() if line.split(" = ")[0] != "mode"
    )
    with pytest.raises(ConfigError) as refused:
        refuse_workspace_settings(run_dir, None)
    assert str(refused.value).startswith(f"{path}: sets {', '.join(key)}, which W&B would take")


@pytest.mark.parametrize("dot", [False, True], ids=["wandb", ".wandb"])
def test_the_users_own_wandb_offline_in_the_working_dir_is_accepted(tmp_path, monkeypatch, dot):
    """``wandb offline`` and ``wandb init`` write ``mode``, ``entity`` and ``project`` there."""
    settings_file(tmp_path, "mode = offline\nentity = me\nproject = p\n", dot)
    monkeypatch.chdir(tmp_path)
    refuse_workspace_settings(tmp_path / "runs" / "a", None)


@pytest.mark.parametrize("where", ["sweep", "sweep/run", "sweep/run/checkpoints"])
def test_a_workspace_file_in_a_dir_of_runs_is_refused_whatever_it_sets(
    tmp_path, monkeypatch, where
):
    """A received sweep dir (``cd sweep && border train resume=0``: the run is below the working
    dir) or run dir: even ``mode = online`` there is data."""
    sweep = tmp_path / "sweep"
    (sweep / "run" / "checkpoints").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("{}\n")
    (sweep / "run" / ".border_run").write_text("{}")
    path = settings_file(tmp_path / where, "mode = online\n")
    monkeypatch.chdir(tmp_path / where)
    with pytest.raises(ConfigError) as refused:
        refuse_workspace_settings(sweep / "run", None)
    assert str(refused.value) == (
        f"{path}: W&B would take its settings (where it sends the run, with your API key) from"
        " this file of a run or sweep dir; start border from another dir"
    )


def test_a_linked_workspace_file_is_refused_never_read(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fifo = elsewhere / "fifo"
    os.mkfifo(fifo)  # a read would block
    (tmp_path / "wandb").mkdir()
    (tmp_path / "wandb" / "settings").symlink_to(fifo)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="settings: is a symbolic link; border never follows"):
        refuse_workspace_settings(tmp_path / "run", None)


# --- the user's settings win over a workspace file's ---------------------------------------------

OPEN_AND_SHOW = """
import json, sys
from pathlib import Path
import border_py.recorders.wandb as recorder
recorder.refuse_workspace_settings = lambda *args: None  # the second guard off: the first alone
wandb_recorder = recorder.WandbRecorder(mode="offline")
wandb_recorder.open(Path(sys.argv[1]), {}, None)
s = wandb_recorder.run.settings
print("SETTINGS", json.dumps([s.base_url, s.insecure_disable_ssl, s.x_extra_http_headers]))
wandb_recorder.close()
"""


@pytest.mark.slow  # W&B starts its service
def test_the_settings_of_where_the_run_goes_are_the_users_over_a_workspace_files(tmp_path):
    """W&B applies a workspace file over the user's global settings; border's run takes the
    global ones (the first guard alone: the refusal is switched off here)."""
    user = tmp_path / "config"
    user.mkdir()
    (user / "settings").write_text("[default]\nbase_url = http://127.0.0.1:1\n")
    received = tmp_path / "received"
    settings_file(
        received,
        "base_url = http://127.0.0.1:2\ninsecure_disable_ssl = true\n"
        'x_extra_http_headers = {"Authorization": "theirs"}\n',
    )
    out = subprocess.run(
        [sys.executable, "-c", OPEN_AND_SHOW, str(tmp_path / "run")],
        cwd=received,
        capture_output=True,
        text=True,
        timeout=120,
        env=NOT_WANDB | {"WANDB_CONFIG_DIR": str(user)},
    )
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("SETTINGS ")]
    base_url, insecure, headers = json.loads(line.removeprefix("SETTINGS "))
    assert (base_url, insecure, headers or {}) == ("http://127.0.0.1:1", False, {}), out.stderr


# --- end to end: border train from a received dir ------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A tiny real run recorded to W&B offline."""
    where = tmp_path_factory.mktemp("recorded")
    run = where / "run"
    args = ["train", *TINY, "recorder=[tensorboard,wandb]", f"run_dir={run}"]
    out = run_border(args, where, env=NOT_WANDB | {"WANDB_MODE": "offline"})
    assert out.returncode == 0, out.stderr
    return run


@pytest.mark.slow
@pytest.mark.parametrize(
    ("layout", "cwd", "resume"),
    [
        ("run/wandb/settings", "run", "."),
        ("sweep/wandb/settings", "sweep", "./0"),  # resume=0: Hydra reads the int 0
        ("sweep/.wandb/settings", "sweep", "./0"),
        ("received/wandb/settings", "received", "run1"),
    ],
)
def test_a_received_dirs_wandb_settings_get_no_request(
    recorded, tmp_path, sink, layout, cwd, resume
):
    """Resumed from inside a received run, from its sweep dir, or from a folder holding it: its
    ``base_url`` would get the user's API key. Refused in one line; the sink gets nothing."""
    url, got = sink
    run = {"run": "run", "sweep": "sweep/0", "received": "received/run1"}[cwd]
    copy_run(recorded, tmp_path / run)
    if cwd == "sweep":
        (tmp_path / "sweep" / "multirun.yaml").write_text("hydra: {}\n")
    path = tmp_path / layout
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"[default]\nbase_url = {url.removesuffix('/exfil')}\nmode = online\n")
    out = subprocess.run(
        [*BORDER, "train", f"resume={resume}", "trainer.max_opts=400"],
        cwd=tmp_path / cwd,
        capture_output=True,
        text=True,
        timeout=240,
        env=NOT_WANDB | SECRET,
    )
    assert got == [], [headers.get("Authorization") for _, _, headers, _ in got]
    last = out.stderr.strip().splitlines()[-1]  # when the recorder opens: after the log's start
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert last.startswith(f"border: error: {path}: "), last
