"""Fixtures of the deploy tests: tiny real runs, each trained once per test session when a test
first asks for it, and helpers that compare an export's outputs with the loaded policy's."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from border_py import train

from ..conftest import REPO, TINY, make_config

R2D2_RUN = [
    "agent=r2d2",
    "env=popgym",
    "replay_buffer=sequence",
    "agent.core_size=16",
    "agent.batch_size=8",
    "trainer.max_opts=60",
    "trainer.eval_interval=30",
    "trainer.warmup_period=100",
]
# serial runs of a few seconds: opt steps 300, evaluations at 150 and 300 (best is one of them)
RUNS = {
    "dqn": ["agent=dqn", "env=cartpole"],
    "iqn": ["agent=iqn", "env=cartpole", "agent.k=8"],
    "sac": ["agent=sac", "env=pendulum"],
    # the Nature CNN with a dueling head, on 4x36x36 uint8 frames (the id imports this package)
    "pixels": [
        "agent=dqn",
        "env=gym",
        "env.id=tests.deploy.pixel_env:Pixels-v0",
        "agent.dueling=true",
        "agent.batch_size=16",
        "trainer.max_opts=60",
        "trainer.eval_interval=30",
        "trainer.eval_max_steps=20",
        "replay_buffer.capacity=1000",
    ],
    # R2D2 on POPGym's RepeatPreviousEasy (51-step episodes): an LSTM; a GRU fed the previous
    # reward, with a dueling head (the other input signature and head of the exports)
    "r2d2": [*R2D2_RUN],
    "r2d2_gru": [
        *R2D2_RUN,
        "agent.core=gru",
        "agent.prev_reward=true",
        "agent.dueling=true",
        "agent.head_sizes=[8]",
    ],
}
# the envs whose exports are played without border-py (test_env_interface.py): MinAtar's grid (and
# with flicker and a frame stack: a step that changes episodes between two observation steps),
# and Pong's preprocessing, FIRE at reset and a time limit
PLAYED_RUNS = {
    "minatar": ["agent=dqn", "env=minatar", "agent.batch_size=8", "trainer.max_opts=40"],
    "minatar_flicker": [
        "agent=dqn",
        "env=minatar",
        "env.flicker=0.5",
        "env.frame_stack=2",
        "agent.batch_size=8",
        "trainer.max_opts=40",
    ],
    "pong": [
        "agent=dqn",
        "env=atari",
        "env.max_episode_steps=200",
        "agent.batch_size=8",
        "replay_buffer.capacity=1000",
        "trainer.warmup_period=100",
        "trainer.max_opts=20",
        "trainer.eval_interval=20",
        "trainer.eval_episodes=1",
        "trainer.eval_max_steps=50",
        "trainer.final_eval_episodes=1",
    ],
}
RUNS |= PLAYED_RUNS
PIXELS_TRUST = ["tests.deploy.pixel_env"]


@pytest.fixture(scope="session")
def trained(tmp_path_factory) -> Callable[[str], Path]:
    """``trained(name)``: the run dir of :data:`RUNS`' ``name``, trained at its first use."""
    done: dict[str, Path] = {}

    def run(name: str) -> Path:
        if name not in done:
            where = tmp_path_factory.mktemp(name)
            train(make_config(where, *TINY, "trainer=serial", "progress=false", *RUNS[name]))
            done[name] = where / "run"
        return done[name]

    return run


def assert_same_policy(
    actions: np.ndarray, values: np.ndarray, want_actions: np.ndarray, want_values: np.ndarray
) -> None:
    """An export's ``(actions, values)`` are the policy's: values to float32 tolerance, actions
    equal (a discrete one may differ only where the best two values are within 1e-5: a tie)."""
    np.testing.assert_allclose(values, want_values, rtol=1e-4, atol=1e-5)
    if np.issubdtype(want_actions.dtype, np.integer):
        differ = np.flatnonzero(actions != want_actions)
        top2 = np.sort(want_values, axis=1)[:, -2:]
        assert np.all(top2[differ, 1] - top2[differ, 0] < 1e-5), f"actions differ at {differ}"
        assert len(differ) <= 2, f"{len(differ)} ties: not a tie, a different policy"
    else:
        np.testing.assert_allclose(actions, want_actions, rtol=1e-4, atol=1e-5)


def run_isolated(
    code: str, cwd: Path, blocked: tuple[str, ...] = ("torch", "border_py"), timeout: float = 120
) -> subprocess.CompletedProcess:
    """``python -c code`` in ``cwd`` where importing any of ``blocked`` fails
    (``sys.modules[name] = None``: an ImportError), without the repo's code on the path (its
    ``src``, ``tests`` and root; a virtual environment inside the checkout stays: numpy is there)."""
    ours = tuple(str(p) for p in (REPO / "src", REPO / "tests", REPO / "examples"))
    prelude = (
        "import sys\n"
        + "".join(f"sys.modules[{name!r}] = None\n" for name in blocked)
        + f"sys.path = [p for p in sys.path if p and p != {str(REPO)!r}"
        + f" and not p.startswith({ours!r})]\n"
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PATH": "/usr/bin:/bin", "PYTHONNOUSERSITE": "1"},
    )
