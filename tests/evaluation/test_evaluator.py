"""evaluation/evaluator.py: greedy or epsilon-greedy evaluation episodes, a function of the weights
and the seed; the env's default evaluation epsilon; ``border eval``'s ``eval.epsilon``; a stop
callable that ends an evaluation within a step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from border_py import train
from border_py.agents.dqn import DQN
from border_py.cli.eval import evaluate_checkpoint
from border_py.envs.factory import GymEnvFactory
from border_py.errors import ConfigError
from border_py.evaluation.evaluator import EvaluationStopped, Evaluator
from border_py.evaluation.service import InlineEvaluation

from ..conftest import make_config

CARTPOLE = GymEnvFactory("CartPole-v1")


class CountingDQN(DQN):
    """A DQN that counts its act calls."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        self.calls += 1
        return super().act(obs, explore)


def _evaluate(epsilon: float, seed: int = 7, agent: DQN | None = None) -> list[float]:
    evaluator = Evaluator(CARTPOLE, n_episodes=3, seed=seed, max_steps=200, epsilon=epsilon)
    try:
        return evaluator.evaluate(
            agent or DQN(*CARTPOLE.spaces(), hidden_sizes=[8])
        ).episode_returns
    finally:
        evaluator.close()


def test_epsilon_one_never_asks_the_agent_and_is_seeded():
    agent = CountingDQN(*CARTPOLE.spaces(), hidden_sizes=[8])
    first = _evaluate(1.0, agent=agent)
    assert agent.calls == 0
    assert _evaluate(1.0) == first  # the same seed: the same random episodes
    assert _evaluate(1.0, seed=8) != first


def test_epsilon_draws_come_from_the_episode_seeds():
    agent = CountingDQN(*CARTPOLE.spaces(), hidden_sizes=[8], seed=3)
    got = _evaluate(0.5, agent=agent)
    # by hand: episode i resets with seed + i and draws from default_rng((seed, i))
    env, expected, greedy_calls = CARTPOLE.make(), [], 0
    for i in range(3):
        obs, _ = env.reset(seed=7 + i)
        rng = np.random.default_rng((7, i))
        total = 0.0
        for _ in range(200):
            if rng.random() < 0.5:
                action = rng.integers(2)
            else:
                action = agent.act(obs[None], explore=False)[0]
                greedy_calls += 1
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        expected.append(total)
    env.close()
    assert got == expected
    assert agent.calls == 2 * greedy_calls  # the evaluator's greedy steps, then the test's
    assert 0 < greedy_calls < sum(expected)  # some steps random, some greedy


def test_epsilon_zero_is_the_greedy_evaluation():
    agent = CountingDQN(*CARTPOLE.spaces(), hidden_sizes=[8])
    returns = _evaluate(0.0, agent=agent)
    assert agent.calls == sum(returns)  # CartPole: +1 per step, one act per step


def test_bad_epsilons_are_one_line():
    with pytest.raises(ConfigError, match=r"^epsilon=1.5: must be in \[0, 1\]$"):
        Evaluator(CARTPOLE, 1, 0, 10, epsilon=1.5)
    with pytest.raises(ConfigError) as err:
        Evaluator(GymEnvFactory("Pendulum-v1"), 1, 0, 10, epsilon=0.1)
    assert str(err.value) == (
        "epsilon=0.1: random evaluation actions need a Discrete action space, the env has"
        " Box(-2.0, 2.0, (1,), float32) (use 0)"
    )
    Evaluator(GymEnvFactory("Pendulum-v1"), 1, 0, 10, epsilon=0.0).close()
    assert CARTPOLE.eval_epsilon == 0.0  # greedy unless the env's protocol says otherwise


@pytest.mark.slow
def test_border_eval_takes_eval_epsilon(tmp_path):
    train(
        make_config(
            tmp_path,
            "trainer=serial",
            "trainer.max_opts=20",
            "trainer.warmup_period=100",
            "trainer.eval_interval=20",
            "trainer.eval_episodes=1",
            "trainer.save_interval=20",
        )
    )
    run = str(tmp_path / "run")
    *_, default = evaluate_checkpoint(run, ["eval.n_episodes=2"])
    assert default["eval"]["epsilon"] == 0.0  # CartPole's default
    *_, record = evaluate_checkpoint(run, ["eval.n_episodes=2", "eval.epsilon=1", "eval.seed=3"])
    assert record["eval"]["epsilon"] == 1
    assert record["episode_returns"] == _evaluate_seeded_random(3)
    with pytest.raises(ConfigError, match=r"^eval.epsilon=2: must be in \[0, 1\]$"):
        evaluate_checkpoint(run, ["eval.epsilon=2"])


