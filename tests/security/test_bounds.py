"""Every size is bounded before any process starts: the agent's networks and one update (widths,
batch size, IQN's quantile counts), the batches sampled ahead, episodes' lengths and the
checkpoints kept against the disk; each refused in one line naming the key, a warning with
``check_resources=false`` (see :mod:`border_py.resources`)."""

from __future__ import annotations

import json
import logging

import gymnasium as gym
import numpy as np
import pytest

from border_py import load_policy, resources
from border_py.agents.dqn import DQN
from border_py.agents.iqn import IQN
from border_py.agents.sac import SAC
from border_py.cli.checks import check_overrides
from border_py.config import build
from border_py.errors import ConfigError
from border_py.trainers.train import prepare

from ..conftest import make_config
from ..test_resources import run_watched
from .crafted import copy_run

ANYWAY = "(or check_resources=false to run anyway)"
# each size the bounds did not know, and the start of its one line: the key and the estimate
REFUSED = [
    (
        ["agent.hidden_sizes=[100000,100000]"],
        "agent.hidden_sizes=[100000, 100000]: DQN (its networks' weights, targets, gradients"
        " and Adam's moments) needs ~186.3 GiB, more than the",
    ),
    (
        ["agent=sac", "env=pendulum", "agent.hidden_sizes=[100000,100000]"],
        "agent.hidden_sizes=[100000, 100000]: SAC (its networks' weights",
    ),
    (
        ["agent.hidden_sizes=[1e10,1e10]"],  # beyond what PyTorch can represent
        "agent.hidden_sizes=[10000000000, 10000000000]: DQN's networks are too large to build",
    ),
    (
        ["agent.batch_size=5e7", "replay_buffer.capacity=5e7"],
        "agent.batch_size=50000000: one DQN update at this size (its activations and their"
        " gradients, with the 340.0 KiB of networks) needs ~",
    ),
    (
        ["agent=iqn", "agent.n_tau=20000", "agent.n_tau_prime=20000"],
        "agent.batch_size=64 x n_tau=20000 x n_tau_prime=20000: one IQN update at this size",
    ),
    (
        ["trainer.prefetch=1e7"],
        "trainer.prefetch=10000000: more than 64 batches sampled ahead of the update",
    ),
    (
        ["trainer.eval_max_steps=1e15"],
        "trainer.eval_max_steps=1000000000000000: more than 10,000,000 steps per evaluation",
    ),
    (
        ["env.max_episode_steps=1e15"],
        "env.max_episode_steps=1000000000000000: more than 10,000,000 steps per episode",
    ),
]


@pytest.mark.parametrize(("overrides", "line"), REFUSED)
def test_the_pre_check_refuses_each_size_in_one_line(overrides, line):
    with pytest.raises(ConfigError) as refused:
        check_overrides(overrides)
    assert str(refused.value).startswith(line), str(refused.value)
    assert str(refused.value).endswith(f"; lower it {ANYWAY}")


def test_checkpoints_kept_are_bounded_by_the_disk_free_in_the_run_dir(tmp_path, monkeypatch):
    """``keep_checkpoints`` periodic checkpoints (one more while the newest is written), each with
    the replay buffer when ``save_replay_buffer``, and ``best``: against the disk free where the
    run dir goes (here 50 MiB)."""
    free = {}
    monkeypatch.setattr(resources, "free_disk", lambda path: free.setdefault(path, 50 * 2**20))
    run = tmp_path / "run"
    prepare(make_config(tmp_path, "trainer.keep_checkpoints=3", "trainer.save_replay_buffer=true"))
    with pytest.raises(ConfigError) as refused:
        prepare(
            make_config(tmp_path, "trainer.keep_checkpoints=1e9", "trainer.save_replay_buffer=true")
        )
    # CartPole's 100,000 rows of 48 B, DQN [128, 128]'s 17,410 weights x 5 x 4 B
    assert str(refused.value) == (
        "trainer.keep_checkpoints=1000000000 x save_replay_buffer=true: 1,000,000,001"
        " checkpoints of ~340.0 KiB of weights and the replay buffer's ~4.6 MiB each, and best,"
        f" need ~4.6 PiB of disk, more than the 50.0 MiB free in {tmp_path}; lower it {ANYWAY}"
    )
    assert list(free) == [run]
    with pytest.raises(ConfigError, match=r"^trainer.keep_checkpoints=3 x save_replay_buffer=true"):
        prepare(
            make_config(tmp_path, "trainer.save_replay_buffer=true", "replay_buffer.capacity=1e6")
        )
    prepare(make_config(tmp_path, "trainer.keep_checkpoints=100"))  # weights alone: 34 MiB
    with pytest.raises(ConfigError, match=r"^trainer.keep_checkpoints=1000: 1,001 checkpoints of"):
        prepare(make_config(tmp_path, "trainer.keep_checkpoints=1e3"))


