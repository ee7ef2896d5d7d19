"""The agents' Adam: torch's fused Adam update (after torch's gradient clipping), torch's state
format both ways, and no import of ``torch._dynamo``."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch

from border_py.agents.optim import Adam, Optimizers


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.ReLU()
    )


def _loss(net: torch.nn.Module, step: int, frozen_first_layer: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    x = torch.randn(16, 3, generator=g) * 5
    net[0].requires_grad_(not frozen_first_layer)  # then its parameters get no gradient
    return (net(x) ** 2).mean() * 100


def _torch_step(net, optimizer, step, max_norm, frozen):
    optimizer.zero_grad(set_to_none=True)
    _loss(net, step, frozen).backward()
    if max_norm is not None:
        torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    optimizer.step()


def _our_step(net, optimizer, step, frozen):
    optimizer.zero_grad()
    _loss(net, step, frozen).backward()
    optimizer.step()


@pytest.mark.parametrize("max_norm", [None, 0.5, 1e6])
def test_the_update_is_torchs_fused_adam_after_torchs_clipping(max_norm):
    ours, theirs = _net(0), _net(0)
    our_opt = Adam(list(ours.parameters()), 3e-3, eps=1e-4, max_grad_norm=max_norm)
    their_opt = torch.optim.Adam(theirs.parameters(), lr=3e-3, eps=1e-4, fused=True)
    for step in range(12):
        frozen = step in (0, 1, 7)  # the first layer's moments start at step 2 and skip step 7
        _our_step(ours, our_opt, step, frozen)
        _torch_step(theirs, their_opt, step, max_norm, frozen)
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert float(our_opt.state[0]["step"]) == 9  # 12 steps, 3 of them without a gradient there
    assert float(our_opt.state[2]["step"]) == 12


def test_the_state_loads_into_torchs_adam_and_from_it():
    first = _net(1)
    ours = Adam(list(first.parameters()), 1e-2, max_grad_norm=None)
    for step in range(3):
        _our_step(first, ours, step, frozen=False)
    twin = _net(2)
    twin.load_state_dict(first.state_dict())
    theirs = torch.optim.Adam(twin.parameters(), lr=5.0, fused=True)  # lr comes from the state
    theirs.load_state_dict(copy.deepcopy(ours.state_dict()))  # as through a checkpoint file
    back = Adam(list(_net(3).parameters()), 5.0)  # shapes only: weights do not matter here
    back.load_state_dict(theirs.state_dict())
    assert back.lr == 1e-2 and back.state.keys() == ours.state.keys()
    for step in range(3, 6):
        _our_step(first, ours, step, frozen=False)
        _torch_step(twin, theirs, step, None, frozen=False)
    for a, b in zip(first.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("float_step", [False, True])
def test_a_checkpoint_of_torchs_default_adam_loads(float_step):
    """What agents saved before (``torch.optim.Adam``, not fused), and older torch's float steps."""
    net = _net(4)
    theirs = torch.optim.Adam(net.parameters(), lr=2e-3, eps=1e-5)
    for step in range(3):
        _torch_step(net, theirs, step, None, frozen=False)
    saved = copy.deepcopy(theirs.state_dict())
    if float_step:
        for entry in saved["state"].values():
            entry["step"] = float(entry["step"])
    ours = Adam(list(_net(5).parameters()), 1.0)
    ours.load_state_dict(saved)
    assert (ours.lr, ours.eps) == (2e-3, 1e-5)
    for index, entry in theirs.state_dict()["state"].items():
        assert ours.state[index]["step"].dtype == torch.float32
        assert float(ours.state[index]["step"]) == 3
        torch.testing.assert_close(ours.state[index]["exp_avg"], entry["exp_avg"], rtol=0, atol=0)
        torch.testing.assert_close(
            ours.state[index]["exp_avg_sq"], entry["exp_avg_sq"], rtol=0, atol=0
        )


def test_a_state_of_other_parameters_is_refused():
    small = Adam(list(torch.nn.Linear(3, 4).parameters()), 1e-3)
    wide = torch.nn.Linear(3, 5)
    wide(torch.ones(1, 3)).sum().backward()
    other = Adam(list(wide.parameters()), 1e-3)
    other.step()
    with pytest.raises(ValueError, match=r"shape \(5, 3\) for a parameter of shape \(4, 3\)"):
        small.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="has 1 parameters, this one 2"):
        small.load_state_dict(Adam([torch.nn.Parameter(torch.ones(2))], 1e-3).state_dict())
    stray = other.state_dict()
    stray["state"] = {7: stray["state"][0]}
    with pytest.raises(ValueError, match="state for parameter 7, which the saved group lacks"):
        other.load_state_dict(stray)
    with pytest.raises(KeyError, match=r"optimizers \['q'\], the agent has \['z'\]"):
        Optimizers(z=small).load_state_dict({"q": small.state_dict()})


def test_a_learner_never_imports_torch_dynamo():
    code = (
        "import sys, numpy as np, gymnasium as gym\n"
        "from border_py.agents.dqn import DQN\n"
        "from border_py.transitions import Transitions\n"
        "agent = DQN(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), hidden_sizes=[8],"
        " batch_size=4)\n"
        "r = np.random.default_rng(0)\n"
        "o = r.normal(size=(4, 4)).astype(np.float32)\n"
        "agent.update(Transitions(o, np.array([0, 1, 0, 1]), np.ones(4, np.float32), o,"
        " np.full(4, 0.9, np.float32)))\n"
        "assert agent.optimizers['q'].state, 'no step was taken'\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"  # its import alone takes over a second
