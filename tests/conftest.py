"""Shared test helpers: composing configs at a tiny budget, running the CLI, reading TensorBoard
events, and the fast tier's time limit."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch
from hydra import compose, initialize_config_dir
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from border_py.config import config_dir

REPO = Path(__file__).resolve().parents[1]
BORDER = [sys.executable, "-m", "border_py.cli"]
# The budget of a real run in a test: conf/debug/tiny.yaml (300 opt steps after 200 warm-up
# transitions, evaluations of 2 episodes at 150 and 300, training scalars every 50, no periodic
# checkpoints) with a 16-unit network. A test adds its own overrides after it.
TINY = ("debug=tiny", "agent.hidden_sizes=[16]")
# The fresh evaluations of a run's final and best weights at its end, for a test that does not look
# at them: 2 episodes each, as debug=tiny plays. The env's default, 100 each (CartPole: up to 500
# steps an episode once solved, Pendulum: 200), took 14 of the 120 s of the serial IQN run that
# solves CartPole and half of the SAC exact-resume test (three runs).
FEW_FRESH_EVALS = "trainer.final_eval_episodes=2"
# Seconds a test not marked slow may take, setup and teardown included: the fast tier's rule is
# ~1.5 s a test, and this 2-core machine, shared and loaded, runs one several times slower; the
# limit catches a test that belongs in the slow tier (or a hang) without failing a loaded run.
FAST_TIER_TIMEOUT = 15
# A ``gpu`` test's limit: its first CUDA call starts the device's context and loads its kernels.
GPU_TIMEOUT = 120
NO_CUDA = "needs a CUDA device (torch.cuda.is_available() is False): pytest -m gpu on a GPU machine"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give every test not marked ``slow`` the fast tier's time limit (a test's own
    ``@pytest.mark.timeout`` wins; a ``gpu`` test gets :data:`GPU_TIMEOUT`); ``timeout`` in
    pyproject.toml bounds the slow ones. Skip the ``gpu`` tests where there is no CUDA device."""
    cuda: bool | None = None  # asked once, and only when a gpu test was collected
    for item in items:
        limit = FAST_TIER_TIMEOUT
        if item.get_closest_marker("gpu") is not None:
            cuda = torch.cuda.is_available() if cuda is None else cuda
            if not cuda:
                item.add_marker(pytest.mark.skip(reason=NO_CUDA))
            limit = GPU_TIMEOUT
        if item.get_closest_marker("slow") is None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(limit))


def make_config(tmp_path: Path, *overrides: str):
    """The composed ``train`` config with ``run_dir`` under ``tmp_path``."""
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        return compose("train", overrides=[f"run_dir={tmp_path / 'run'}", *overrides])


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test, as in the trainers' processes (small networks' threads
    fight on a busy 2-core CPU); tests take it with ``pytest.mark.usefixtures``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny_config(tmp_path: Path):
    """``tiny_config(*overrides)``: the composed ``train`` config at the :data:`TINY` budget with
    the test's own overrides on top, its run dir ``tmp_path / 'run'``."""

    def compose_tiny(*overrides: str):
        return make_config(tmp_path, *TINY, *overrides)

    return compose_tiny


def run_border(args: list[str], cwd: Path, timeout: float = 240, env: dict | None = None):
    """Run ``border <args>`` in a subprocess; a hang fails the test instead of stalling it."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [*BORDER, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env
    )


def run_borders(
    calls: list[list[str]], cwd: Path, timeout: float = 240, env: dict | None = None
) -> list[subprocess.CompletedProcess]:
    """:func:`run_border` of each of ``calls``, two at a time, the results in the calls' order.
    Each call is mostly one core's work (its imports and checks, or a serial run) and CI's machine
    has two: for calls that neither write nor lock what another one reads."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda args: run_border(args, cwd, timeout, env), calls))


def selected_cases(request: pytest.FixtureRequest, test: str) -> list[dict]:
    """The parameters of the items of the test function ``test`` (in the requesting fixture's
    module) that this session runs, in their order."""
    return [
        item.callspec.params
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.module is request.module
        and item.originalname == test
    ]


def two_at_a_time(work: Callable[[Any], object], cases: list) -> list[Exception | None]:
    """``work(case)`` for each of ``cases``, two at a time, and what each raised (None: nothing),
    in the cases' order. For a parametrized test whose cases are each mostly one process's work
    (its imports, a serial run at a tiny budget; CI's machine has two cores) and share nothing: a
    module fixture runs them, and each case's test raises what its own work raised."""

    def attempt(case: object) -> Exception | None:
        try:
            work(case)
        except Exception as exc:  # raised again by the case's own test
            return exc
        return None

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(attempt, cases))


def scalar_tags(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag in the run's TensorBoard files, as (step, value) lists."""
    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _is_python_helper(process: psutil.Process) -> bool:
    """multiprocessing's resource tracker and fork server: one each per test session (shared by
    every run in it, as in a multirun sweep); they exit when the test runner does."""
    try:
        cmdline = " ".join(process.cmdline())
    except psutil.NoSuchProcess:
        return True
    return "resource_tracker" in cmdline or ("forkserver" in cmdline and "main(" in cmdline)


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """Every test must leave no child process of the test runner behind."""
    yield
    children = [p for p in psutil.Process().children(recursive=True) if not _is_python_helper(p)]
    if children:
        _, alive = psutil.wait_procs(children, timeout=3)
        assert not alive, f"leftover processes: {[p.cmdline() for p in alive]}"


def processes_with_marker(marker: str) -> list[psutil.Process]:
    """Live processes whose environment holds ``BORDER_TEST_MARKER=<marker>`` (children inherit it,
    so this finds orphans that were re-parented away from the test runner too)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("BORDER_TEST_MARKER") == marker and process.status() != (
                psutil.STATUS_ZOMBIE
            ):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found
