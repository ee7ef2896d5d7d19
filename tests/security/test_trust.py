"""A run dir is data: loading one (``border eval``, ``resume=``, ``resume=auto``, ``border report``)
never imports or calls what its saved config names unless the user trusts it.

Every crafted config below names a module ``evil`` that writes a marker file when it is imported
(and when its callable is called): the marker must never appear, the command must end in one line
with exit 2 (``border report`` builds nothing: it must just not import), and nothing may be
written into the run dir.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from border_py.cli.main import main
from border_py.errors import ConfigError
from border_py.runs.checkpoint import Checkpoint
from border_py.runs.resume import resumed_config
from border_py.runs.trust import Trust, literal, shipped_targets

from ..conftest import run_border
from .crafted import TINY, copy_run

EVIL = """\
import os, pathlib
pathlib.Path(os.environ["BORDER_MARKER"]).write_text("imported")


def plant(*args, **kwargs):
    pathlib.Path(os.environ["BORDER_MARKER"]).write_text("called")
"""

# where a crafted config names the evil code: (description, change to the saved config)
CRAFTED = {
    "env": lambda c: c["env"].update(_target_="evil.plant"),
    "env.id": lambda c: c["env"].update(id="evil:Anything-v0"),
    "env.wrappers": lambda c: c["env"].update(wrappers=[{"_target_": "evil.plant"}]),
    "env.vector": lambda c: c["env"].update(backend="vector", vector={"_target_": "evil.plant"}),
    "agent": lambda c: c["agent"].update(_target_="evil.plant"),
    "replay_buffer": lambda c: c["replay_buffer"].update(_target_="evil.plant"),
    "actor_manager": lambda c: c["actor_manager"].update(_target_="evil.plant"),
    "trainer": lambda c: c["trainer"].update(_target_="evil.plant"),
    "recorder": lambda c: c.update(recorder={"tensorboard": {"_target_": "evil.plant"}}),
}


def craft(trained: Path, where: Path, change) -> Path:
    """A copy of the tiny real run, as a preempted job leaves it (so that ``resume=auto``
    continues it), whose every checkpoint's config.json has ``change`` applied."""
    run = copy_run(trained, where / "run")
    (run / "result.json").unlink()
    for config_file in run.glob("checkpoints/*/config.json"):
        config = json.loads(config_file.read_text())
        change(config)
        config_file.write_text(json.dumps(config))
    return run


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (and ``root`` itself): kind, size, mtime and bytes."""
    seen = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = os.lstat(path)
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        seen[str(path.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns, data)
    return seen


@pytest.fixture
def evil(tmp_path, monkeypatch) -> Path:
    """The ``evil`` module, importable here and in children; returns where its marker goes."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "evil.py").write_text(EVIL)
    marker = tmp_path / "marker"
    monkeypatch.setenv("BORDER_MARKER", str(marker))
    monkeypatch.syspath_prepend(str(code))
    return marker


