"""SAC: the maths on hand-checked numbers, acting, checkpoints, resume, eval, configs, learning."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py import train
from border_py.agents.continuous import correlated_noise, squashed_log_prob
from border_py.agents.sac import SAC, soft_targets, temperature_loss
from border_py.cli.train import check_overrides
from border_py.errors import ConfigError
from border_py.runs.checkpoint import load_checkpoint
from border_py.transitions import Transitions

from ..conftest import FEW_FRESH_EVALS, make_config, run_border, scalar_tags

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 10.0], np.float32))


def _agent(**kwargs) -> SAC:
    return SAC(OBS, ACT, **({"hidden_sizes": [16], "batch_size": 4, "random_steps": 0} | kwargs))


def _batch(n: int = 4, seed: int = 0, discount: float = 0.99) -> Transitions:
    rng = np.random.default_rng(seed)
    return Transitions(
        rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        rng.uniform(ACT.low, ACT.high, (n, 2)).astype(np.float32),
        rng.normal(size=n).astype(np.float32),
        rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        np.full(n, discount, np.float32),
    )


# -- maths -------------------------------------------------------------------------------


def test_squashed_log_prob_matches_a_hand_computation():
    mean, std, u = 0.3, 0.5, 0.7
    # log N(u; mean, std) - log(1 - tanh(u)^2), written out
    gaussian = -0.5 * ((u - mean) / std) ** 2 - math.log(std) - 0.5 * math.log(2 * math.pi)
    expected = gaussian - math.log(1 - math.tanh(u) ** 2)
    got = squashed_log_prob(
        torch.tensor([[u]]), torch.tensor([[mean]]), torch.tensor([[math.log(std)]])
    )
    assert got.shape == (1,)
    assert float(got[0]) == pytest.approx(expected, rel=1e-6)
    # dims add up; torch's own tanh-transformed Normal agrees (an independent reference)
    u2, mean2, log_std2 = (
        torch.tensor([[0.7, -1.5]]),
        torch.tensor([[0.3, -1.0]]),
        torch.tensor([[math.log(0.5), 0.2]]),
    )
    reference = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean2, log_std2.exp()),
        [torch.distributions.transforms.TanhTransform()],
    ).log_prob(torch.tanh(u2))
    assert float(squashed_log_prob(u2, mean2, log_std2)[0]) == pytest.approx(
        float(reference.sum()), rel=1e-5
    )


def test_squashed_log_prob_stays_finite_where_tanh_rounds_to_one():
    u = torch.tensor([[20.0]])  # tanh(20) == 1.0 in float32: the naive log(1 - tanh^2) is -inf
    got = float(squashed_log_prob(u, torch.tensor([[19.0]]), torch.tensor([[0.0]]))[0])
    # log(1 - tanh(u)^2) = log(4) - 2u - 2 log(1 + exp(-2u)) -> log 4 - 40
    expected = -0.5 - 0.5 * math.log(2 * math.pi) - (math.log(4) - 40)
    assert got == pytest.approx(expected, rel=1e-6)


def test_soft_targets_by_hand():
    reward = torch.tensor([1.0, 2.0])
    discount = torch.tensor([0.99, 0.0])  # the second transition ended in a terminal state
    next_q = torch.tensor([[3.0, 4.0], [5.0, 1.0]])  # (n_critics, B): min over critics = [3, 1]
    next_log_prob = torch.tensor([-1.0, 0.5])
    target = soft_targets(reward, discount, next_q, next_log_prob, alpha=0.2)
    assert target.tolist() == pytest.approx([1 + 0.99 * (3 - 0.2 * -1.0), 2.0])


def test_the_critic_loss_is_the_hand_computed_soft_td_loss():
    agent = _agent()
    batch = _batch(discount=0.9)
    generator_state = agent.generator.get_state()
    with torch.no_grad():
        obs, next_obs = torch.tensor(batch.obs), torch.tensor(batch.next_obs)
        action = (torch.tensor(batch.action) - torch.tensor(agent.center)) / torch.tensor(
            agent.scale
        )
        next_action, next_log_prob = agent.sample(next_obs)  # the draw update() will make
        next_q = agent.critic_targets(next_obs, next_action)
        y = torch.tensor(batch.reward) + 0.9 * (next_q.min(0).values - 1.0 * next_log_prob)
        q = agent.critics(obs, action)
        expected = sum(0.5 * ((q[i] - y) ** 2).mean() for i in range(2))
    agent.generator.set_state(generator_state)
    metrics = agent.update(batch)
    assert float(metrics["train/critic_loss"]) == pytest.approx(float(expected), rel=1e-5)
    assert float(metrics["train/q_mean"]) == pytest.approx(float(q.mean()), rel=1e-5)
    assert set(metrics) == {
        "train/critic_loss",
        "train/actor_loss",
        "train/alpha",
        "train/alpha_loss",
        "train/entropy",
        "train/q_mean",
    }


def test_alpha_rises_below_the_target_entropy_and_falls_above():
    log_prob = torch.tensor([1.0, 2.0])  # entropy estimate -mean(log pi) = -1.5
    for target_entropy, rises in ((0.0, True), (-3.0, False)):
        log_alpha = torch.zeros((), requires_grad=True)
        temperature_loss(log_alpha, log_prob, target_entropy).backward()
        # d/d log_alpha = -mean(log pi + target) = entropy - target
        assert float(log_alpha.grad) == pytest.approx(-1.5 - target_entropy)
        assert (float(log_alpha.grad) < 0) == rises  # gradient descent moves against the gradient
    for target_entropy, rises in ((50.0, True), (-50.0, False)):  # the same through update()
        agent = _agent(target_entropy=target_entropy)
        metrics = agent.update(_batch())
        assert (float(metrics["train/alpha"]) > 1.0) == rises


def test_fixed_alpha_has_no_optimizer_and_does_not_move():
    agent = _agent(alpha=0.2, learn_alpha=False)
    for _ in range(3):
        metrics = agent.update(_batch())
    assert float(metrics["train/alpha"]) == pytest.approx(0.2)
    assert "train/alpha_loss" not in metrics and set(agent.optimizers) == {"actor", "critic"}


def test_target_critics_follow_by_polyak_averaging():
    agent = _agent(tau=0.25)
    before = [p.clone() for p in agent.critic_targets.parameters()]
    agent.update(_batch())
    for old, target, online in zip(
        before, agent.critic_targets.parameters(), agent.critics.parameters(), strict=True
    ):
        torch.testing.assert_close(target, 0.25 * online + 0.75 * old)
        assert not torch.equal(target, online)


def test_critics_are_independent_networks():
    agent = _agent(n_critics=3)
    obs, action = torch.zeros(5, 3), torch.zeros(5, 2)
    q = agent.critics(obs, action)
    assert q.shape == (3, 5)
    assert len(set(q[:, 0].tolist())) == 3  # different initializations


# -- acting ------------------------------------------------------------------------------


def test_actions_are_float32_and_scaled_to_the_bounds():
    agent = _agent()
    np.testing.assert_allclose(
        agent.to_env(np.array([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]])),
        [[-2.0, 0.0], [2.0, 10.0], [0.0, 5.0]],
    )
    obs = np.random.default_rng(0).uniform(-1, 1, (64, 3)).astype(np.float32)
    for explore in (False, True):
        action = agent.act(obs, explore)
        assert action.dtype == np.float32 and action.shape == (64, 2)
        assert np.all(action >= ACT.low) and np.all(action <= ACT.high)
    greedy = agent.act(obs, explore=False)
    with torch.no_grad():
        mean, _ = agent.policy(torch.tensor(obs))
    np.testing.assert_allclose(greedy, agent.to_env(np.tanh(mean.numpy())), rtol=1e-6, atol=1e-6)
    assert np.array_equal(greedy, agent.act(obs, explore=False))  # greedy: deterministic
    assert agent.env_steps == 64  # only exploring steps count


def _near_deterministic(agent: SAC) -> SAC:
    """Make the policy output mean 0, std e^-10 whatever the observation: actions at the center."""
    last = agent.policy.body[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor([0.0, 0.0, -10.0, -10.0]))
    return agent


def test_random_steps_are_uniform_then_the_policy_acts_and_resume_continues():
    agent = _near_deterministic(_agent(random_steps=2000))
    obs = np.zeros((1000, 3), np.float32)
    random = agent.act(obs, explore=True)
    assert agent.env_steps == 1000
    for dim in range(2):  # uniform over each dimension's range, whatever the policy says
        hist, _ = np.histogram(random[:, dim], bins=4, range=(ACT.low[dim], ACT.high[dim]))
        assert hist.min() > 180, hist
    assert agent.act(obs, explore=True).std(axis=0).min() > 1  # env steps 1000..1999: random
    policy = agent.act(obs, explore=True)  # from env step 2000 on: the policy's samples
    np.testing.assert_allclose(policy, np.tile([0.0, 5.0], (1000, 1)), atol=5e-3)
    resumed = _near_deterministic(_agent(random_steps=2000))
    resumed.set_exploration_step(agent.env_steps)  # a resumed actor: past its random steps
    np.testing.assert_allclose(resumed.act(obs, explore=True), policy, atol=5e-3)


def test_correlated_noise_by_hand():
    previous, xi = np.array([1.0, -2.0], np.float32), np.array([0.5, 1.0], np.float32)
    # rho * previous + sqrt(1 - rho^2) * xi with rho 0.6: sqrt(1 - 0.36) = 0.8
    np.testing.assert_allclose(correlated_noise(previous, 0.6, xi), [1.0, -0.4], rtol=1e-6)
    np.testing.assert_array_equal(correlated_noise(previous, 0.0, xi), xi)


def _known_std(agent: SAC, std: float) -> SAC:
    """Policy mean 0 and std ``std`` whatever the observation: u = std * eps."""
    last = agent.policy.body[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor([0.0, 0.0, math.log(std), math.log(std)]))
    return agent


def _eps_of(agent: SAC, action: np.ndarray, std: float) -> np.ndarray:
    """The standard normal noise behind exploring actions of a mean-0 policy."""
    return np.arctanh((action - agent.center) / agent.scale) / std


def test_exploring_noise_is_white_or_ar1_with_the_policy_std():
    std, obs = 0.1, np.zeros((2, 3), np.float32)
    white = _known_std(_agent(seed=3), std)
    xi = np.random.default_rng(3).standard_normal((3, 2, 2), dtype=np.float32)
    for t in range(3):  # rho 0: the paper's white policy noise, fresh every step
        np.testing.assert_allclose(_eps_of(white, white.act(obs, True), std), xi[t], atol=1e-3)
    red = _known_std(_agent(seed=3, noise_correlation=0.9), std)
    eps = xi[0]  # the first step starts each env's process from N(0, 1)
    for t in range(3):
        if t > 0:
            eps = (
                0.9 * eps + math.sqrt(1 - 0.81) * xi[t]
            )  # eps_t = rho eps_{t-1} + sqrt(1-rho^2) xi_t
        np.testing.assert_allclose(_eps_of(red, red.act(obs, True), std), eps, atol=1e-3)
    # a long run of one env: N(0, 1) marginals, lag-1 correlation rho
    long = _known_std(_agent(seed=4, noise_correlation=0.9), std)
    one = np.zeros((1, 3), np.float32)
    series = np.stack([_eps_of(long, long.act(one, True), std)[0] for _ in range(20000)])
    assert series.var(axis=0) == pytest.approx([1.0, 1.0], abs=0.15)
    lag1 = [np.corrcoef(series[:-1, d], series[1:, d])[0, 1] for d in range(2)]
    assert lag1 == pytest.approx([0.9, 0.9], abs=0.02)
    greedy = long.act(one, explore=False)  # evaluation stays greedy: tanh(mean)
    np.testing.assert_allclose(greedy, long.to_env(np.zeros((1, 2))), atol=1e-6)


def test_correlated_noise_survives_a_checkpoint_and_bad_values_fail_in_one_line(tmp_path):
    agent = _agent(noise_correlation=0.95)
    obs = np.zeros((2, 3), np.float32)
    agent.act(obs, explore=True)
    torch.save(agent.state_dict(), tmp_path / "agent.pt")
    copy = _agent(seed=9, noise_correlation=0.95)
    copy.load_state_dict(torch.load(tmp_path / "agent.pt", weights_only=True))
    for _ in range(3):
        np.testing.assert_array_equal(agent.act(obs, explore=True), copy.act(obs, explore=True))
    for bad in (1.0, -0.1, "red"):
        with pytest.raises(ConfigError) as err:
            _agent(noise_correlation=bad)
        assert (
            str(err.value)
            == f"noise_correlation={bad!r}: must be in [0, 1) (0: white policy noise)"
        )


def test_sac_refuses_n_step_returns():
    """An n-step target would need -alpha log pi of each intermediate state: refused, not dropped."""
    with pytest.raises(ConfigError) as err:
        _agent(n_step=3)
    assert str(err.value) == (
        "n_step=3: must be 1 for SAC (n-step returns would drop the entropy terms of the"
        " intermediate states)"
    )
    assert _agent(n_step=1).n_step == 1


def test_sac_refuses_discrete_or_unbounded_action_spaces():
    with pytest.raises(ConfigError, match="needs a continuous"):
        SAC(OBS, gym.spaces.Discrete(2))
    with pytest.raises(ConfigError, match="finite bounds"):
        SAC(OBS, gym.spaces.Box(-np.inf, np.inf, (2,)))


# -- state --------------------------------------------------------------------------------


def test_state_round_trips_through_weights_only_files_and_continues_identically(tmp_path):
    agent = _agent()
    for seed in range(3):
        agent.update(_batch(seed=seed))
    agent.act(np.zeros((2, 3), np.float32), explore=True)
    torch.save(agent.state_dict(), tmp_path / "agent.pt")
    torch.save(agent.policy_state(), tmp_path / "policy.pt")
    copy = _agent(seed=123)
    copy.load_state_dict(torch.load(tmp_path / "agent.pt", weights_only=True))
    policy = torch.load(tmp_path / "policy.pt", weights_only=True)
    assert set(policy) == set(agent.policy.state_dict())  # the policy alone: what actors get
    obs = np.random.default_rng(1).uniform(-1, 1, (4, 3)).astype(np.float32)
    np.testing.assert_array_equal(agent.act(obs, explore=True), copy.act(obs, explore=True))
    for seed in range(3, 6):
        a, b = agent.update(_batch(seed=seed)), copy.update(_batch(seed=seed))
        assert {k: float(v) for k, v in a.items()} == {k: float(v) for k, v in b.items()}
    actor = _agent(seed=7)
    actor.load_policy_state(policy)
    actor.act(obs, explore=True)
    assert not any(opt.state for opt in actor.optimizers.values())  # acting allocates no moments


# -- configs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["agent=sac", "env=cartpole"],
            "agent._target_: SAC needs a continuous (Box) action space",
        ),
        (
            ["agent=sac", "env=pendulum", "actor_manager.exploration=apex"],
            "actor_manager.exploration='apex': the agent has no set_epsilon",
        ),
        (["agent=sac", "env=pendulum", "agent.tau=0"], "agent.tau=0: must be in (0, 1]"),
        (
            ["agent=sac", "env=pendulum", "agent.actor_lr=-1"],
            "agent.actor_lr=-1: must be a positive",
        ),
        (["agent=sac", "env=pendulum", "agent.alpha=0"], "agent.alpha=0: must be a positive float"),
        (
            ["agent=sac", "env=pendulum", "agent.n_critics=0"],
            "agent.n_critics=0: must be a positive int",
        ),
        (
            ["agent=sac", "env=pendulum", "agent.target_entropy=abc"],
            "agent.target_entropy='abc': must be null or a number",
        ),
        (
            ["agent=sac", "env=pendulum", "agent.learn_alpha=maybe"],
            "agent.learn_alpha='maybe': must be true or false",
        ),
        (
            ["agent=sac", "env=pendulum", "agent.random_steps=-1"],
            "agent.random_steps=-1: must be a non-negative int",
        ),
        (["agent=sac", "env=pendulum", "agent.lr=1e-3"], "agent.lr: unknown key 'lr' in agent"),
        (["agent=sac", "env=pendulum", "agent.n_step=3"], "agent.n_step=3: must be 1 for SAC"),
    ],
)
def test_bad_sac_settings_fail_with_one_line(overrides, expected):
    with pytest.raises(ConfigError) as err:
        check_overrides(overrides)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_the_pendulum_recipe_sets_one_replay_ratio_for_both_trainers(tmp_path):
    serial = make_config(tmp_path, "experiment=sac_pendulum", "trainer=serial")
    assert serial.trainer.replay_ratio == 256 and serial.agent._target_.endswith("SAC")
    assert serial.trainer.opt_interval is None  # one opt step (batch 256) per env step
    default = make_config(tmp_path, "experiment=sac_pendulum")
    assert default.trainer.replay_ratio == 256 and default.agent.batch_size == 256
    assert default.env.id == "Pendulum-v1" and default.trainer.target_return == -200
    check_overrides(["experiment=sac_pendulum", "trainer=serial"])  # validates


# -- runs ---------------------------------------------------------------------------------

SERIAL = [
    "agent=sac",
    "env=pendulum",
    "trainer=serial",
    "trainer.replay_ratio=null",
    "trainer.opt_interval=1",
    "trainer.warmup_period=200",
    "trainer.eval_interval=150",
    "trainer.eval_episodes=2",
    "trainer.record_interval=50",
    "trainer.save_interval=150",
    "trainer.save_replay_buffer=true",
    "agent.hidden_sizes=[32]",
    "agent.batch_size=64",
    "agent.random_steps=100",
    FEW_FRESH_EVALS,
]


@pytest.mark.slow
def test_serial_sac_resume_is_exact(tmp_path):
    full = tmp_path / "full"
    train(make_config(full, *SERIAL, "trainer.max_opts=450"))
    part = tmp_path / "part"
    train(make_config(part, *SERIAL, "trainer.max_opts=300"))
    saved = load_checkpoint(part / "run")
    assert set(saved.agent_state) >= {"policy", "critics", "critic_targets", "log_alpha"}
    resumed = train(
        make_config(part, "resume=" + str(part / "run")), overrides=["trainer.max_opts=450"]
    )
    assert resumed["opt_steps"] == 450
    tags = (
        "train/critic_loss",
        "train/actor_loss",
        "train/alpha",
        "train/entropy",
        "eval/return_mean",
    )
    for tag in tags:
        a, b = scalar_tags(full / "run")[tag], scalar_tags(part / "run")[tag]
        assert [s for s, _ in a] == [s for s, _ in b], tag  # same steps, none twice
        np.testing.assert_array_equal([v for _, v in a], [v for _, v in b], err_msg=tag)


@pytest.mark.slow
def test_border_eval_plays_a_sac_policy(tmp_path):
    train(make_config(tmp_path, *SERIAL, "trainer.max_opts=150"))
    out = run_border(["eval", str(tmp_path / "run"), "eval.n_episodes=3", "eval.seed=5"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Pendulum-v1" in out.stdout
    (written,) = (tmp_path / "run" / "checkpoints" / "best").glob("eval_*.json")
    record = json.loads(written.read_text())
    assert len(record["episode_returns"]) == 3
    assert all(
        -2000 < r < 0 for r in record["episode_returns"]
    )  # Pendulum's reward is in [-16.3, 0]
    assert record["result"]["eval/length_mean"] == 200


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["serial", "async"])
def test_sac_learns_pendulum_with_the_shipped_recipe(tmp_path, trainer):
    """Seeds 0-2 reach -200 within 3.5k-4k env steps (both trainers); the budget allows 6k."""
    cfg = make_config(
        tmp_path,
        "experiment=sac_pendulum",
        f"trainer={trainer}",
        "trainer.max_opts=5000",
        FEW_FRESH_EVALS,
    )
    summary = train(cfg)
    assert summary["best_return"] >= -200, summary  # a random policy scores about -1200
    assert summary["solved_at"] is not None and summary["solved_at"]["env_steps"] <= 6000
    tags = scalar_tags(tmp_path / "run")
    alpha = [v for _, v in tags["train/alpha"]]
    assert alpha[-1] < 0.5  # the temperature was tuned down from 1.0
    entropy = [v for _, v in tags["train/entropy"]]
    assert entropy[-1] < entropy[0]  # the policy became more deterministic as it learned


@pytest.mark.slow
def test_async_sac_on_halfcheetah_runs_logs_and_checkpoints(tmp_path):
    pytest.importorskip("mujoco", reason="the [mujoco] extra (mujoco) is not installed")
    cfg = make_config(
        tmp_path,
        "experiment=sac_halfcheetah",
        "agent.hidden_sizes=[64,64]",
        "agent.random_steps=200",
        "actor_manager.n_actors=2",
        "trainer.max_opts=300",
        "trainer.warmup_period=400",
        "trainer.eval_interval=150",
        "trainer.eval_episodes=1",
        "env.max_episode_steps=100",  # episodes end within the smoke run's env steps
        "trainer.record_interval=50",
        "trainer.save_interval=150",
        FEW_FRESH_EVALS,
    )
    summary = train(cfg)
    assert summary["opt_steps"] == 300 and summary["restarts"] == 0
    assert summary["samples"] >= 400 + 300  # one sample per opt step after the warmup
    tags = scalar_tags(tmp_path / "run")
    for tag in (
        "train/critic_loss",
        "train/actor_loss",
        "train/alpha",
        "train/alpha_loss",
        "train/entropy",
        "train/q_mean",
        "actor/episode_return",
        "perf/samples_per_sec",
        "eval/return_mean",
    ):
        assert tag in tags, tag
    assert [s for s, _ in tags["eval/return_mean"]] == [150, 300]
    root = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["000000150", "000000300", "best"]
    policy = torch.load(root / "best" / "policy.pt", weights_only=True)
    assert policy["body.1.weight"].shape == (64, 17) and policy["body.5.weight"].shape == (12, 64)
    assert load_checkpoint(root / "000000300").agent_state["opt_steps"] == 300
