"""Full-state checkpoints, exact resume, resume from a killed run, ``border eval``, bad input."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from border_py import train
from border_py.errors import ConfigError
from border_py.runs.checkpoint import load_checkpoint
from border_py.runs.lock import session_lock
from border_py.runs.timeline import REQUIRED, find_checkpoint, periodic_checkpoints, set_aside_newer
from border_py.trainers.train import prepare

from ..conftest import (
    BORDER,
    FEW_FRESH_EVALS,
    TINY,
    make_config,
    run_border,
    run_borders,
    scalar_tags,
)

SERIAL = [
    "trainer=serial",
    "trainer.warmup_period=200",
    "trainer.eval_interval=150",
    "trainer.eval_episodes=3",
    "trainer.record_interval=50",
    "trainer.save_interval=150",
    "trainer.save_replay_buffer=true",
    "agent.hidden_sizes=[32]",
    "agent.eps_decay_steps=2000",
    FEW_FRESH_EVALS,
]


def _series(run_dir, tag):
    return scalar_tags(run_dir)[tag]


@pytest.fixture(scope="module")
def trained_150(tmp_path_factory) -> Path:
    """A :data:`SERIAL` run of 150 opt steps (its checkpoint at 150, with the replay buffer, and
    best), trained once per module: tests use a copy (:func:`run_150`), never this one."""
    root = tmp_path_factory.mktemp("serial_150")
    train(make_config(root, *SERIAL, "trainer.max_opts=150"))
    return root / "run"


@pytest.fixture
def run_150(trained_150, tmp_path) -> Path:
    """A copy of :func:`trained_150` at ``tmp_path / "run"``, the test's own."""
    return Path(shutil.copytree(trained_150, tmp_path / "run", symlinks=True))


def test_checkpoints_hold_the_full_state_and_load_without_pickle(tmp_path):
    summary = train(
        make_config(tmp_path, *SERIAL, "trainer.max_opts=300", "trainer.keep_checkpoints=1")
    )
    root = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["000000300", "best"]  # keep 1 + best
    ckpt = load_checkpoint(root / "000000300")
    assert set(ckpt.agent_state) >= {"q", "q_target", "optimizer", "env_steps", "opt_steps", "rng"}
    state = ckpt.state
    assert state.opt_steps == 300 and state.env_steps == summary["env_steps"]
    assert set(state.rng) == {"python", "numpy", "torch"}
    assert state.best_return == summary["best_return"]
    for checkpoint in root.iterdir():  # meta.json: derived from the state trainer.pt holds
        meta = json.loads((checkpoint / "meta.json").read_text())
        saved = load_checkpoint(checkpoint).state.summary()
        assert {key: meta[key] for key in saved} == saved, checkpoint.name
    assert ckpt.config["trainer"]["max_opts"] == 300
    buffer = ckpt.buffer()
    assert buffer is not None and len(buffer["reward"]) == state.replay["size"]
    names = {"obs", "action", "reward", "next_obs", "discount"}
    assert set(buffer) == names
    for name in names:  # numpy's own files, mapped without pickle
        np.load(root / "000000300" / "replay_buffer" / f"{name}.npy", mmap_mode="r")
    policy = torch.load(root / "best" / "policy.pt", weights_only=True)
    assert set(policy) == {k for k in ckpt.agent_state["q"]}


def test_a_resume_trains_with_the_lr_and_eps_it_was_given(tmp_path, caplog):
    train(make_config(tmp_path, *SERIAL, "trainer.max_opts=150", "agent.lr=1e-3"))
    with caplog.at_level(logging.INFO):
        train(
            make_config(tmp_path, "resume=" + str(tmp_path / "run")),
            overrides=["trainer.max_opts=300", "agent.lr=3e-4", "agent.adam_eps=1.5e-4"],
        )
    group = load_checkpoint(tmp_path / "run").agent_state["optimizer"]["param_groups"][0]
    assert load_checkpoint(tmp_path / "run").state.opt_steps == 300
    assert (group["lr"], group["eps"]) == (3e-4, 1.5e-4)  # what the resumed session trained with
    assert "optimizer q: lr 0.001 -> 0.0003 (the config's)" in caplog.text


