"""agents/contract.py: the first actions an agent's ``act`` returns are checked against the env's
action space (shape, dtype, range), in the sampler (actors, the serial trainer) and in the
evaluator; a violation is one line naming the agent's class; later calls are not checked."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from border_py.actors.sampler import Sampler, SampleStats
from border_py.agents.contract import AgentContractError, check_actions, failure_report
from border_py.agents.dqn import DQN
from border_py.envs.factory import GymEnvFactory
from border_py.errors import RunError
from border_py.evaluation.evaluator import Evaluator

TWO = gym.spaces.Discrete(2)
SHIFTED = gym.spaces.Discrete(3, start=-1)
BOX = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
MULTI = gym.spaces.MultiDiscrete([3, 4])
OBS = np.zeros((4, 3), np.float32)
CARTPOLE = GymEnvFactory("CartPole-v1")


class Agent:
    """Stands for a user's agent in the messages (its class is what they name)."""


def _refusal(actions: object, space: gym.Space, obs: np.ndarray = OBS) -> str:
    with pytest.raises(AgentContractError) as err:
        check_actions(Agent(), obs, actions, space)
    assert isinstance(err.value, RunError)  # one line, a run that cannot go on: exit status 1
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("actions", "space"),
    [
        (np.array([0, 1, 1, 0]), TWO),
        (np.array([0, 1, 1, 0], np.int32), TWO),
        (np.array([-1, 0, 1, 1]), SHIFTED),
        (np.full((4, 2), 2.0, np.float32), BOX),
        (np.full((4, 2), -2.0), BOX),  # float64 is taken
        (np.array([[2, 3], [0, 0], [1, 2], [0, 3]]), MULTI),
    ],
)
def test_actions_that_fit_the_space_pass(actions, space):
    check_actions(Agent(), OBS, actions, space)


WHO = "tests.agents.test_contract.Agent.act returned"
FOUR = "for a batch of 4 observations; expected"


@pytest.mark.parametrize(
    ("actions", "space", "message"),
    [
        (
            np.array([0.0, 1.0, 1.0, 0.0]),
            TWO,
            f"{WHO} shape (4,) dtype float64 {FOUR} shape (4,) integer actions in Discrete(2)",
        ),
        (
            np.array([[0], [1], [1], [0]]),
            TWO,
            f"{WHO} shape (4, 1) dtype int64 {FOUR} shape (4,) integer actions in Discrete(2)",
        ),
        (
            np.array([0, 1, 2, 0]),
            TWO,
            f"{WHO} action 2 (row 2) outside Discrete(2) {FOUR} shape (4,) integer actions in"
            " Discrete(2)",
        ),
        (
            np.array([0, 1, -2, 0]),
            SHIFTED,
            f"{WHO} action -2 (row 2) outside Discrete(3, start=-1) {FOUR} shape (4,) integer"
            " actions in Discrete(3, start=-1)",
        ),
        (
            [0, 1, 1, 0],
            TWO,
            f"{WHO} a list (not a numpy array) {FOUR} shape (4,) integer actions in Discrete(2)",
        ),
        (
            np.zeros(4, np.float32),
            BOX,
            f"{WHO} shape (4,) dtype float32 {FOUR} shape (4, 2) float actions in {BOX}",
        ),
        (
            np.zeros((4, 2), np.int64),
            BOX,
            f"{WHO} shape (4, 2) dtype int64 {FOUR} shape (4, 2) float actions in {BOX}",
        ),
        (
            np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 2.5]], np.float32),
            BOX,
            f"{WHO} action [0.0, 2.5] (row 3) outside {BOX} {FOUR} shape (4, 2) float actions"
            f" in {BOX}",
        ),
        (
            np.array([[np.nan, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]], np.float32),
            BOX,
            f"{WHO} action [nan, 0.0] (row 0) outside {BOX} {FOUR} shape (4, 2) float actions"
            f" in {BOX}",
        ),
        (
            np.array([[2, 4], [0, 0], [1, 2], [0, 3]]),
            MULTI,
            f"{WHO} action [2, 4] (row 0) outside {MULTI} {FOUR} 4 actions (one row per"
            f" observation) in {MULTI}",
        ),
        (
            np.array([[0, 0]]),
            MULTI,
            f"{WHO} shape (1, 2) dtype int64 {FOUR} 4 actions (one row per observation) in {MULTI}",
        ),
    ],
)
def test_actions_that_do_not_fit_are_one_line_naming_the_class_and_what_was_expected(
    actions, space, message
):
    assert _refusal(actions, space) == message


def test_a_batch_of_one_says_observation():
    assert _refusal(np.array([0.5]), TWO, OBS[:1]).endswith(
        "for a batch of 1 observation; expected shape (1,) integer actions in Discrete(2)"
    )


class FloatActions(DQN):
    """A DQN whose ``act`` returns float actions from its ``bad_from``-th call on."""

    def __init__(self, *args, bad_from: int = 1, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls, self.bad_from = 0, bad_from

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        self.calls += 1
        actions = super().act(obs, explore)
        return actions.astype(np.float64) if self.calls >= self.bad_from else actions


def _float_agent(bad_from: int = 1) -> FloatActions:
    return FloatActions(*CARTPOLE.spaces(), hidden_sizes=[8], bad_from=bad_from)


def test_the_sampler_checks_the_first_actions_before_the_env_takes_them():
    sampler = Sampler(CARTPOLE, _float_agent(), n_envs=3, seed=0)
    stats = SampleStats()
    try:
        with pytest.raises(AgentContractError) as err:
            sampler.step(stats)
        assert str(err.value) == (
            "tests.agents.test_contract.FloatActions.act returned shape (3,) dtype float64 for a"
            " batch of 3 observations; expected shape (3,) integer actions in Discrete(2)"
        )
        assert stats.env_steps == 0  # refused before any env took them
    finally:
        sampler.close()


def test_only_the_first_call_is_checked_a_later_bad_action_reaches_the_env():
    agent = _float_agent(bad_from=3)
    sampler = Sampler(CARTPOLE, agent, n_envs=2, seed=0)
    stats = SampleStats()
    try:
        sampler.step(stats)
        sampler.step(stats)
        with pytest.raises(AssertionError, match="invalid"):  # CartPole's own check
            sampler.step(stats)
        assert agent.calls == 3 and stats.env_steps == 4
    finally:
        sampler.close()
    evaluator = Evaluator(CARTPOLE, n_episodes=1, seed=0, max_steps=5)
    try:
        agent = _float_agent(bad_from=2)
        with pytest.raises(AssertionError, match="invalid"):
            evaluator.evaluate(agent)
        assert agent.calls == 2
    finally:
        evaluator.close()


def test_the_evaluator_checks_the_first_action():
    evaluator = Evaluator(CARTPOLE, n_episodes=1, seed=0, max_steps=5)
    try:
        with pytest.raises(AgentContractError) as err:
            evaluator.evaluate(_float_agent())
    finally:
        evaluator.close()
    assert str(err.value) == (
        "tests.agents.test_contract.FloatActions.act returned shape (1,) dtype float64 for a"
        " batch of 1 observation; expected shape (1,) integer actions in Discrete(2)"
    )


def test_a_worker_reports_a_contract_error_as_its_line_and_others_with_their_traceback():
    try:
        raise AgentContractError("my_pkg.MyAgent.act returned ...")
    except AgentContractError as exc:
        assert failure_report(exc) == "AgentContractError: my_pkg.MyAgent.act returned ..."
    try:
        raise OSError("injected")
    except OSError as exc:
        report = failure_report(exc)
    assert report.startswith("Traceback") and report.rstrip().endswith("OSError: injected")