def test_with_check_resources_false_a_size_only_warns(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="border_py.resources"):
        prepare(
            make_config(
                tmp_path,
                "check_resources=false",
                "trainer.prefetch=65",
                "trainer.eval_max_steps=1e8",
                "env.max_episode_steps=1e8",
            )
        )
    assert [m.split(":")[1] for m in caplog.messages] == [
        " env.max_episode_steps=100000000",
        " trainer.prefetch=65",
        " trainer.eval_max_steps=100000000",
    ]


class Allocates:
    """A component whose allocation PyTorch refuses (its words), or that fails otherwise."""

    def __init__(self, message: str) -> None:
        raise RuntimeError(message)


def test_a_failed_allocation_while_building_is_one_line():
    words = (
        "[enforce fail at alloc_cpu.cpp:121] data. DefaultCPUAllocator: can't allocate memory:"
        " you tried to allocate 40000000000 bytes. Error code 12 (Cannot allocate memory)"
    )
    with pytest.raises(ConfigError) as refused:
        build("agent", {"_target_": "tests.security.test_bounds.Allocates", "message": words})
    assert str(refused.value) == (
        f"agent: tests.security.test_bounds.Allocates does not fit in memory ({words}); lower"
        " its sizes"
    )
    with pytest.raises(RuntimeError, match="a bug"):  # any other failure keeps its traceback
        build("agent", {"_target_": "tests.security.test_bounds.Allocates", "message": "a bug"})


class KeyedDQN(DQN):
    """A user's DQN with a key of its own, which DQN's footprint does not take."""

    def __init__(self, *args, extra: int = 0, **hparams) -> None:
        super().__init__(*args, **hparams)


def test_an_agent_whose_keys_its_footprint_cannot_take_is_built_unbounded(tmp_path):
    target = "agent._target_=tests.security.test_bounds.KeyedDQN"
    plan = prepare(make_config(tmp_path, target, "+agent.extra=1"))
    assert isinstance(plan.parts.agent, KeyedDQN) and plan.parts.footprint is None


def test_a_crafted_networks_size_is_refused_before_it_is_built(trained, tmp_path):
    """``load_policy`` (and so ``border eval``, ``export`` and ``push``) of a run whose saved
    config asks for [100000, 100000]: one line, nothing allocated (a 40 GB layer would be)."""
    run = copy_run(trained, tmp_path / "run")
    for config_file in run.glob("checkpoints/*/config.json"):
        config = json.loads(config_file.read_text())
        config["agent"]["hidden_sizes"] = [100_000, 100_000]
        config["check_resources"] = False  # not the loading command's: still refused
        config_file.write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"^agent.hidden_sizes=\[100000, 100000\]: DQN \(its"):
        load_policy(run)


def test_a_saved_eval_max_steps_is_bounded_where_push_plays_it():
    from border_py.hub.score import eval_max_steps

    assert eval_max_steps({"trainer": {"eval_max_steps": 10_000_000}}) == 10_000_000
    with pytest.raises(ConfigError, match=r"^trainer.eval_max_steps=1000000000000000 in the run"):
        eval_max_steps({"trainer": {"eval_max_steps": 10**15}})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "line"), [REFUSED[0], REFUSED[4], REFUSED[5]], ids=["widths", "iqn", "prefetch"]
)
def test_border_train_refuses_a_size_before_any_process_starts(tmp_path, overrides, line):
    run = tmp_path / "run"
    proc, _, err, seconds, started, seen = run_watched(
        ["train", *overrides, f"run_dir={run}"], tmp_path
    )
    assert proc.returncode == 2, err
    [error] = err.strip().splitlines()
    assert error.startswith(f"border: error: {line}"), error
    assert seconds < 20
    assert started == [] and seen == []
    assert not run.exists()


CARTPOLE = (gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2))
PIXELS = (gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6))
PENDULUM = (gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Box(-2, 2, (1,), np.float32))


@pytest.mark.parametrize(
    ("agent", "spaces", "keys", "networks"),
    [
        (DQN, CARTPOLE, {"hidden_sizes": [128, 128]}, ("q", "q_target")),
        (DQN, CARTPOLE, {"hidden_sizes": [64, 64], "dueling": True}, ("q", "q_target")),
        (DQN, PIXELS, {"hidden_sizes": [512]}, ("q", "q_target")),
        (IQN, CARTPOLE, {"hidden_sizes": [64, 64]}, ("z", "z_target")),
        (IQN, PIXELS, {"hidden_sizes": [512]}, ("z", "z_target")),
        (
            SAC,
            PENDULUM,
            {"hidden_sizes": [256, 256], "n_critics": 3},
            ("policy", "critics", "critic_targets"),
        ),
    ],
    ids=["dqn", "dueling", "pixel-dqn", "iqn", "pixel-iqn", "sac"],
)
def test_the_footprint_counts_every_parameter_without_allocating(agent, spaces, keys, networks):
    """The estimate's networks, built on the meta device, hold exactly the agent's parameters."""
    size = agent.footprint(*spaces, **keys)
    built = agent(*spaces, **keys)
    state = built.state_dict()
    assert size.policy == sum(t.nbytes for t in built.policy_state().values())
    assert size.weights == sum(t.nbytes for name in networks for t in state[name].values())