@pytest.mark.slow
def test_serial_resume_is_exact(tmp_path):
    full = tmp_path / "full"
    train(make_config(full, *SERIAL, "trainer.max_opts=600"))
    part = tmp_path / "part"
    train(make_config(part, *SERIAL, "trainer.max_opts=300"))
    resumed = train(
        make_config(part, "resume=" + str(part / "run")), overrides=["trainer.max_opts=600"]
    )
    assert resumed["opt_steps"] == 600
    for tag in ("train/loss", "train/q_mean", "eval/return_mean", "train/epsilon"):
        a, b = _series(full / "run", tag), _series(part / "run", tag)
        assert [s for s, _ in a] == [s for s, _ in b], tag  # same steps, none twice
        np.testing.assert_array_equal([v for _, v in a], [v for _, v in b], err_msg=tag)


@pytest.mark.slow
def test_async_resume_continues_counters_epsilon_and_tensorboard(tmp_path):
    base = [
        "actor_manager.n_actors=2",
        "trainer.warmup_period=300",
        "trainer.eval_interval=200",
        "trainer.eval_episodes=2",
        "trainer.record_interval=100",
        "agent.hidden_sizes=[32]",
        "agent.eps_decay_steps=100000",
    ]
    first = train(make_config(tmp_path, *base, "trainer.max_opts=400"))
    ckpt = load_checkpoint(tmp_path / "run")
    assert ckpt.state.opt_steps == 400
    saved_actors = ckpt.state.actors["actors"]
    second = train(
        make_config(tmp_path, "resume=" + str(tmp_path / "run")), overrides=["trainer.max_opts=800"]
    )
    assert second["opt_steps"] == 800
    assert second["env_steps"] > first["env_steps"] and second["samples"] > first["samples"]
    assert second["best_return"] >= first["best_return"]
    steps = [s for s, _ in _series(tmp_path / "run", "train/loss")]
    assert steps == sorted(set(steps)) and steps[-1] == 800  # continued, no duplicates
    eps = _series(tmp_path / "run", "train/epsilon")
    before = [v for s, v in eps if s <= 400]
    after = [v for s, v in eps if s > 400]
    # each actor's schedule continued from its saved position (a restart would log ~1.0 again)
    assert max(after) <= max(before) + 1e-9 < 1.0
    final = load_checkpoint(tmp_path / "run").state.actors["actors"]
    assert all(a["env_steps"] > b["env_steps"] for a, b in zip(final, saved_actors, strict=True))
    assert all(
        a["incarnation"] == b["incarnation"] + 1 for a, b in zip(final, saved_actors, strict=True)
    )


