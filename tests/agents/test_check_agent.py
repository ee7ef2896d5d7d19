"""``border_py.agents.check_agent``: every shipped agent and examples/tiny_rl's keep the agent
contract on a real env, and an agent that breaks a guarantee fails in one line naming it."""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents import AgentCheckError, check_agent
from border_py.agents.batch import TensorBatch
from border_py.agents.check_probe import difference
from border_py.agents.dqn import DQN
from border_py.agents.iqn import IQN
from border_py.agents.sac import SAC
from border_py.transitions import Transitions

from ..conftest import REPO
from ..frame_env import make_pattern

SMALL = {"hidden_sizes": [16], "batch_size": 8}
QUANTILES = {**SMALL, "n_tau": 4, "n_tau_prime": 4, "k": 4}
PROTOCOL = [
    "builds for the env's spaces",
    "protocol",
    "constructor leaves the global RNGs alone",
    "attributes",
    "deterministic given seed",
    "act shapes",
    "greedy act changes nothing",
    "update metrics",
    "exploration stats",
    "policy state",
    "state round trip",
    "continue identically after save/load",
]
ACCEPTS = ["accepts the env's spaces"]
DISCRETE = ["prefetch parity", "prioritized replay", "TD-error scoring"]


def cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


def pendulum() -> gym.Env:
    return gym.make("Pendulum-v1")