def _evaluate_seeded_random(seed: int) -> list[float]:
    """Two episodes of uniformly random actions, as an evaluation with epsilon 1 plays them."""
    evaluator = Evaluator(CARTPOLE, n_episodes=2, seed=seed, max_steps=10000, epsilon=1.0)
    try:
        return evaluator.evaluate(DQN(*CARTPOLE.spaces(), hidden_sizes=[8])).episode_returns
    finally:
        evaluator.close()


def test_seeds_given_to_evaluate_are_the_episodes_reset_seeds_and_are_recorded():
    agent = DQN(*CARTPOLE.spaces(), hidden_sizes=[8], seed=3)
    evaluator = Evaluator(CARTPOLE, n_episodes=3, seed=7, max_steps=200, epsilon=0.5)
    try:
        own = evaluator.evaluate(agent)
        assert own.seeds == range(7, 10)
        given = evaluator.evaluate(agent, range(7, 9))
        assert given.seeds == range(7, 9) and given.episode_returns == own.episode_returns[:2]
        other = evaluator.evaluate(agent, range(50, 52))
        assert other.seeds == range(50, 52) and len(other.episode_returns) == 2
    finally:
        evaluator.close()


def test_inline_evaluation_on_given_seeds_plays_the_given_weights_then_restores_the_agents():
    learner = DQN(*CARTPOLE.spaces(), hidden_sizes=[8], seed=3)
    other = DQN(*CARTPOLE.spaces(), hidden_sizes=[8], seed=4).policy_state()
    own = {k: v.clone() for k, v in learner.policy_state().items()}
    seeds = range(100, 103)
    alone = Evaluator(CARTPOLE, n_episodes=3, seed=100, max_steps=200)
    service = InlineEvaluation(Evaluator(CARTPOLE, n_episodes=2, seed=7, max_steps=200), learner)
    try:
        expected = alone.evaluate(DQN(*CARTPOLE.spaces(), hidden_sizes=[8], seed=4))
        assert service.request(5, 50, other, lambda: ({}, None), seeds)
        (outcome,) = service.poll()
        assert outcome.result.episode_returns == expected.episode_returns  # the other weights
        assert outcome.result.seeds == seeds
        for key, value in learner.policy_state().items():  # the learner's own weights are back
            assert torch.equal(value, own[key]), key
        mine = alone.evaluate(learner).episode_returns
        assert mine != expected.episode_returns  # the two policies play these episodes apart
    finally:
        service.close()
        alone.close()


def _stop_after(calls: int):
    """A stop callable that returns True from its ``calls + 1``-th call on."""
    asked = iter(range(1_000_000))
    return lambda: next(asked) >= calls


def test_a_stop_ends_the_evaluation_within_a_step_even_mid_episode():
    agent = CountingDQN(*CARTPOLE.spaces(), hidden_sizes=[8], seed=3)
    evaluator = Evaluator(CARTPOLE, n_episodes=3, seed=7, max_steps=200)
    try:
        whole = evaluator.evaluate(agent)
        first = int(whole.episode_returns[0])  # CartPole: one reward a step
        assert first > 5 and agent.calls == sum(whole.episode_returns)
        for steps, played in ((5, 0), (first + 3, 1)):  # in the first episode; in the second
            agent.calls = 0
            with pytest.raises(EvaluationStopped) as stopped:
                evaluator.evaluate(agent, stop=_stop_after(steps))
            assert agent.calls == steps  # not one step more
            assert (stopped.value.played, stopped.value.episodes) == (played, 3)
            assert str(stopped.value) == f"stopped after {played} of 3 episodes"
        agent.calls = 0
        assert evaluator.evaluate(agent, stop=lambda: False) == whole  # a stop that never comes
    finally:
        evaluator.close()


@pytest.mark.parametrize("seeds", [None, range(100, 103)], ids=["selection", "given seeds"])
def test_inline_evaluation_stopped_gives_no_outcome_and_restores_the_agents_weights(seeds):
    learner = CountingDQN(*CARTPOLE.spaces(), hidden_sizes=[8], seed=3)
    other = DQN(*CARTPOLE.spaces(), hidden_sizes=[8], seed=4).policy_state()
    own = {k: v.clone() for k, v in learner.policy_state().items()}
    service = InlineEvaluation(Evaluator(CARTPOLE, n_episodes=3, seed=7, max_steps=200), learner)
    try:
        assert service.request(5, 50, other, lambda: ({}, None), seeds, _stop_after(4))
        assert learner.calls == 4
        assert service.poll() == []  # nothing measured: no outcome
        for key, value in learner.policy_state().items():
            assert torch.equal(value, own[key]), key
        assert service.request(6, 60, other, lambda: ({}, None), seeds, lambda: False)
        (outcome,) = service.poll()  # the next one plays whole
        assert outcome.opt_steps == 6 and len(outcome.result.episode_returns) == 3
    finally:
        service.close()
