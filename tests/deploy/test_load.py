"""``load_policy``: the policy of a run's best checkpoint (else its newest), built without Hydra
or the trainer, acting on its own env like SB3's ``predict``; the trust gate of ``border eval``."""

from __future__ import annotations

import json
import shutil

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py import load_policy, train
from border_py.agents.iqn import midpoints
from border_py.deploy.export import export_policy
from border_py.deploy.graph import sample_observations
from border_py.errors import ConfigError
from border_py.runs.timeline import periodic_checkpoints

from ..conftest import TINY, make_config
from .conftest import PIXELS_TRUST, run_isolated


@pytest.mark.parametrize("name", ["dqn", "iqn", "sac"])
def test_the_policy_of_the_best_checkpoint_acts_on_its_own_env(trained, name):
    run = trained(name)
    policy = load_policy(run)
    meta = json.loads((run / "checkpoints" / "best" / "meta.json").read_text())
    assert policy.checkpoint == (run / "checkpoints" / "best").resolve()
    assert policy.opt_steps == meta["opt_steps"] and policy.env_steps == meta["env_steps"]
    assert policy.agent_name == name.upper()
    assert policy.env_id == {"sac": "Pendulum-v1"}.get(name, "CartPole-v1")
    saved = torch.load(run / "checkpoints" / "best" / "policy.pt", weights_only=True)
    for key, value in policy.agent.policy_state().items():
        assert torch.equal(value, saved[key]), key  # the checkpoint's weights, not fresh ones

    env = policy.make_env()
    obs, _ = env.reset(seed=3)
    assert policy.observation_space == env.observation_space
    assert policy.action_space == env.action_space
    seen = [obs]
    for _ in range(7):
        action, state = policy.predict(obs, deterministic=True)
        assert state is None and env.action_space.contains(action)
        obs, _, terminated, truncated, _ = env.step(action)
        seen.append(obs)
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    batch = np.stack(seen)
    actions, _ = policy.predict(batch, deterministic=True)
    assert len(actions) == len(batch)
    assert all(env.action_space.contains(a) for a in actions)
    singles = np.stack([policy.predict(o, deterministic=True)[0] for o in seen])
    np.testing.assert_allclose(singles, actions, rtol=1e-6)  # one at a time = as a batch


def test_iqn_greedy_actions_are_those_of_the_k_midpoint_levels(trained):
    policy = load_policy(trained("iqn"))
    agent = policy.agent
    obs = sample_observations(policy.observation_space, 500, seed=1)
    first, _ = policy.predict(obs, deterministic=True)
    again, _ = policy.predict(obs, deterministic=True)
    np.testing.assert_array_equal(first, again)  # no level is sampled
    taus = midpoints(agent.args.k, agent.device).expand(len(obs), agent.args.k)
    with torch.no_grad():
        q = agent.z(torch.as_tensor(obs), taus).mean(dim=1)
    np.testing.assert_array_equal(first, q.argmax(dim=1).numpy())
    assert taus[0].tolist() == [(j + 0.5) / 8 for j in range(8)]


@pytest.mark.parametrize("name", ["dqn", "sac"])
def test_a_non_deterministic_prediction_explores_from_the_runs_position(trained, name):
    policy = load_policy(trained(name))
    obs = sample_observations(policy.observation_space, 400, seed=2)
    greedy, _ = policy.predict(obs, deterministic=True)
    explored, _ = policy.predict(obs, deterministic=False)
    assert policy.agent.env_steps == policy.env_steps + len(obs)  # it went on from the run's
    assert all(policy.action_space.contains(a) for a in explored)
    if name == "dqn":  # epsilon of the schedule at the run's env steps
        epsilon = policy.agent.epsilon
        assert 0.05 < epsilon < 1.0
        assert 0.0 < np.mean(explored != greedy) <= epsilon
    else:  # a policy sample: never exactly the squashed mean
        assert np.all(explored != greedy)