@pytest.mark.slow
def test_a_live_run_refuses_a_resume_and_after_its_kill_9_resumes_from_its_newest_checkpoint(
    tmp_path,
):
    proc = subprocess.Popen(
        [
            *BORDER,
            "train",
            "experiment=none",  # no looked-up recipe: it stops at 475
            "trainer=serial",
            "trainer.max_opts=1000000",
            "trainer.save_interval=200",
            "trainer.eval_interval=100000",
            "agent.hidden_sizes=[16]",
            FEW_FRESH_EVALS,  # of the resumed session, which completes
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = list((tmp_path / "outputs").glob("*/*/checkpoints/0000*"))
            if len(found) >= 2:
                break
            time.sleep(0.2)
        (run_dir,) = (tmp_path / "outputs").glob("*/*")
        for args in ([f"resume={run_dir}"], [f"run_dir={run_dir}", "resume=auto"]):
            out = run_border(["train", *args, "trainer.max_opts=9000000"], tmp_path, timeout=120)
            lines = out.stderr.strip().splitlines()
            assert out.returncode == 2 and len(lines) == 1, out.stderr  # the run is still live
            assert f"another border session (pid {proc.pid}) is training this run" in lines[0]
        looked = run_border(["train", f"resume={run_dir}", "--cfg", "job"], tmp_path, timeout=120)
        assert looked.returncode == 0 and "resume: " in looked.stdout, looked.stderr
        assert proc.poll() is None  # untouched: nothing of its dir was set aside
        assert not (run_dir / "checkpoints" / "abandoned").exists()
        assert not (run_dir / "attempts").exists()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    newest = find_checkpoint(run_dir)
    done = load_checkpoint(newest).state.opt_steps
    out = run_border(["train", f"resume={run_dir}", f"trainer.max_opts={done + 200}"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(list((tmp_path / "outputs").glob("*/*"))) == 1  # same run dir, no new one
    log = (run_dir / "train.log").read_text()
    assert f"resumed from {newest} at opt step {done}" in log
    assert f"resume: trainer.max_opts changed from 1000000 to {done + 200}" in log
    steps = [s for s, _ in scalar_tags(run_dir)["train/loss"]]
    assert steps == sorted(set(steps)) and steps[-1] == done + 200


@pytest.mark.slow
def test_border_eval_prints_a_table_and_writes_json(tmp_path, run_150):
    out = run_border(["eval", str(run_150), "eval.n_episodes=4", "eval.seed=11"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "return (mean ± std)" in out.stdout and "CartPole-v1" in out.stdout
    (written,) = (run_150 / "checkpoints" / "best").glob("eval_*.json")
    record = json.loads(written.read_text())
    assert record["eval"]["n_episodes"] == 4 and record["eval"]["seed"] == 11
    assert len(record["episode_returns"]) == 4
    assert record["result"]["eval/return_mean"] == pytest.approx(np.mean(record["episode_returns"]))


def _mtimes(run: Path) -> dict[str, int]:
    return {str(p.relative_to(run)): p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_bad_resume_and_eval_input_is_one_line_and_overwrites_nothing(tmp_path, run_150):
    """Each case that names the run gets a copy of its own (a resume's check takes the run's lock:
    two at once would refuse each other), and the cases run two at a time."""
    before = _mtimes(run_150)
    runs: list[Path] = []

    def run() -> Path:  # a copy of run_150, its files' times kept
        runs.append(Path(shutil.copytree(run_150, tmp_path / f"run{len(runs)}", symlinks=True)))
        return runs[-1]

    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    broken = tmp_path / "broken" / "checkpoints" / "000000001"
    broken.parent.mkdir(parents=True)
    shutil.copytree(run_150 / "checkpoints" / "000000150", broken)
    (broken / "agent.pt").write_bytes((broken / "agent.pt").read_bytes()[:100])  # truncated
    cases = [
        (["train", f"resume={tmp_path / 'missing'}"], "no such file or directory"),
        (["train", f"resume={not_a_run}"], "not a border-py run"),
        (["train", f"resume={broken}"], "corrupt or truncated"),
        (["train", f"resume={run()}"], "trainer.max_opts=150: must be > 150"),
        (
            ["train", f"resume={run()}", "trainer.max_opts=300", "env=gym", "env.id=Acrobot-v1"],
            "config groups cannot change",
        ),
        (
            ["train", f"resume={run()}", "trainer.max_opts=300", "env.id=Acrobot-v1"],
            "does not match the env",
        ),
        (["eval", str(tmp_path / "missing")], "no such file or directory"),
        (["eval", str(run()), "env.id=Acrobot-v1"], "does not fit the env"),
        (["eval", str(run()), "eval.n_episode=3"], "did you mean 'n_episodes'"),
        (["eval", str(run()), "eval.n_episodes=0"], "eval.n_episodes=0: must be a positive int"),
        (["eval", str(run()), "eval.seed=-1"], "eval.seed=-1: must be null or a non-negative int"),
        (
            ["train", f"resume={run()}", "trainer.max_opts=300", "agent.n_step=1"],
            "agent.n_step=1: cannot change",
        ),
        (
            ["train", f"resume={run()}", "trainer.max_opts=300", "replay_buffer.capacity=250"],
            "replay_buffer.capacity=250: must be >=",
        ),
    ]
    outs = run_borders([args for args, _ in cases], tmp_path, timeout=120)
    for (args, expected), out in zip(cases, outs, strict=True):
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and expected in lines[0], (args, out.stderr)
    assert len(runs) == 9 and all(_mtimes(copy) == before for copy in runs)


def test_resuming_an_older_checkpoint_sets_newer_ones_aside(tmp_path):
    """From Python too, each checkpoint set aside is logged into the run's ``train.log`` (the
    session's repair ran before the run's log was open: only the CLI's Hydra log had it)."""
    train(make_config(tmp_path, *SERIAL, "trainer.max_opts=450"))
    root = tmp_path / "run" / "checkpoints"
    assert [p.name for p in sorted(root.glob("0*"))] == ["000000150", "000000300", "000000450"]
    best_later = json.loads((root / "best" / "meta.json").read_text())["opt_steps"] > 150
    train(make_config(tmp_path, f"resume={root / '000000150'}"), overrides=["trainer.max_opts=200"])
    assert [p.name for p in sorted(root.glob("0*"))] == ["000000150", "000000200"]
    abandoned = sorted(p.name for p in (root / "abandoned").iterdir())
    assert abandoned == ["000000300", "000000450", *(["best"] if best_later else [])]
    assert find_checkpoint(tmp_path / "run") == root / "000000200"
    log = (tmp_path / "run" / "train.log").read_text()
    moved = [
        line for line in log.splitlines() if "resuming from an older checkpoint: moved" in line
    ]
    assert len(moved) == len(abandoned)
    assert all(any(f"{name} aside" in line for line in moved) for name in abandoned)


def test_a_timeline_abandoned_twice_keeps_both_checkpoints_of_a_step(tmp_path):
    root = tmp_path / "checkpoints"

    def save(step: int, session: str) -> None:  # a complete checkpoint, marked by its session
        path = root / f"{step:09d}"
        path.mkdir(parents=True)
        for name in REQUIRED:
            (path / name).write_text(session)

    save(100, "first"), save(200, "first"), save(300, "first")
    assert [p.name for p in set_aside_newer(root, 100)] == ["000000200", "000000300"]
    save(200, "second")  # the resumed session reaches step 200 again; then a resume from 100
    assert [p.name for p in set_aside_newer(root, 100)] == ["000000200.2"]
    abandoned = {p.name: (p / "meta.json").read_text() for p in (root / "abandoned").iterdir()}
    assert abandoned == {"000000200": "first", "000000300": "first", "000000200.2": "second"}
    assert [p.name for p in periodic_checkpoints(root)] == ["000000100"]


def test_a_resume_compares_its_groups_with_the_overrides_the_run_started_with(tmp_path):
    run = tmp_path / "run"
    train(make_config(tmp_path, *SERIAL, "trainer.max_opts=150"), overrides=["agent=dqn"])
    assert json.loads((run / ".border_run").read_text())["overrides"] == ["agent=dqn"]
    # a later attempt of a sweep job: Hydra rewrote .hydra/ with that attempt's command line
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- agent=iqn\n")
    resume = make_config(tmp_path, f"resume={run}", "trainer.max_opts=300")
    with pytest.raises(ConfigError, match="agent=iqn: config groups cannot change"):
        prepare(resume, ["agent=iqn", "trainer.max_opts=300"])
    plan = prepare(resume, ["agent=dqn", "trainer.max_opts=300"])  # its own choice, repeated
    assert plan.checkpoint is not None and plan.config["trainer"]["max_opts"] == 300


def test_a_filesystem_without_flock_trains_unguarded_with_a_warning(tmp_path, monkeypatch, caplog):
    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with caplog.at_level(logging.WARNING), session_lock(tmp_path / "run"):
        assert (tmp_path / "run" / ".border_lock").is_file()
    assert "does not lock files (No locks available)" in caplog.text

    def broken(fd: int, operation: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(fcntl, "flock", broken)
    with pytest.raises(OSError, match="Input/output"), session_lock(tmp_path / "run"):
        pass


def test_find_checkpoint_ignores_partial_ones(run_150):
    root = run_150 / "checkpoints"
    (root / ".tmp-000000999-x").mkdir()  # an interrupted write
    (root / "000000998").mkdir()  # a directory without its files
    assert find_checkpoint(run_150) == root / "000000150"
    with pytest.raises(ConfigError, match="incomplete checkpoint"):
        find_checkpoint(root / "000000998")


@pytest.mark.slow
def test_border_eval_records_videos(tmp_path, run_150):
    pytest.importorskip("moviepy", reason="the [video] extra (moviepy) is not installed")
    out = run_border(["eval", str(run_150), "eval.n_episodes=2", "eval.video=true"], tmp_path)
    assert out.returncode == 0, out.stderr
    videos = list((run_150 / "checkpoints" / "best").glob("videos_*/*.mp4"))
    assert len(videos) == 2 and all(v.stat().st_size > 1000 for v in videos)
    lines = out.stdout.strip().splitlines()
    assert lines[-2] == f"videos: {videos[0].parent}", out.stdout  # after the table
    assert lines[-1].startswith("written: ")


@pytest.mark.slow
def test_a_run_saved_by_0_1_is_refused_in_one_line_but_its_policy_still_evaluates(tmp_path):
    train(
        make_config(tmp_path, *SERIAL, "trainer.max_opts=150", "trainer.save_replay_buffer=false")
    )
    run = tmp_path / "run"
    for ckpt in (run / "checkpoints").iterdir():  # as border-py 0.1.0 wrote it
        meta = json.loads((ckpt / "meta.json").read_text())
        (ckpt / "meta.json").write_text(json.dumps(meta | {"border_py": "0.1.0"}))
        config = json.loads((ckpt / "config.json").read_text())
        config["env"]["_target_"] = "border_py.envs.GymEnvFactory"  # 0.1.0's module
        (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError) as err:
        train(make_config(tmp_path, "resume=" + str(run)), overrides=["trainer.max_opts=300"])
    (line,) = str(err.value).splitlines()
    assert "saved by border-py 0.1.0, whose runs later versions cannot resume" in line
    out = run_border(["eval", str(run), "eval.n_episodes=2"], tmp_path)
    assert out.returncode == 0, out.stderr


def test_resume_auto_starts_a_run_then_finds_it_completed(tmp_path):
    """``resume=auto`` from Python: the first session finds no checkpoint and trains the run from
    the start (its dir held once: a second lock of its own was refused as another session's); a
    requeued session finds the run completed and returns its recorded summary."""
    auto = ["trainer=serial", "debug=tiny", "trainer.save_interval=100", "resume=auto"]
    first = train(make_config(tmp_path, *auto, "trainer.max_opts=200"))
    assert first["opt_steps"] == 200 and not first["interrupted"]
    again = train(make_config(tmp_path, *auto, "trainer.max_opts=300"))
    assert again["opt_steps"] == 200 and again["objective"] == first["objective"]
    assert json.loads((tmp_path / "run" / "result.json").read_text())["status"] == "completed"


def test_the_trainer_state_is_typed_and_keeps_its_saved_format():
    """``trainer.pt`` stays one flat mapping (checkpoints of earlier versions load); the code
    reads it as a TrainerState, the serial trainer's told by its actors' keys."""
    from border_py.runs.state import TrainerState

    saved = {
        "opt_steps": 300,
        "env_steps": 1200,
        "samples": 1190,
        "gate": {"base_env": 0},
        "env_intervals": {"eval": 1, "save": 0},
        "replay": {"size": 1190},
        "rng": {"numpy": 1},
        "sampler": {"envs": []},
        "actor": {"received": 3},
        "best_return": 9.5,
        "eval_returns": [1.0, 9.5],
        "seconds": 4.25,
    }
    state = TrainerState.from_dict(saved)
    assert state.serial and state.actors == {"sampler": {"envs": []}, "actor": {"received": 3}}
    assert (state.opt_steps, state.best_return, state.eval_returns) == (300, 9.5, [1.0, 9.5])
    assert state.to_dict() == saved
    older = {
        k: v for k, v in saved.items() if k not in ("env_intervals", "eval_returns", "seconds")
    }
    older["actors"] = older.pop("sampler")
    state = TrainerState.from_dict(older)
    assert not state.serial and state.env_intervals == {} and state.seconds == 0.0


@pytest.mark.slow
def test_a_run_dir_named_like_a_number_resumes_by_its_name(tmp_path):
    # a sweep's job dirs are 0, 1, ...: from the sweep dir, resume=0 names one (Hydra alone would
    # read it as the int 0, and the resume would be taken for a fresh run into a used dir)
    first = run_border(
        ["train", *TINY, "trainer=serial", "trainer.save_interval=100", "run_dir=0"], tmp_path
    )
    assert first.returncode == 0, first.stderr
    second = run_border(["train", "resume=0", "trainer.max_opts=400"], tmp_path)
    assert second.returncode == 0, second.stderr
    assert periodic_checkpoints(tmp_path / "0" / "checkpoints")[-1].name == "000000400"
    assert json.loads((tmp_path / "0" / "result.json").read_text())["summary"]["opt_steps"] == 400