SHIPPED = {  # name -> (class, env, hparams, the optional guarantees it has)
    "dqn_mlp": (
        DQN,
        cartpole,
        SMALL,
        [*DISCRETE, "value acting", "fixed epsilon", "acting precision"],
    ),
    "dqn_conv_dueling": (
        DQN,
        make_pattern,
        {**SMALL, "dueling": True, "tau": 0.5},
        [*DISCRETE, "value acting", "fixed epsilon", "acting precision"],
    ),
    "iqn": (IQN, cartpole, QUANTILES, [*DISCRETE, "fixed epsilon"]),
    "iqn_conv": (IQN, make_pattern, QUANTILES, [*DISCRETE, "fixed epsilon"]),
    "sac": (SAC, pendulum, {**SMALL, "random_steps": 10}, ["prefetch parity"]),
    "sac_correlated_noise": (
        SAC,
        pendulum,
        {**SMALL, "random_steps": 0, "noise_correlation": 0.9, "learn_alpha": False},
        ["prefetch parity"],
    ),
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_agent_keeps_the_contract(name):
    agent_class, make_env, hparams, optional = SHIPPED[name]
    checked = check_agent(agent_class, make_env(), hparams)
    assert checked == [*ACCEPTS, *PROTOCOL, *optional]


def test_the_example_agent_keeps_the_contract(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    from tiny_rl.agent import TinyQ
    from tiny_rl.env import Corridor

    assert check_agent(TinyQ, Corridor(), {"hidden": 16, "batch_size": 8}) == PROTOCOL


# -- deliberately broken agents -------------------------------------------------------------------


class ForgetsExplorationRNG(DQN):
    """Saves and loads everything but its exploration generator."""

    checkpointed = {key: part for key, part in DQN.checkpointed.items() if key != "rng"}


class LoadsNoTarget(DQN):
    """Saves its target network but does not load it."""

    def load_state_dict(self, state: Any) -> None:
        super().load_state_dict({**state, "q_target": self.q_target.state_dict()})


class ColumnActions(DQN):
    """Returns actions of shape (B, 1)."""

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        return super().act(obs, explore)[:, None]


class FloatActions(DQN):
    """Returns float actions for a Discrete space when exploring."""

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        actions = super().act(obs, explore)
        return actions.astype(np.float64) if explore else actions


class SeedsGlobally(DQN):
    """Seeds torch's global generator in its constructor."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        torch.manual_seed(kwargs["seed"])
        super().__init__(*args, **kwargs)


class UnseededExploration(DQN):
    """Explores with a generator its seed does not seed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rng = np.random.default_rng()


class GreedyCounts(DQN):
    """Advances its exploration schedule on greedy calls too."""

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        self.env_steps += len(obs)
        return super().act(obs, explore)


class KeepsViews(DQN):
    """Keeps the tensors it is given instead of copying them into its network."""

    def load_policy_state(self, state: dict[str, torch.Tensor]) -> None:
        self.q.load_state_dict(state, assign=True)


class InlineDrift(DQN):
    """``update`` shifts the rewards, ``update_tensors`` does not."""

    def update(self, batch: Transitions) -> dict[str, Any]:
        return super().update(dataclasses.replace(batch, reward=batch.reward + 1.0))


class VectorLoss(DQN):
    """Reports its per-sample losses instead of their mean."""

    def update(self, batch: Transitions) -> dict[str, Any]:
        metrics = super().update(batch)
        return {**metrics, "train/loss": torch.ones(len(batch))}


class SignedTDError(DQN):
    """Reports signed TD errors (on both paths alike)."""

    def update_tensors(self, batch: TensorBatch) -> dict[str, Any]:
        metrics = super().update_tensors(batch)
        return {**metrics, "td_error": -metrics["td_error"] - 1.0}


class ScoringDraws(IQN):
    """Scores fresh transitions with levels drawn from its generator (a change of state)."""

    def td_error(self, batch: Transitions) -> np.ndarray:
        self._sample_taus(len(batch), 4)
        return super().td_error(batch)


class ValuesOff(DQN):
    """Hands out values other than those it acted on."""

    def act_with_values(self, obs: np.ndarray, explore: bool) -> tuple[np.ndarray, np.ndarray]:
        actions, values = super().act_with_values(obs, explore)
        return actions, values + 1.0


class NoExplorationStats(DQN):
    """Lacks ``exploration_stats``."""

    exploration_stats = None  # type: ignore[assignment]


class PickledGenerator(DQN):
    """Saves its exploration generator itself, which a weights_only load refuses."""

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "rng": self.rng}


class NoGamma(DQN):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gamma = None  # type: ignore[assignment]


BROKEN = [  # (class, the guarantee it breaks, a part of the message)
    (ForgetsExplorationRNG, "continue identically after save/load", "act(obs, explore=True)"),
    (LoadsNoTarget, "state round trip", "['q_target']"),
    (ColumnActions, "act shapes", "returned shape (1, 1) dtype int64"),
    (FloatActions, "act shapes", "explore=True"),
    (SeedsGlobally, "constructor leaves the global RNGs alone", "['torch']"),
    (UnseededExploration, "deterministic given seed", "state_dict(): ['rng']"),
    (GreedyCounts, "greedy act changes nothing", "['env_steps']"),
    (KeepsViews, "policy state", "keep a copy"),
    (InlineDrift, "prefetch parity", "['train/loss']"),
    (VectorLoss, "update metrics", "update(batch)['train/loss']"),
    (SignedTDError, "prioritized replay", "negative"),
    (ValuesOff, "value acting", "against q_values"),
    (NoExplorationStats, "protocol", "lacks exploration_stats"),
    (PickledGenerator, "state round trip", "Unsupported global: GLOBAL numpy.random"),
    (NoGamma, "attributes", "gamma=None"),
]


@pytest.mark.parametrize(
    ("agent_class", "guarantee", "detail"), BROKEN, ids=[b[0].__name__ for b in BROKEN]
)
def test_a_broken_agent_fails_in_one_line_naming_the_guarantee(agent_class, guarantee, detail):
    with pytest.raises(AgentCheckError) as err:
        check_agent(agent_class, cartpole(), SMALL)
    message = str(err.value)
    assert err.value.guarantee == guarantee
    name = f"{__name__}.{agent_class.__qualname__}"
    assert message.startswith(f"{name} breaks '{guarantee}': "), message
    assert detail in message and "\n" not in message


def test_a_state_change_in_td_error_scoring_is_named():
    with pytest.raises(AgentCheckError) as err:
        check_agent(ScoringDraws, cartpole(), QUANTILES)
    assert err.value.guarantee == "TD-error scoring"
    assert "state_dict() after td_error(batch): ['tau_rng']" in str(err.value)


def test_an_env_the_agent_does_not_take_is_named():
    with pytest.raises(AgentCheckError) as err:
        check_agent(DQN, pendulum(), SMALL)
    assert err.value.guarantee == "accepts the env's spaces"
    assert "Discrete" in str(err.value)


def test_a_constructor_that_refuses_its_keys_is_named():
    with pytest.raises(AgentCheckError) as err:
        check_agent(DQN, cartpole(), {**SMALL, "gama": 0.9})
    assert err.value.guarantee == "builds for the env's spaces"
    assert "gama" in str(err.value)


def test_differences_name_the_first_place_and_respect_the_tolerance():
    a = {"q": {"w": torch.ones(3)}, "steps": 4, "rng": {"state": 7}}
    assert difference(a, {"q": {"w": torch.ones(3)}, "steps": 4, "rng": {"state": 7}}) is None
    moved = {"q": {"w": torch.tensor([1.0, 1.0, 1.5])}, "steps": 4, "rng": {"state": 7}}
    assert difference(a, moved) == "['q']['w']: max |difference| 0.5 (largest |value| 1)"
    assert difference(torch.ones(3), torch.ones(3) + 1e-7, tolerance=1e-6) is None
    assert difference(torch.ones(3), torch.ones(3) + 1e-5, tolerance=1e-6) is not None
    assert difference({"a": 1}, {"b": 1}) == "the keys ['a'] and ['b']"
    assert difference(np.arange(3), np.array([0, 2, 2])) == "[0, 1, 2] and [0, 2, 2]"
    assert difference(np.arange(9), np.zeros(9, np.int64)) == "8 of 9 values differ"
    assert difference([1, 2], [1, 3]) == "[1]: 2 and 3"
    assert difference(np.zeros(2, np.int64), np.zeros(2, np.int32)) is not None
    assert difference(float("nan"), float("nan")) is None
    assert difference(torch.tensor([float("nan")]), torch.tensor([1.0])) is not None
