"""Resource bounds (:mod:`border_py.resources`): the estimates on hand-computed numbers and on
filled buffers, each bound refused in one line before anything starts (in process, through
``border_py.train`` and through the CLI) or only warned about with ``check_resources=false``."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import time
import uuid
from pathlib import Path

import gymnasium as gym
import numpy as np
import psutil
import pytest

from border_py import resources, train
from border_py.actors import local
from border_py.actors.sampler import Sampler, SampleStats, sampler_options
from border_py.cli.checks import check_overrides
from border_py.config import build
from border_py.errors import ConfigError
from border_py.overrides import to_plain
from border_py.replay.prioritized import PrioritizedReplayBuffer
from border_py.replay.uniform import UniformReplayBuffer
from border_py.runs.settings import RunSettings
from border_py.trainers.components import build_components
from border_py.trainers.train import prepare

from .conftest import BORDER, make_config, processes_with_marker

CARTPOLE = (gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2))
PENDULUM = (gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Box(-2, 2, (1,), np.float32))
STACKS = (gym.spaces.Box(0, 255, (4, 6, 6), np.uint8), gym.spaces.Discrete(2))
PATTERN = ["env=gym", "env.id=tests.frame_env:FramePattern-v0", "agent.network=mlp"]


def test_replay_estimates_on_hand_computed_numbers():
    # obs and next_obs 4 x float32, an int64 action, float32 reward and discount: 48 B a row
    assert UniformReplayBuffer.estimate_nbytes(1000, *CARTPOLE) == 48_000
    # sum and min trees over 1000 leaves: levels of 1024, 32 and 1 float64 nodes each
    assert PrioritizedReplayBuffer.estimate_nbytes(1000, *CARTPOLE) == 48_000 + 2 * 8 * 1057
    # 2 x 3 float32 + a float32 action + reward + discount: 36 B a row
    assert UniformReplayBuffer.estimate_nbytes(10, *PENDULUM) == 360
    # frame ids: obs, next_obs and oldest int64, action int64, reward, discount: 40 B a row; a
    # ring of 40 + 40 // 32 + 1 = 42 frames of 6 x 6 uint8 (plus one zero frame), int64 links
    assert UniformReplayBuffer.estimate_nbytes(40, *STACKS, frame_stack=4) == (
        40 * 40 + 43 * 36 + 42 * 8
    )
    assert UniformReplayBuffer.estimate_nbytes(10, gym.spaces.Dict({}), CARTPOLE[1]) is None


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["replay_buffer=prioritized"],
        ["agent=sac", "env=pendulum"],
        PATTERN,  # uint8 stacks stored whole
        [*PATTERN, "replay_buffer=prioritized", "replay_buffer.frame_stack=4"],
    ],
)
def test_the_estimate_is_what_a_filled_buffer_holds(tmp_path, overrides):
    """Batches of the actors' own sampler, pushed until the ring wraps: the buffer's bytes are
    the estimate made from its keys and spaces alone."""
    config = to_plain(
        make_config(tmp_path, "agent.batch_size=8", "replay_buffer.capacity=50", *overrides)
    )
    parts = build_components(config, RunSettings.of(config), 0)
    buffer = parts.buffer
    sampler = Sampler(parts.env_factory, parts.agent, 2, seed=0, **sampler_options(config))
    while len(buffer) < buffer.capacity:
        buffer.push(sampler.sample(20, SampleStats()))
    buffer.push(sampler.sample(20, SampleStats()))
    sampler.close()
    estimate = type(buffer).estimate_nbytes(
        50, *parts.env_factory.spaces(), config["replay_buffer"]["frame_stack"]
    )
    assert buffer.nbytes == estimate > 0


def test_what_the_machine_has():
    available, what = resources.available_memory()
    assert what == "of memory available"  # Linux: MemAvailable
    assert abs(available - psutil.virtual_memory().available) < 0.05 * available
    assert resources.free_shared_memory() == psutil.disk_usage("/dev/shm").free
    assert resources.usable_cores() == len(os.sched_getaffinity(0))
    assert resources.open_files_limit() == psutil.Process().rlimit(psutil.RLIMIT_NOFILE)[0]
    assert [resources.size_text(n) for n in (512, 1536, 7.3 * 2**40)] == [
        "512 B",
        "1.5 KiB",
        "7.3 TiB",
    ]


def test_a_bound_refuses_in_one_line_or_only_warns(caplog):
    with pytest.raises(ConfigError) as refused:
        resources.at_most("trainer.eval_episodes", 10_001, 10_000, "episodes", True)
    assert str(refused.value) == (
        "trainer.eval_episodes=10001: more than 10,000 episodes; lower it"
        " (or check_resources=false to run anyway)"
    )
    resources.at_most("trainer.eval_episodes", 10_000, 10_000, "episodes", True)  # at the limit
    with caplog.at_level(logging.WARNING, logger="border_py.resources"):
        resources.at_most("trainer.eval_episodes", 10_001, 10_000, "episodes", False)
    assert caplog.messages == [
        "check_resources=false: trainer.eval_episodes=10001: more than 10,000 episodes; lower it;"
        " running anyway"
    ]


def _refused(tmp_path, *overrides: str) -> str:
    """The one line ``prepare`` (what ``border train`` and ``border_py.train`` run first)
    refuses the composed config with."""
    with pytest.raises(ConfigError) as refused:
        prepare(make_config(tmp_path, *overrides))
    return str(refused.value)


def test_the_shared_memory_of_the_slots_is_bounded_by_dev_shm(tmp_path, monkeypatch):
    monkeypatch.setattr(resources, "free_shared_memory", lambda: 2**20)
    # CartPole, 1 env, n_step 1: 10,001 rows of 16 + 8 + 4 + 16 + 4 B, and 10,002 of episode
    # returns and lengths (8 + 8 B), each array padded to 64 B: 640,448 B a slot
    assert _refused(tmp_path, "actor_manager.n_actors=2", "actor_manager.n_buffer=10000") == (
        "actor_manager.n_actors=2 x queue_size=8: 16 slots of 625.4 KiB (n_buffer=10000,"
        " n_envs_per_actor=1) need ~9.8 MiB of shared memory, more than the 1.0 MiB free in"
        " /dev/shm; lower them (or check_resources=false to run anyway)"
    )
    prepare(make_config(tmp_path, "actor_manager.n_actors=2", "actor_manager.n_buffer=1000"))


def test_local_actors_are_bounded_by_cores_and_open_files(tmp_path, monkeypatch):
    monkeypatch.setattr(local, "usable_cores", lambda: 2)
    assert _refused(tmp_path, "actor_manager.n_actors=17") == (
        "actor_manager.n_actors=17: 17 actors on 2 usable CPU cores, more than 16 (8 per core);"
        " lower it (or check_resources=false to run anyway)"
    )
    monkeypatch.setattr(resources, "open_files_limit", lambda: None)
    prepare(make_config(tmp_path, "actor_manager.n_actors=16"))
    monkeypatch.setattr(resources, "open_files_limit", lambda: 64 + 6 * 3)
    assert _refused(tmp_path, "actor_manager.n_actors=4") == (
        "actor_manager.n_actors=4: the learner needs ~88 open files (6 per actor), more than its"
        " limit of 82 (ulimit -n); lower it or raise the limit (or check_resources=false to run"
        " anyway)"
    )
    prepare(make_config(tmp_path, "actor_manager.n_actors=3"))


def test_the_serial_trainer_has_no_actor_processes_to_bound(tmp_path):
    prepare(make_config(tmp_path, "trainer=serial", "actor_manager.n_actors=10000"))


def test_with_check_resources_false_the_bounds_only_warn(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(resources, "open_files_limit", lambda: None)
    with caplog.at_level(logging.WARNING, logger="border_py.resources"):
        prepare(
            make_config(
                tmp_path,
                "check_resources=false",
                "trainer.eval_episodes=1e9",
                "actor_manager.n_actors=1000",
            )
        )
    assert [m.split(":")[1] for m in caplog.messages] == [
        " trainer.eval_episodes=1000000000",
        " actor_manager.n_actors=1000",
    ]
    assert _refused(tmp_path, "check_resources=no") == (
        "check_resources='no': must be true or false"
    )


def test_border_py_train_refuses_before_anything_starts(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match=r"^replay_buffer.capacity=1000000000000: the replay"):
        train(make_config(tmp_path, "replay_buffer.capacity=1e12"))
    assert not run.exists()


class Huge:
    """A component too large for any machine (numpy's words)."""

    def __init__(self) -> None:
        raise MemoryError("Unable to allocate 7.28 TiB for an array with shape (1000000000000,)")


def test_a_component_too_large_for_memory_is_one_line():
    """The backstop for what no estimate covers (a user's class; ``check_resources=false``): a
    MemoryError while building is a one-line ConfigError."""
    with pytest.raises(ConfigError) as refused:
        build("replay_buffer", {"_target_": "tests.test_resources.Huge"})
    assert str(refused.value) == (
        "replay_buffer: tests.test_resources.Huge does not fit in memory (Unable to allocate"
        " 7.28 TiB for an array with shape (1000000000000,)); lower its sizes"
    )


CORES = len(os.sched_getaffinity(0))
# Each bad value of issue 27, and the start of its one line: the key, the estimate, the limit
REFUSED = [
    (["actor_manager.n_actors=10000"], f"actor_manager.n_actors=10000: 10000 actors on {CORES}"),
    (
        ["actor_manager.n_envs_per_actor=100000"],
        "actor_manager.n_envs_per_actor=100000: more than 1,024 envs per actor",
    ),
    (
        ["actor_manager.n_buffer=1e7"],
        "actor_manager.n_buffer=10000000: more than 100,000 transitions per batch",
    ),
    (
        ["actor_manager.queue_size=1e5"],
        "actor_manager.queue_size=100000: more than 128 batches in flight per actor",
    ),
    (  # 48 B a row
        ["replay_buffer.capacity=1e12"],
        "replay_buffer.capacity=1000000000000: the replay buffer needs ~43.7 TiB, more than the",
    ),
    (  # and 16 B a row for the trees
        ["replay_buffer=prioritized", "replay_buffer.capacity=1e12"],
        "replay_buffer.capacity=1000000000000: the replay buffer needs ~58.7 TiB, more than the",
    ),
    (
        ["trainer.eval_episodes=1e9"],
        "trainer.eval_episodes=1000000000: more than 10,000 episodes per evaluation",
    ),
]


@pytest.mark.parametrize(("overrides", "line"), REFUSED)
def test_the_pre_check_refuses_each_in_one_line(overrides, line):
    with pytest.raises(ConfigError) as refused:
        check_overrides(overrides)
    assert str(refused.value).startswith(line)
    assert str(refused.value).endswith("; lower it (or check_resources=false to run anyway)")


# Records in the file $BORDER_TEST_STARTS every process a Python process starts: multiprocessing's
# (actors, the evaluator) and subprocess's (a local Ray). Loaded by every Python of a test run
# that has it on PYTHONPATH (Python imports ``sitecustomize`` at startup).
RECORD_STARTS = """\
import multiprocessing.process, os, subprocess


def _record(what):
    with open(os.environ["BORDER_TEST_STARTS"], "a") as f:
        f.write(what + "\\n")


_start = multiprocessing.process.BaseProcess.start
_popen = subprocess.Popen.__init__


def start(self):
    _record(f"process {self.name}")
    _start(self)


def popen(self, args, *rest, **kwargs):
    _record(f"subprocess {args}")
    _popen(self, args, *rest, **kwargs)


multiprocessing.process.BaseProcess.start = start
subprocess.Popen.__init__ = popen
"""


FORK_SAMPLES = 10  # samples (20 ms apart) a child may keep border's command line before its exec


def run_watched(args: list[str], tmp_path: Path, timeout: float = 60):
    """Run ``border <args>`` with a marker, recording what it starts (:data:`RECORD_STARTS`) and
    every descendant seen while it runs (sampled every 20 ms) other than multiprocessing's
    forkserver (``border train`` starts it first thing, to import torch on another core while the
    command line is checked) and resource tracker.

    Returns (the finished process, its stdout and stderr, seconds, the processes started, the
    command lines of the other descendants seen).
    """
    marker = f"bounds-{uuid.uuid4().hex}"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(RECORD_STARTS)
    starts = tmp_path / "starts.txt"
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
    env |= {"BORDER_TEST_MARKER": marker, "BORDER_TEST_STARTS": str(starts)}
    began = time.monotonic()
    proc = subprocess.Popen(
        [*BORDER, *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    sightings: dict[int, list[str]] = {}  # pid -> its command lines, in the order seen
    try:
        border = psutil.Process(proc.pid)
        own = " ".join(border.cmdline())
        while proc.poll() is None and time.monotonic() - began < timeout:
            for child in border.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    # none: an exited process not yet reaped (the forkserver as border exits)
                    if cmdline := " ".join(child.cmdline()):
                        sightings.setdefault(child.pid, []).append(cmdline)
            time.sleep(0.02)
        out, err = proc.communicate(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    seconds = time.monotonic() - began
    deadline = time.monotonic() + 10  # the forkserver exits once border has
    while processes_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_with_marker(marker)
    started = starts.read_text().splitlines() if starts.exists() else []
    seen = [lines[-1] for lines in sightings.values() if _not_a_helper(lines, own)]
    return proc, out.decode(), err.decode(), seconds, started, seen


def _not_a_helper(cmdlines: list[str], own: str) -> bool:
    """Whether a descendant seen with ``cmdlines`` is one the test counts: not Python's fork
    server or resource tracker, nor a fork of border on its way to becoming one (border's own
    command line until its exec; a loaded machine stretches that moment) unless it kept border's
    command line for :data:`FORK_SAMPLES` samples (a child running border's code). What border
    itself starts is in the recorded starts too."""
    if any(_helper_cmdline(line) for line in cmdlines):
        return False
    return any(line != own for line in cmdlines) or len(cmdlines) >= FORK_SAMPLES


def _helper_cmdline(cmdline: str) -> bool:
    """multiprocessing's resource tracker or fork server, by its command line."""
    return "resource_tracker" in cmdline or ("forkserver" in cmdline and "main(" in cmdline)


@pytest.mark.slow
@pytest.mark.parametrize(("overrides", "line"), REFUSED)
def test_border_train_refuses_each_before_any_process_starts(tmp_path, overrides, line):
    """Exit 2 with one line within 20 s. No child ever: no process started by border (actors,
    the evaluator, a Ray), no descendant but Python's forkserver and resource tracker, no process
    of the run left; no run dir."""
    run = tmp_path / "run"
    proc, _, err, seconds, started, seen = run_watched(
        ["train", *overrides, f"run_dir={run}"], tmp_path
    )
    assert proc.returncode == 2, err
    [error] = err.strip().splitlines()
    assert error.startswith(f"border: error: {line}"), error
    assert seconds < 20
    assert started == []
    assert seen == []
    assert not run.exists() and not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_with_check_resources_false_a_bound_only_warns_and_the_run_goes_on(tmp_path):
    """``actor_manager.queue_size=200`` runs with its warning (and the recording of starts sees
    the actors and the evaluator: it would have seen them above)."""
    run = tmp_path / "run"
    proc, _, err, _, started, _ = run_watched(
        [
            "train",
            "check_resources=false",
            "actor_manager.queue_size=200",
            "experiment=none",
            "agent.hidden_sizes=[16]",
            "trainer.max_opts=50",
            "trainer.warmup_period=100",
            "trainer.eval_interval=50",
            "trainer.eval_episodes=1",
            "progress=false",
            f"run_dir={run}",
        ],
        tmp_path,
        timeout=180,
    )
    assert proc.returncode == 0, err
    warning = (
        "check_resources=false: actor_manager.queue_size=200: more than 128 batches in flight per"
        " actor"
    )
    assert warning in err and warning in (run / "train.log").read_text()
    assert {"process border-actor-0", "process border-actor-1"} <= set(started), started
    assert any("eval" in s for s in started), started
    assert json.loads((run / "result.json").read_text())["status"] == "completed"
