"""Atari through ale-py: preprocessing, train-time vs eval-time envs, env restore, and the Ape-X-like
Pong experiment end to end (train, checkpoints, eval, resume) on a CI-sized budget."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from border_py.actors.sampler import Sampler, SampleStats
from border_py.agents.dqn import DQN
from border_py.envs.atari import AtariEnvFactory, FireOnReset
from border_py.errors import ConfigError
from border_py.evaluation.evaluator import Evaluator
from border_py.runs.checkpoint import load_checkpoint

from ..conftest import FEW_FRESH_EVALS, run_border, scalar_tags

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


FIRE = 1  # SpaceInvaders: a constant FIRE scores 5, 10, ..., 30 points per invader


def _always_fire(factory: AtariEnvFactory) -> DQN:
    """A DQN (Nature CNN) whose greedy action is FIRE whatever it sees."""
    agent = DQN(*factory.spaces(), hidden_sizes=[16], eps_start=0.0, eps_final=0.0)
    with torch.no_grad():
        last = agent.q[-1]
        last.weight.zero_()
        last.bias.zero_()
        last.bias[FIRE] = 1.0
    return agent


def test_observations_are_stacked_uint8_frames():
    factory = AtariEnvFactory("ALE/Pong-v5", repeat_action_probability=0.0)
    obs_space, action_space = factory.spaces()
    assert obs_space.shape == (4, 84, 84) and obs_space.dtype == np.uint8
    assert action_space.n == 6  # Pong's minimal action set (full_action_space=false)
    env = factory.make()
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    # FrameStackObservation's default padding: the first frame repeated
    assert all(np.array_equal(obs[i], obs[3]) for i in range(3))
    for _ in range(30):
        previous = obs
        obs, *_ = env.step(0)
    np.testing.assert_array_equal(obs[:3], previous[1:])  # oldest first, newest frame last
    env.close()


def test_evaluation_reports_game_scores_while_training_clips():
    factory = AtariEnvFactory(
        "ALE/SpaceInvaders-v5", repeat_action_probability=0.0, clip_rewards=True
    )
    agent = _always_fire(factory)
    evaluator = Evaluator(factory, n_episodes=1, seed=3, max_steps=200)
    result = evaluator.evaluate(agent)
    evaluator.close()
    # the same 200 steps in a training env: every reward is the sign of the game's reward
    env = factory.make(training=True)
    env.reset(seed=3)
    clipped = [env.step(FIRE)[1] for _ in range(200)]
    env.close()
    assert set(clipped) == {0.0, 1.0} and sum(clipped) >= 3
    assert result.return_mean % 5 == 0 and result.return_mean > sum(clipped)
    # training envs with clip_rewards=false report game scores too
    raw = AtariEnvFactory(
        "ALE/SpaceInvaders-v5", repeat_action_probability=0.0, clip_rewards=False
    ).make(training=True)
    raw.reset(seed=3)
    assert sum(raw.step(FIRE)[1] for _ in range(200)) == result.return_mean
    raw.close()


@pytest.mark.parametrize("sticky", [0.0, 0.25])
def test_a_checkpointed_atari_env_restores_by_replay(sticky):
    """Exact without sticky actions; with them (ALE's own RNG) a valid state, no crash."""
    factory = AtariEnvFactory("ALE/Breakout-v5", repeat_action_probability=sticky)
    agent = DQN(*factory.spaces(), hidden_sizes=[16], eps_start=1.0, eps_final=1.0)
    sampler = Sampler(factory, agent, n_envs=1, seed=0, replayable=True)
    stats = SampleStats()
    while not stats.episode_returns:  # past one automatic reset: an unseeded episode start
        sampler.step(stats)
    for _ in range(60):
        sampler.step(stats)
    state = sampler.state()
    assert "rng" in state["env"]["episodes"][0]["start"]
    other = Sampler(factory, agent, n_envs=1, seed=99, replayable=True)
    other.restore(state)
    same = np.array_equal(other.env.obs, sampler.env.obs)
    if sticky == 0.0:
        assert same
        for _ in range(50):
            action = np.array([int(agent.rng.integers(4))])
            a, b = sampler.env.step(action), other.env.step(action)
            np.testing.assert_array_equal(a.next_obs, b.next_obs)
    else:
        assert other.env.obs.shape == (1, 4, 84, 84)
        other.step(SampleStats())
    sampler.close()
    other.close()


def test_bad_atari_settings_are_one_line():
    with pytest.raises(ConfigError, match=r"^id='CartPole-v1': must be an ALE id"):
        AtariEnvFactory("CartPole-v1")
    with pytest.raises(ConfigError, match=r"^repeat_action_probability=2"):
        AtariEnvFactory("ALE/Pong-v5", repeat_action_probability=2)
    with pytest.raises(ConfigError, match=r"^kwargs.frameskip="):
        AtariEnvFactory("ALE/Pong-v5", kwargs={"frameskip": 4})
    with pytest.raises(ConfigError, match=r"not a registered gymnasium id"):
        AtariEnvFactory("ALE/Pongg-v5")


def _wrappers(env) -> list[type]:
    """The wrapper classes of ``env``, outermost first."""
    found = []
    while hasattr(env, "env"):
        found.append(type(env))
        env = env.env
    return found


def test_fire_on_reset_presses_fire_once_after_each_reset():
    settings = {"repeat_action_probability": 0.0, "noop_max": 0}
    fire = AtariEnvFactory("ALE/Pong-v5", **settings).make()  # fire_reset=auto: Pong has FIRE
    plain = AtariEnvFactory("ALE/Pong-v5", fire_reset=False, **settings).make()
    assert FireOnReset in _wrappers(fire) and FireOnReset not in _wrappers(plain)
    for seed in (0, 1):
        obs, info = fire.reset(seed=seed)
        first, _ = plain.reset(seed=seed)
        pressed, *_ = plain.step(FIRE)  # FIRE is action 1 in Pong's minimal set too
        np.testing.assert_array_equal(obs[-1], pressed[-1])  # the newest frame: after FIRE
        assert not np.array_equal(obs[-1], first[-1])
        assert info["episode_frame_number"] == 4  # one agent step of 4 frames
        for _ in range(30):  # from there on the two envs are the same game
            a, b = fire.step(3), plain.step(3)
            np.testing.assert_array_equal(a[0][-1], b[0][-1])
    fire.close()
    plain.close()


def test_fire_reset_auto_skips_games_without_fire_and_true_requires_it():
    freeway = AtariEnvFactory("ALE/Freeway-v5")  # NOOP, UP, DOWN
    env = freeway.make()
    assert FireOnReset not in _wrappers(env)
    env.close()
    with pytest.raises(ConfigError, match=r"fire_reset=true: ALE/Freeway-v5 has no FIRE action"):
        AtariEnvFactory("ALE/Freeway-v5", fire_reset=True).spaces()
    with pytest.raises(ConfigError, match=r"^fire_reset='yes': must be auto, true or false$"):
        AtariEnvFactory("ALE/Pong-v5", fire_reset="yes")


def test_atari_evaluates_with_dopamines_epsilon_by_default():
    factory = AtariEnvFactory("ALE/Pong-v5")
    assert factory.eval_epsilon == 0.001
    agent = DQN(*factory.spaces(), hidden_sizes=[16])
    evaluator = Evaluator(factory, 1, seed=0, max_steps=20, epsilon=factory.eval_epsilon)
    assert evaluator.evaluate(agent).length_mean == 20
    evaluator.close()


CI_SIZED = [
    "experiment=dqn_pong_async",
    "actor_manager.n_actors=2",
    "actor_manager.n_envs_per_actor=1",
    "actor_manager.n_buffer=20",
    "replay_buffer.capacity=2000",
    "agent.batch_size=8",
    "trainer.warmup_period=200",
    "trainer.replay_ratio=1",  # 8 new samples per opt step of batch 8
    "trainer.record_interval=10",
    "trainer.eval_interval=20",
    "trainer.eval_episodes=1",
    "trainer.eval_max_steps=100",
    "trainer.save_interval=20",
    "trainer.sync_interval=10",
    FEW_FRESH_EVALS,
]


@pytest.mark.slow
def test_dqn_pong_async_runs_end_to_end_and_resumes(tmp_path):
    run_dir = tmp_path / "run"
    out = run_border(
        ["train", *CI_SIZED, "trainer.max_opts=40", f"run_dir={run_dir}"], tmp_path, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    tags = scalar_tags(run_dir)
    assert {
        "eval/return_mean",
        "train/loss",
        "train/q_mean",
        "train/epsilon",
        "perf/samples_per_sec",
        "buffer/size",
    } <= set(tags)
    assert [s for s, _ in tags["train/loss"]] == [10, 20, 30, 40]
    assert [s for s, _ in tags["eval/return_mean"]] == [20, 40]
    # Pong scores lie in [-21, 21]; 100 steps are too short to lose more than a few points
    assert all(-21 <= v <= 0 for _, v in tags["eval/return_mean"])
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert checkpoints == ["000000020", "000000040", "best"]
    policy = torch.load(run_dir / "checkpoints" / "best" / "policy.pt", weights_only=True)
    assert policy["0.conv.0.weight"].shape == (32, 4, 8, 8)  # Nature CNN, 4 stacked frames
    assert policy["1.value.0.weight"].shape == (512, 3136)  # dueling streams of 512
    assert policy["1.advantage.2.weight"].shape == (6, 512)
    meta = json.loads((run_dir / "checkpoints" / "000000040" / "meta.json").read_text())
    assert meta["spaces"]["observation_space"] == "Box(0, 255, (4, 84, 84), uint8)"

    out = run_border(["train", f"resume={run_dir}", "trainer.max_opts=60"], tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    ckpt = load_checkpoint(run_dir)  # a resumed run continues in its own run dir
    assert ckpt.state.opt_steps == 60
    assert ckpt.state.env_steps > meta["env_steps"]
    steps = [s for s, _ in scalar_tags(run_dir)["train/loss"]]
    assert steps == [10, 20, 30, 40, 50, 60]  # TensorBoard continued, no step twice

    out = run_border(["eval", str(run_dir), "eval.n_episodes=1", "eval.max_steps=50"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    (written,) = (run_dir / "checkpoints" / "best").glob("eval_*.json")
    record = json.loads(written.read_text())
    assert record["env"]["id"] == "ALE/Pong-v5" and len(record["episode_returns"]) == 1
