"""agents/inference.py: the fast acting path (numpy on CPU) gives the torch network's outputs to
float32 rounding and the same actions from the same weights, also after an optimizer step, after
load_policy_state and after the parameters moved to other storage; the conv path
(:class:`ConvInference`) gives the module's outputs in float32 and follows the weights in
bfloat16 to bfloat16's rounding."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.dqn import DQN
from border_py.agents.inference import ConvInference, MLPInference
from border_py.agents.iqn import IQN
from border_py.agents.sac import SAC
from border_py.transitions import Transitions

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
FIVE = gym.spaces.Discrete(5)
ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 10.0], np.float32))


def _obs(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (n, 4)).astype(np.float32)


def _batch(seed: int, continuous: bool = False) -> Transitions:
    rng = np.random.default_rng(seed)
    action = rng.uniform(ACT.low, ACT.high, (16, 2)).astype(np.float32) if continuous else None
    return Transitions(
        _obs(16, seed),
        rng.integers(0, 5, 16) if action is None else action,
        rng.normal(size=16).astype(np.float32),
        _obs(16, seed + 100),
        np.full(16, 0.9, np.float32),
    )


def _assert_close(fast: np.ndarray, reference: np.ndarray) -> None:
    """float32 outputs equal to the torch module's up to BLAS summation order."""
    assert fast.dtype == np.float32 and fast.shape == reference.shape
    np.testing.assert_allclose(fast, reference, rtol=1e-5, atol=1e-6)


def _assert_dqn_matches_its_network(agent: DQN) -> None:
    for n in (1, 16, 64, 4096):
        obs = _obs(n, seed=n)
        with torch.no_grad():
            q = agent.q(torch.from_numpy(obs)).numpy()
        _assert_close(agent.q_values(obs), q)
        np.testing.assert_array_equal(agent.act(obs, explore=False), q.argmax(axis=1))


def test_dqn_acts_like_its_q_network_before_and_after_learning_and_loading():
    agent = DQN(OBS, FIVE, hidden_sizes=[32, 32], lr=1e-2)
    assert agent.fast_q is not None  # a plain MLP: the fast path
    _assert_dqn_matches_its_network(agent)
    before = agent.q_values(_obs(64))
    for seed in range(3):  # optimizer steps change the weights in place
        agent.update(_batch(seed))
    assert not np.array_equal(agent.q_values(_obs(64)), before)
    _assert_dqn_matches_its_network(agent)

    actor = DQN(OBS, FIVE, hidden_sizes=[32, 32], seed=9)  # an actor's copy, other weights
    actor.load_policy_state(agent.policy_state())
    np.testing.assert_array_equal(actor.q_values(_obs(64)), agent.q_values(_obs(64)))
    _assert_dqn_matches_its_network(actor)
    obs = _obs(64, seed=5)
    np.testing.assert_array_equal(actor.act(obs, explore=False), agent.act(obs, explore=False))


def test_the_fast_path_follows_parameters_whose_storage_was_replaced():
    agent = DQN(OBS, FIVE, hidden_sizes=[16])
    agent.q_values(_obs(4))
    agent.q[-1].share_memory()  # moves the last layer only (its old storage is freed)
    _assert_dqn_matches_its_network(agent)
    agent.q.share_memory()  # moves every parameter into new (shared) storage
    other = DQN(OBS, FIVE, hidden_sizes=[16], seed=5)
    agent.load_policy_state(other.policy_state())
    _assert_dqn_matches_its_network(agent)
    agent.q.load_state_dict(DQN(OBS, FIVE, hidden_sizes=[16], seed=6).policy_state(), assign=True)
    _assert_dqn_matches_its_network(agent)


def test_uint8_vector_observations_take_the_fast_path_scaled():
    ram = gym.spaces.Box(0, 255, (128,), np.uint8)
    agent = DQN(ram, FIVE, hidden_sizes=[16])
    obs = np.random.default_rng(0).integers(0, 256, (8, 128), dtype=np.uint8)
    with torch.no_grad():
        q = agent.q(torch.from_numpy(obs)).numpy()
    _assert_close(agent.q_values(obs), q)
    np.testing.assert_array_equal(agent.act(obs, explore=False), q.argmax(axis=1))


