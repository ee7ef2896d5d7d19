"""runs/checkpoint.py: a shared checkpoint (``border push``'s: policy, config and meta alone)
loads to act, never to resume."""

from __future__ import annotations

import shutil

import pytest
import torch

from border_py._version import __version__
from border_py.errors import ConfigError
from border_py.runs.checkpoint import load_checkpoint, save_checkpoint
from border_py.runs.state import TrainerState


def test_a_checkpoint_of_policy_config_and_meta_loads_its_policy_only(tmp_path):
    state = TrainerState(100, 1000, 1000, {}, {}, {}, {})
    full = save_checkpoint(
        tmp_path / "run" / "checkpoints",
        "best",
        policy={"w": torch.arange(3.0)},
        agent_state={"optimizer": torch.zeros(2)},
        state=state,
        config={"seed": 0, "env": {"id": "CartPole-v1"}, "agent": {}},
        meta={"opt_steps": 100, "border_py": __version__},
    )
    shared = tmp_path / "shared"
    shared.mkdir()
    for name in ("policy.pt", "config.json", "meta.json"):
        shutil.copy(full / name, shared / name)
    loaded = load_checkpoint(shared, full=False)
    assert loaded.path == shared.resolve()
    assert torch.equal(loaded.policy["w"], torch.arange(3.0))
    assert loaded.config["env"] == {"id": "CartPole-v1"} and loaded.agent_state == {}
    with pytest.raises(ConfigError, match=r"not a border-py run or checkpoint directory"):
        load_checkpoint(shared)  # to resume: the training state is not there
    (shared / "policy.pt").unlink()
    with pytest.raises(ConfigError, match=r"not a border-py run or checkpoint directory"):
        load_checkpoint(shared, full=False)  # without its weights it is no checkpoint at all