def test_a_checkpoint_dir_loads_that_checkpoint_and_make_env_takes_kwargs(trained):
    run = trained("dqn")
    (newest,) = periodic_checkpoints(run / "checkpoints")
    policy = load_policy(newest)
    assert policy.checkpoint == newest.resolve() and policy.opt_steps == 300
    env = policy.make_env(max_episode_steps=3)
    env.reset(seed=0)
    ends = [env.step(0)[3] for _ in range(3)]
    assert ends == [False, False, True]  # the id's kwargs, with this one added
    env.close()


def test_pixel_frames_are_taken_as_uint8_stacks(trained):
    policy = load_policy(trained("pixels"), trust=PIXELS_TRUST)
    assert policy.observation_space.dtype == np.uint8
    assert isinstance(policy.observation_space, gym.spaces.Box)
    env = policy.make_env()
    obs, _ = env.reset(seed=0)
    action, _ = policy.predict(obs, deterministic=True)
    assert env.action_space.contains(action)
    env.close()


def test_bad_input_is_one_line(trained, tmp_path):
    with pytest.raises(ConfigError, match="not a border-py run or checkpoint"):
        load_policy(tmp_path)
    with pytest.raises(ConfigError, match=r"trust=\[tests.deploy.pixel_env\]"):
        load_policy(trained("pixels"))  # its env id imports a module of the user's
    with pytest.raises(ConfigError, match=r"^device='tpu': must be cpu, cuda or cuda:<index>$"):
        load_policy(trained("dqn"), device="tpu")
    with pytest.raises(ConfigError, match="standard library"):
        load_policy(trained("dqn"), trust=["os"])
    policy = load_policy(trained("dqn"))
    with pytest.raises(
        ValueError,
        match=r"^observations of shape \(3,\) and dtype float64: expected float32 of shape \(4,\)",
    ):
        policy.predict(np.zeros(3), deterministic=True)


def test_a_users_agent_class_loads_once_trusted(trained, tmp_path):
    run = shutil.copytree(trained("dqn"), tmp_path / "run")
    for config_file in run.glob("checkpoints/*/config.json"):
        config = json.loads(config_file.read_text())
        config["agent"]["_target_"] = "tests.deploy.user_agent.MyDQN"
        config_file.write_text(json.dumps(config))
    with pytest.raises(ConfigError) as refused:
        load_policy(run)
    message = str(refused.value)
    assert "\n" not in message and "trust=[tests.deploy.user_agent.MyDQN]" in message
    policy = load_policy(run, trust=["tests.deploy.user_agent"])
    assert policy.agent_name == "MyDQN"
    assert policy.predict(np.zeros(4, np.float32), deterministic=True)[0] in (0, 1)


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["dqn", "sac"])
def test_an_async_runs_policy_loads_and_exports(tmp_path, agent):
    env = "env=pendulum" if agent == "sac" else "env=cartpole"
    train(make_config(tmp_path, *TINY, "trainer=async", "progress=false", f"agent={agent}", env))
    run = tmp_path / "run"
    policy = load_policy(run)
    assert policy.checkpoint == (run / "checkpoints" / "best").resolve()
    env_ = policy.make_env()
    obs, _ = env_.reset(seed=0)
    assert env_.action_space.contains(policy.predict(obs, deterministic=True)[0])
    env_.close()
    obs = sample_observations(policy.observation_space, 1000, seed=4)
    np.save(tmp_path / "obs.npy", obs)
    out = export_policy(run, "numpy", tmp_path / "exported")
    code = (
        f"sys.path.insert(0, {str(out)!r})\n"
        "import numpy as np, policy\n"
        "actions, values = policy.load().forward(np.load('obs.npy'))\n"
        "np.save('actions.npy', actions)\n"
    )
    done = run_isolated(code, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    got = np.load(tmp_path / "actions.npy")
    want = policy.predict(obs, deterministic=True)[0]
    if agent == "sac":
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    else:
        assert np.mean(got == want) > 0.998  # equal but for float32 ties