def test_networks_that_are_not_plain_mlps_keep_the_module_call():
    dueling = DQN(OBS, FIVE, hidden_sizes=[16, 16], dueling=True)
    assert dueling.fast_q is None
    obs = _obs(8)
    with torch.no_grad():
        q = dueling.q(torch.from_numpy(obs)).numpy()
    np.testing.assert_array_equal(dueling.act(obs, explore=False), q.argmax(axis=1))
    assert MLPInference.of(torch.nn.Sequential(torch.nn.Linear(4, 2))) is None


def test_sac_acts_like_its_policy_before_and_after_learning_and_loading():
    agent = SAC(OBS, ACT, hidden_sizes=[32, 32], random_steps=0)
    assert agent.fast_policy is not None

    def assert_matches(sac: SAC) -> None:
        obs = _obs(32, seed=3)
        with torch.no_grad():
            mean, log_std = sac.policy(torch.from_numpy(obs))
        fast_mean, fast_log_std = sac.policy_outputs(obs)
        _assert_close(fast_mean, mean.numpy())
        _assert_close(fast_log_std, log_std.numpy())
        greedy = sac.to_env(np.tanh(mean.numpy()))
        np.testing.assert_allclose(sac.act(obs, explore=False), greedy, rtol=1e-5, atol=1e-6)

    assert_matches(agent)
    for seed in range(3):
        agent.update(_batch(seed, continuous=True))
    assert_matches(agent)
    actor = SAC(OBS, ACT, hidden_sizes=[32, 32], random_steps=0, seed=4)
    actor.load_policy_state(agent.policy_state())
    assert_matches(actor)
    obs = _obs(32, seed=8)
    np.testing.assert_array_equal(actor.act(obs, explore=False), agent.act(obs, explore=False))


def test_observations_with_more_dimensions_are_flattened_and_a_bare_vector_is_refused():
    grid = gym.spaces.Box(-1.0, 1.0, (2, 3), np.float32)
    agent = DQN(grid, FIVE, hidden_sizes=[8])
    for n in (0, 1, 5):
        obs = np.random.default_rng(n).uniform(-1, 1, (n, 2, 3)).astype(np.float32)
        with torch.no_grad():
            q = agent.q(torch.from_numpy(obs)).numpy()
        _assert_close(agent.q_values(obs), q)
    with pytest.raises(ValueError, match=r"shape \(6,\): expected a batch"):
        agent.q_values(np.zeros(6, np.float32))


# -- conv Q-networks (ConvInference) -------------------------------------------------------------

ATARI = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
MINATAR = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)
SIX = gym.spaces.Discrete(6)
CONV_CASES = [(ATARI, False), (ATARI, True), (MINATAR, False), (MINATAR, True)]


def _frames(space: gym.spaces.Box, n: int, seed: int = 0) -> np.ndarray:
    high = int(space.high.max())
    return np.random.default_rng(seed).integers(0, high + 1, (n, *space.shape), dtype=np.uint8)


