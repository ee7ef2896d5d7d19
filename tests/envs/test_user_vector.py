"""env.backend=vector: a gymnasium VectorEnv of the user's (gymnasium.make_vec or a _target_) as
the actors' envs: its steps against today's gymnasium path, its checks, real runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from border_py import train
from border_py.actors.sampler import Sampler, SampleStats
from border_py.agents.dqn import DQN
from border_py.cli.main import main
from border_py.config import build
from border_py.envs.factory import GymEnvFactory
from border_py.errors import ConfigError

from .. import vector_envs
from ..conftest import FEW_FRESH_EVALS, REPO, TINY, make_config, run_border

CARTPOLE = {"_target_": "border_py.envs.factory.GymEnvFactory", "id": "CartPole-v1"}
USERS = {"_target_": "tests.vector_envs.cartpole"}


def env(**keys) -> GymEnvFactory:
    """The ``env`` group's factory for CartPole with ``keys``, built as a config builds it."""
    return build("env", CARTPOLE | keys)


def refused(factory: GymEnvFactory, n_envs: int = 2) -> str:
    """The one line that refuses ``factory``'s actors' envs."""
    with pytest.raises(ConfigError) as err:
        factory.make_vector(n_envs, 0)
    assert "\n" not in str(err.value)
    return str(err.value)


def assert_steps_equal(vector: GymEnvFactory, n_envs: int = 3, seed: int = 5) -> None:
    """``vector``'s actors' envs step as today's gymnasium backend's, bitwise, across episode
    ends (a 20-step limit and 45 steps: several in each env)."""
    actions = np.random.default_rng(0).integers(0, 2, size=(45, n_envs))
    mine = vector.make_vector(n_envs, seed)
    today = GymEnvFactory("CartPole-v1", max_episode_steps=20).make_vector(n_envs, seed)
    try:
        assert mine.backend == "vector"
        assert np.array_equal(mine.obs, today.obs)  # env i's first reset seeded with seed + i
        ends = 0
        for a in actions:
            m, t = mine.step(a), today.step(a)
            for key in ("next_obs", "obs", "reward", "terminated", "truncated"):
                assert np.array_equal(getattr(m, key), getattr(t, key)), key
            assert (m.episode_returns, m.episode_lengths) == (t.episode_returns, t.episode_lengths)
            ends += len(m.episode_lengths)
        assert ends >= 6
    finally:
        mine.close()
        today.close()


@pytest.mark.parametrize(
    "mode", ["sync", pytest.param("async", marks=pytest.mark.slow)]
)  # async: subprocesses
def test_make_vec_steps_are_the_gymnasium_paths_bitwise(mode):
    assert_steps_equal(
        env(max_episode_steps=20, backend="vector", vector={"vectorization_mode": mode})
    )


def test_a_users_factory_builds_the_actors_envs():
    """``env.vector._target_``: called with num_envs and its own keys; a vector wrapper of the
    user's (it counts the steps) sits around gymnasium's SyncVectorEnv."""
    before = vector_envs.STEPS["env"]
    vector = USERS | {"max_episode_steps": 20}
    assert_steps_equal(env(backend="vector", vector=vector))
    assert vector_envs.STEPS["env"] - before == 45 * 3


def test_a_next_step_env_is_refused_in_one_line():
    line = refused(env(backend="vector", vector=USERS | {"autoreset_mode": "NextStep"}))
    assert line.startswith("env.vector: CountSteps autoresets in mode NextStep"), line
    assert "the actors need SameStep" in line
    line = refused(env(backend="vector", vector={"vectorization_mode": "vector_entry_point"}))
    assert line.startswith("env.vector: CartPoleVectorEnv autoresets in mode NextStep"), line


