"""The memory estimate's networks: small ones run on the CPU (no ``torch._dynamo`` import at
start-up), large ones on the meta device, with the same counts either way."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import pytest

from border_py.agents import footprint
from border_py.agents.footprint import dqn_footprint, iqn_footprint, sac_footprint
from border_py.agents.networks import q_network

PIXELS = gym.spaces.Box(0, 255, (4, 84, 84), dtype="uint8")
VECTOR = gym.spaces.Box(-1, 1, (6,))
ACTIONS = gym.spaces.Box(-1, 1, (2,))


def _estimates() -> list[footprint.Footprint]:
    return [
        dqn_footprint(PIXELS, 6, [512], "cnn", True, True, 32),
        dqn_footprint(VECTOR, 3, [64, 64], "mlp", False, False, 64),
        iqn_footprint(VECTOR, 3, [64], "mlp", 64, (8, 8, 8), 32),
        sac_footprint(VECTOR, ACTIONS, [256, 256], 2, 256),
    ]


def test_the_cpu_and_the_meta_paths_estimate_the_same(monkeypatch):
    on_cpu = _estimates()
    monkeypatch.setattr(footprint, "REAL_BELOW", 0)  # every network on the meta device
    assert _estimates() == on_cpu


def test_a_small_network_runs_on_the_cpu_and_a_large_one_allocates_nothing():
    small = footprint.shaped(lambda: q_network(VECTOR, 3, [64], "mlp", False))
    large = footprint.shaped(lambda: q_network(VECTOR, 3, [4096, 4096], "mlp", False))
    devices = [next(m.parameters()).device.type for m in (small, large)]
    assert devices == ["cpu", "meta"]


def test_the_start_up_estimate_never_imports_torch_dynamo():
    code = (
        "import sys, gymnasium as gym\n"
        "from border_py.agents.footprint import dqn_footprint, iqn_footprint, sac_footprint\n"
        "pixels = gym.spaces.Box(0, 255, (4, 84, 84), dtype='uint8')\n"
        "box = gym.spaces.Box(-1, 1, (6,))\n"
        "dqn_footprint(pixels, 6, [512], 'cnn', True, True, 32)\n"
        "iqn_footprint(box, 3, [64], 'mlp', 64, (8, 8, 8), 32)\n"
        "sac_footprint(box, gym.spaces.Box(-1, 1, (2,)), [256, 256], 2, 256)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"  # its import alone costs ~1.5 s of every border train


@pytest.mark.parametrize("below", [0, footprint.REAL_BELOW])
def test_the_global_rng_is_left_as_it_was(monkeypatch, below):
    import torch

    monkeypatch.setattr(footprint, "REAL_BELOW", below)
    torch.manual_seed(3)
    expected = torch.rand(3)
    torch.manual_seed(3)
    _estimates()
    assert torch.equal(torch.rand(3), expected)