def _module_q(agent: DQN, obs: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return agent.q(torch.from_numpy(obs)).numpy()


def _frame_batch(space: gym.spaces.Box, seed: int) -> Transitions:
    rng = np.random.default_rng(seed)
    return Transitions(
        _frames(space, 16, seed),
        rng.integers(0, 6, 16),
        rng.normal(size=16).astype(np.float32),
        _frames(space, 16, seed + 100),
        np.full(16, 0.9, np.float32),
    )


def _assert_bf16_close(fast: np.ndarray, reference: np.ndarray) -> None:
    """bfloat16 values: within 3% of each state's largest |Q| (8 bits of mantissa, rounded at
    every layer), and the same greedy action wherever the two best values differ by more."""
    assert fast.dtype == np.float32 and fast.shape == reference.shape
    top = np.abs(reference).max(axis=1, keepdims=True)
    assert (np.abs(fast - reference) <= 0.03 * top).all()
    ordered = np.sort(reference, axis=1)
    clear = ordered[:, -1] - ordered[:, -2] > 0.06 * top[:, 0]
    assert clear.sum() > 0
    np.testing.assert_array_equal(fast.argmax(axis=1)[clear], reference.argmax(axis=1)[clear])


@pytest.mark.parametrize(("space", "dueling"), CONV_CASES)
def test_the_conv_path_in_float32_gives_the_modules_values(space, dueling):
    agent = DQN(space, SIX, hidden_sizes=[32], dueling=dueling)
    conv = ConvInference.of(agent.q, "float32")
    assert conv is not None
    for n in (1, 16):
        obs = _frames(space, n, seed=n)
        _assert_close(conv(obs), _module_q(agent, obs))


@pytest.mark.parametrize(("space", "dueling"), CONV_CASES)
def test_bfloat16_acting_follows_the_weights_through_updates_loads_and_moves(space, dueling):
    agent = DQN(space, SIX, hidden_sizes=[32], dueling=dueling, lr=1e-2)
    assert agent.acting_dtypes() == ("float32", "bfloat16")
    agent.set_acting_dtype("bfloat16")
    assert isinstance(agent.fast_q, ConvInference) and agent.fast_q.dtype == torch.bfloat16
    obs = _frames(space, 64, seed=1)
    before = agent.q_values(obs)
    _assert_bf16_close(before, _module_q(agent, obs))
    for seed in range(3):  # optimizer steps change the weights in place
        agent.update(_frame_batch(space, seed))
    after = agent.q_values(obs)
    assert not np.array_equal(after, before)
    _assert_bf16_close(after, _module_q(agent, obs))

    actor = DQN(space, SIX, hidden_sizes=[32], dueling=dueling, seed=9)
    actor.set_acting_dtype("bfloat16")
    actor.q_values(obs)  # its own weights, cached in bfloat16
    actor.load_policy_state(agent.policy_state())  # copied into the parameters in place
    np.testing.assert_array_equal(actor.q_values(obs), after)
    actor.q.share_memory()  # every parameter moved to other storage
    actor.load_policy_state(
        DQN(space, SIX, hidden_sizes=[32], dueling=dueling, seed=5).policy_state()
    )
    _assert_bf16_close(actor.q_values(obs), _module_q(actor, obs))

    actor.set_acting_dtype("float32")  # back to the module itself
    assert actor.fast_q is None
    np.testing.assert_array_equal(actor.q_values(obs), _module_q(actor, obs))


def test_networks_without_a_conv_torso_act_in_float32_only():
    mlp = DQN(OBS, FIVE, hidden_sizes=[16])
    assert mlp.acting_dtypes() == ("float32",)
    with pytest.raises(ValueError, match="not 'bfloat16'"):
        mlp.set_acting_dtype("bfloat16")
    mlp.set_acting_dtype("float32")
    assert isinstance(mlp.fast_q, MLPInference)  # the numpy path stays
    assert ConvInference.of(mlp.q) is None
    assert ConvInference.of(DQN(OBS, FIVE, hidden_sizes=[16], dueling=True).q) is None
    assert not hasattr(IQN(ATARI, SIX, hidden_sizes=[16]), "set_acting_dtype")


@pytest.mark.parametrize("dueling", [False, True])
def test_bfloat16_acting_keeps_close_q_values_apart(dueling):
    """Q-values 0.02 apart near 20 (bfloat16 resolves 0.125 there): the output layers run in
    float32, so the greedy action is the float32 one, not a tie given to action 0."""
    agent = DQN(MINATAR, SIX, hidden_sizes=[32], dueling=dueling)
    head = agent.q[-1].advantage[-1] if dueling else agent.q[-1]
    with torch.no_grad():
        head.weight.mul_(1e-4)
        head.bias.copy_(20.0 + 0.02 * torch.arange(6.0))
    obs = _frames(MINATAR, 64, seed=2)
    reference = _module_q(agent, obs)
    assert (reference.argmax(axis=1) == 5).all()
    agent.set_acting_dtype("bfloat16")
    q = agent.q_values(obs)
    np.testing.assert_array_equal(q.argmax(axis=1), reference.argmax(axis=1))
    assert (np.diff(np.sort(q, axis=1), axis=1) > 0).all()  # no two values rounded together