@pytest.mark.slow
def test_border_train_refuses_a_next_step_env_with_exit_2_and_one_line(tmp_path):
    """CartPole's own vector env (its vector entry point) autoresets on the next step."""
    out = run_border(
        [
            "train",
            "env.backend=vector",
            "env.vector={vectorization_mode:vector_entry_point}",
            f"run_dir={tmp_path / 'run'}",
        ],
        tmp_path,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "CartPoleVectorEnv autoresets in mode NextStep" in lines[0], lines
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_a_num_envs_mismatch_is_refused_in_one_line():
    line = refused(env(backend="vector", vector={"_target_": "tests.vector_envs.two_envs"}), 3)
    assert line == (
        "env.vector: CountSteps holds 2 envs where the actor asked for num_envs=3"
        " (actor_manager.n_envs_per_actor)"
    )


def test_spaces_other_than_the_evaluation_envs_are_refused_in_one_line():
    line = refused(env(backend="vector", vector={"_target_": "tests.vector_envs.pendulum"}))
    assert line.startswith("env.vector: its single spaces (observations Box(")
    assert "differ from the evaluation env's" in line


def test_what_is_not_a_vector_env_is_refused_in_one_line():
    line = refused(env(backend="vector", vector={"_target_": "tests.vector_envs.single"}))
    assert line == "env.vector: built a TimeLimit, not a gymnasium.vector.VectorEnv"


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (
            {"vector": {"vectorization_mode": "sync"}},
            "env.vector: used only with backend=vector (the backend is gymnasium)",
        ),
        (
            {"backend": "vector", "vector": {"vectorisation_mode": "sync"}},
            "env.vector.vectorisation_mode: not a key of env.vector (did you mean"
            " 'vectorization_mode'?)",
        ),
        (
            {"backend": "vector", "vector": {"vectorization_mode": "threads"}},
            "env.vector.vectorization_mode='threads': must be one of sync, async,"
            " vector_entry_point",
        ),
        (
            {"backend": "vector", "vector": {"_target_": 3}},
            "env.vector._target_=3: must be a function or class of yours",
        ),
        (
            {
                "backend": "vector",
                "vector": USERS,
                "wrappers": [{"_target_": "gymnasium.wrappers.ClipReward", "max_reward": 1.0}],
            },
            "env.wrappers: with vector a _target_, the actors' envs are the VectorEnv as built",
        ),
        (
            {
                "backend": "vector",
                "vector": {"vectorization_mode": "vector_entry_point", "vector_kwargs": {"a": 1}},
            },
            "env.vector.vector_kwargs: vectorization_mode=vector_entry_point takes none",
        ),
    ],
)
def test_a_bad_env_vector_is_refused_in_one_line(keys, message):
    with pytest.raises(ConfigError) as err:
        env(**keys)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_make_vec_is_refused_where_the_env_option_preprocesses_its_envs():
    """gymnasium.make_vec would build the registered env without the option's own preprocessing
    (Atari's, MinAtar's, POPGym's): refused before anything is built; a _target_ is taken."""

    class Preprocessed(GymEnvFactory):
        def make_base(self, render_mode=None, training=False):
            return super().make_base(render_mode, training)

    with pytest.raises(ConfigError, match=r"^vector: gymnasium.make_vec builds CartPole-v1 as"):
        Preprocessed("CartPole-v1", backend="vector")
    Preprocessed("CartPole-v1", backend="vector", vector=USERS)


def test_the_make_vec_envs_take_the_actors_wrappers_and_kwargs():
    """In sync and async modes env.wrappers (the training ones) wrap each env, as they do with
    the other backends, and env.kwargs reach gymnasium.make: Sutton and Barto's CartPole rewards
    (0 a step, -1 at the end), clipped to [-0.5, 0.5]."""
    clip = {"_target_": "gymnasium.wrappers.ClipReward", "min_reward": -0.5, "max_reward": 0.5}
    factory = env(
        backend="vector",
        wrappers=[clip | {"training_only": True}],
        kwargs={"sutton_barto_reward": True},
    )
    envs = factory.make_vector(2, 0)
    try:
        rewards = np.concatenate([envs.step(np.zeros(2, dtype=np.int64)).reward for _ in range(30)])
    finally:
        envs.close()
    assert set(rewards.tolist()) == {0.0, -0.5}