COMMANDS = {
    "eval": lambda run: ["eval", str(run)],
    "resume": lambda run: ["train", f"resume={run}", "trainer.max_opts=400"],
    "resume=auto": lambda run: ["train", "resume=auto", f"run_dir={run}", "trainer.max_opts=400"],
    "export": lambda run: ["export", str(run), "-f", "numpy", "-o", f"{run}.exported"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("where", list(CRAFTED))
def test_a_crafted_run_dir_is_refused_without_importing_anything(
    trained, tmp_path, evil, capsys, command, where
):
    run = craft(trained, tmp_path, CRAFTED[where])
    before = snapshot(run)
    status = main(COMMANDS[command](run))
    err = capsys.readouterr().err.strip().splitlines()
    assert not evil.exists(), f"{where}: the saved config's code ran ({evil.read_text()})"
    assert status == 2
    assert len(err) == 1, err
    assert "evil" in err[0] and "trust=[evil" in err[0] and "config.json" in err[0], err[0]
    assert snapshot(run) == before


@pytest.mark.parametrize("where", list(CRAFTED))
def test_border_report_reads_a_crafted_run_without_importing_anything(
    trained, tmp_path, evil, capsys, where
):
    run = craft(trained, tmp_path, CRAFTED[where])
    main(["report", str(run)])
    assert not evil.exists()


def test_the_trust_step_lets_a_users_own_code_load(trained, tmp_path, evil, capsys):
    """``trust=[evil]`` is the documented way: with it the saved config's code is imported (and
    here, being no agent, fails in one line after)."""
    run = craft(trained, tmp_path, CRAFTED["agent"])
    status = main(["eval", str(run), "trust=[evil]"])
    assert evil.read_text() in ("imported", "called")
    assert status == 2


def test_a_run_with_border_and_gymnasium_components_loads_untouched(trained, tmp_path, capsys):
    wrapped = {"_target_": "gymnasium.wrappers.ClipReward", "min_reward": -1, "max_reward": 1}
    run = craft(trained, tmp_path, lambda c: c["env"].update(wrappers=[wrapped]))
    assert main(["eval", str(run), "eval.n_episodes=1"]) == 0, capsys.readouterr().err


def test_resume_trusts_what_its_own_command_names(trained, tmp_path, evil):
    """The command's own config (the command line, the user's config dirs, or the config given to
    train()) is the user's choice on this machine: its targets are trusted."""
    run = craft(trained, tmp_path, CRAFTED["env.id"])
    checkpoint = _checkpoint(run)
    with pytest.raises(ConfigError, match=r"^env\.id=evil:Anything-v0 in .*add trust=\[evil\]$"):
        resumed_config(checkpoint, [], Trust())
    mine = Trust.of({"env": {"id": "evil:Anything-v0"}})
    assert resumed_config(checkpoint, [], mine)["env"]["id"] == "evil:Anything-v0"
    assert not evil.exists()  # checking imports nothing


def test_a_saved_trust_list_is_never_taken(trained, tmp_path, evil, capsys):
    def change(config):
        CRAFTED["agent"](config)
        config["trust"] = ["evil"]

    run = craft(trained, tmp_path, change)
    assert main(["train", f"resume={run}", "trainer.max_opts=400"]) == 2
    assert not evil.exists()
    assert "add trust=[evil.plant]" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("saved", "typed", "refused"),
    [
        ("ray://203.0.113.9:10001", None, True),
        ("ray://203.0.113.9:10001", "ray://203.0.113.9:10001", False),
        (None, None, False),
    ],
)
def test_a_saved_ray_address_is_used_only_when_given_again(
    trained, tmp_path, saved, typed, refused
):
    run = craft(trained, tmp_path, lambda c: c["actor_manager"].update(address=saved))
    mine = Trust.of({"actor_manager": {"address": typed}})
    if refused:
        with pytest.raises(ConfigError, match=r"^actor_manager\.address=ray://203.*again"):
            resumed_config(_checkpoint(run), [], mine)
    else:
        resumed_config(_checkpoint(run), [], mine)


def test_a_saved_runtime_env_is_used_only_when_given_again(trained, tmp_path):
    runtime_env = {"pip": ["requests"], "env_vars": {"LD_PRELOAD": "/tmp/x.so"}}
    run = craft(trained, tmp_path, lambda c: c["actor_manager"].update(runtime_env=runtime_env))
    with pytest.raises(ConfigError, match=r"^actor_manager\.runtime_env="):
        resumed_config(_checkpoint(run), [], Trust())
    resumed_config(_checkpoint(run), [], Trust.of({"actor_manager": {"runtime_env": runtime_env}}))


def test_saved_strings_are_never_resolved_as_interpolations(trained, tmp_path, monkeypatch):
    monkeypatch.setenv("BORDER_TEST_SECRET", "s3cret")
    kwargs = {"a": "${oc.env:BORDER_TEST_SECRET}", "b": "\\${x}", "c": "$5 ${"}
    run = craft(trained, tmp_path, lambda c: c["env"].update(kwargs=kwargs))
    assert resumed_config(_checkpoint(run), [])["env"]["kwargs"] == kwargs


def test_literal_escapes_every_interpolation_and_nothing_else():
    from omegaconf import OmegaConf

    values = ["${a}", "\\${a}", "\\\\${a}", "x ${a} ${b.c}", "plain $ \\ {}", "${oc.env:HOME}"]
    escaped = OmegaConf.create({"v": literal(values)})
    assert OmegaConf.to_container(escaped, resolve=True)["v"] == values


def test_every_shipped_component_is_trusted_and_nothing_else_of_border_py():
    shipped = shipped_targets()
    assert "border_py.agents.dqn.DQN" in shipped
    assert "border_py.recorders.mlflow.MlflowRecorder" in shipped
    trust = Trust()
    assert all(trust.allows(t) for t in shipped)
    # border-py's own functions are not components: a saved config may not call them
    assert not trust.allows("border_py.runs.results.write_result")
    assert not trust.allows("border_py.cli.main.main")
    assert trust.allows("gymnasium.wrappers.FlattenObservation")
    assert not trust.allows("gymnasium.make")
    assert not trust.allows("gymnasium.wrappers.nope.Nothing")
    assert Trust(entries=("my_pkg",)).allows("my_pkg.agents.Mine")
    assert not Trust(entries=("my_pkg",)).allows("my_pkg_evil.Mine")


@pytest.mark.parametrize("bad", ["trust=3", "trust=[1]", "trust=['a b']", "trust=[os.]"])
def test_a_bad_trust_list_is_refused_in_one_line(tmp_path, bad, capsys):
    assert main(["train", *TINY, f"run_dir={tmp_path / 'run'}", bad]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("border: error: trust=") and "e.g. [my_pkg]" in line


@pytest.mark.slow
def test_the_border_command_refuses_a_crafted_run_in_one_line(trained, tmp_path, evil):
    run = craft(trained, tmp_path, CRAFTED["trainer"])
    before = snapshot(run)
    env = {"PYTHONPATH": str(evil.parent / "code")}
    for args in COMMANDS.values():
        out = run_border(args(run), tmp_path, env=env)
        assert out.returncode == 2, out.stderr
        (line,) = out.stderr.strip().splitlines()
        assert line.startswith("border: error: trainer._target_=evil.plant in ")
        assert line.endswith("add trust=[evil.plant]")
    assert not evil.exists()
    assert snapshot(run) == before


def _checkpoint(run: Path) -> Checkpoint:
    path = sorted(run.glob("checkpoints/0*"))[-1]
    config = json.loads((path / "config.json").read_text())
    return Checkpoint(path, {}, {}, None, config, {})


def test_python_s_standard_library_is_never_trusted(trained, tmp_path, capsys):
    """``os.system`` in a saved config is refused without a trust step to paste, and
    ``trust=[os]`` is refused itself."""
    run = craft(trained, tmp_path, lambda c: c["env"].update(_target_="os.system"))
    assert main(["eval", str(run)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "env._target_=os.system in " in line and "standard library" in line
    assert "trust=" not in line
    for entry in ("os", "subprocess.run", "builtins"):
        assert main(["eval", str(run), f"trust=[{entry}]"]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"border: error: trust=[{entry}]: Python's standard library")


def test_a_gymnasium_wrapper_that_writes_files_needs_trust(trained, tmp_path, capsys):
    video = {"_target_": "gymnasium.wrappers.RecordVideo", "video_folder": str(tmp_path / "out")}
    run = craft(trained, tmp_path, lambda c: c["env"].update(wrappers=[video]))
    assert main(["eval", str(run), "eval.n_episodes=1"]) == 2
    assert "add trust=[gymnasium.wrappers.RecordVideo]" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_saved_tracking_uri_is_used_only_when_given_again(trained, tmp_path):
    uri = "http://mlflow.example:5000"
    run = craft(trained, tmp_path, lambda c: c.update(recorder={"mlflow": {"tracking_uri": uri}}))
    with pytest.raises(ConfigError, match=r"^recorder\.mlflow\.tracking_uri=http.*again"):
        resumed_config(_checkpoint(run), [], Trust())
    mine = Trust.of({"recorder": {"mlflow": {"tracking_uri": uri}}})
    assert resumed_config(_checkpoint(run), [], mine)["recorder"]["mlflow"]["tracking_uri"] == uri