def test_a_resume_starts_fresh_episodes():
    """The user's envs are not checkpointed: the state names the backend only."""
    factory = env(backend="vector", vector=USERS)
    agent = DQN(*factory.spaces(), hidden_sizes=[8], n_step=3)
    sampler = Sampler(factory, agent, 2, 0, replayable=True)
    try:
        sampler.sample(8, SampleStats())
        assert sampler.state()["env"] == {"backend": "vector"}
    finally:
        sampler.close()


RUN = ("env.backend=vector", "env.vector={_target_:tests.vector_envs.cartpole}", FEW_FRESH_EVALS)


@pytest.mark.slow
def test_a_serial_run_steps_the_users_envs_and_border_eval_plays_single_envs(tmp_path, capsys):
    before = vector_envs.STEPS["env"]
    summary = train(make_config(tmp_path, "trainer=serial", *TINY, *RUN, "progress=false"))
    assert summary["opt_steps"] == 300 and not summary["interrupted"]
    assert summary["env_steps"] == vector_envs.STEPS["env"] - before > 0
    run = tmp_path / "run"
    saved = json.loads((run / "checkpoints" / "best" / "config.json").read_text())
    assert saved["env"]["vector"] == {"_target_": "tests.vector_envs.cartpole"}
    assert main(["eval", str(run), "eval.n_episodes=2"]) == 2  # the run's code needs trust
    assert "add trust=[tests.vector_envs.cartpole]" in capsys.readouterr().err
    assert main(["eval", str(run), "eval.n_episodes=2", "trust=[tests.vector_envs]"]) == 0


@pytest.mark.slow
def test_an_async_run_accounts_for_every_transition_of_the_users_envs(tmp_path):
    summary = train(
        make_config(
            tmp_path,
            "trainer=async",
            "actor_manager.n_actors=2",
            *TINY,
            *RUN,
            "progress=false",
        )
    )
    acc = summary["accounting"]
    assert summary["opt_steps"] == 300 and not summary["interrupted"]
    assert acc["sent"] == acc["received"] == summary["samples"] > 200


@pytest.mark.slow
def test_a_make_vec_run_evaluates_with_border_eval_as_it_is(tmp_path, capsys):
    """Without a _target_ the saved config imports nothing of the user's: border eval needs no
    trust and plays the single env from env.id."""
    vector = "env.vector={vectorization_mode:async}"
    train(make_config(tmp_path, "trainer=serial", *TINY, "env.backend=vector", vector))
    assert main(["eval", str(tmp_path / "run"), "eval.n_episodes=2"]) == 0, capsys.readouterr()


HOLDER = """
import sys
import numpy as np
from border_py.envs.factory import GymEnvFactory

if __name__ == "__main__":
    vector = {"vectorization_mode": "async"}
    kwargs = {"hang_after": 3, "flag": sys.argv[1]}
    factory = GymEnvFactory("tests.hang_env:HangOnce-v0", kwargs, backend="vector", vector=vector)
    envs = factory.make_vector(2, 0)
    print("started", flush=True)
    while True:
        envs.step(np.zeros(2, dtype=np.int64))  # the third step of one env never returns
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX only")
def test_make_vecs_async_subprocesses_ignore_ctrl_c_and_die_with_their_actor(tmp_path):
    """As gymnasium_async's: a SIGINT leaves them running (the actor's stop closes them), and a
    process killed with SIGKILL in a step that never returns leaves none behind."""
    flag = tmp_path / "hung"
    (tmp_path / "holder.py").write_text(HOLDER)
    holder = subprocess.Popen(
        [sys.executable, str(tmp_path / "holder.py"), str(flag)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "started\n"
        deadline = time.monotonic() + 30
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert flag.exists(), "no env step hung"
        children = psutil.Process(holder.pid).children()
        workers = [p for p in children if "spawn_main" in " ".join(p.cmdline())]
        assert len(workers) == 2, [p.cmdline() for p in workers]
        for worker in workers:
            os.kill(worker.pid, signal.SIGINT)
        time.sleep(0.5)
        assert all(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
        holder.kill()
        holder.wait(timeout=10)
        assert psutil.wait_procs(workers, timeout=10)[1] == []
    finally:
        holder.kill()
        holder.wait(timeout=10)
