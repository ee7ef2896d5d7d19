"""Every size is bounded before any process starts: the agent's networks and one update (widths,
batch size, IQN's quantile counts), the batches sampled ahead, episodes' lengths and the
checkpoints kept against the disk; each refused in one line naming the key, a warning with
``check_resources=false`` (see :mod:`border_py.resources`)."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py import load_policy, resources, train
from border_py.agents.dqn import DQN
from border_py.agents.iqn import IQN
from border_py.agents.sac import SAC
from border_py.cli.checks import check_overrides
from border_py.config import build
from border_py.errors import ConfigError
from border_py.trainers.train import prepare

from ..conftest import make_config
from ..test_resources import run_watched
from .crafted import TINY, copy_run

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
    (
        ["agent.n_step=1e4"],
        "agent.n_step=10000: more than 1,000 steps per n-step return (each env keeps as"
        " many rows pending)",
    ),
    (
        [f"agent.hidden_sizes=[{','.join(['1'] * 65)}]"],
        "len(agent.hidden_sizes)=65: more than 64 hidden layers (border's networks are plain MLPs)",
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


def resumed(tmp_path, run, *overrides: str):
    """What ``border train resume=<run> trainer.max_opts=400`` validates (nothing started)."""
    given = ["trainer.max_opts=400", *overrides]
    return prepare(make_config(tmp_path, f"resume={run}", *given), overrides=given)


def test_a_resume_is_bounded_by_the_disk_it_adds_not_by_what_its_checkpoints_hold(
    trained, tmp_path, monkeypatch
):
    """C1: a resumed run's own checkpoints are already on disk, and its saving prunes them as it
    writes new ones: they are credited (each up to a new one's size; ``best`` up to its own), so
    a run whose disk filled with its own checkpoints resumes. Keeping 3 of ``W`` bytes (4 while
    the newest is written) and best (2 while it is replaced) needs 6 W; the tiny run holds 3
    periodic checkpoints and best, each more than ``W``: it adds 2 W."""
    run = copy_run(trained, tmp_path / "run")
    free = {"bytes": 2**50}
    monkeypatch.setattr(resources, "free_disk", lambda path: free["bytes"])
    weights = resumed(tmp_path, run).parts.footprint.checkpoint
    free["bytes"] = 2 * weights
    assert resumed(tmp_path, run).checkpoint is not None
    free["bytes"] -= 1
    with pytest.raises(ConfigError) as refused:
        resumed(tmp_path, run)
    size = resources.size_text(weights)
    assert str(refused.value) == (
        f"trainer.keep_checkpoints=3: 4 checkpoints of ~{size} of weights each, and best, less"
        f" the ~{resources.size_text(4 * weights)} of the run's own that they replace, need"
        f" ~{resources.size_text(2 * weights)} of disk, more than the"
        f" {resources.size_text(2 * weights - 1)} free in {run}; lower it {ANYWAY}"
    )
    with pytest.raises(
        ConfigError, match=r"^trainer.keep_checkpoints=3: 4 checkpoints of .* best,"
    ):
        prepare(make_config(tmp_path, *TINY, "trainer.max_opts=400"))  # a fresh run: 6 W
    # from the oldest: the newer two and best are set aside (kept), only it is replaced: 5 W
    free["bytes"] = 5 * weights - 1
    with pytest.raises(ConfigError, match=r"best, less the ~[\d.]+ [KM]?i?B of the run's own"):
        resumed(tmp_path, run / "checkpoints" / "000000100")
    free["bytes"] += 1
    resumed(tmp_path, run / "checkpoints" / "000000100")


@pytest.mark.slow
def test_resume_auto_resumes_a_run_whose_disk_its_checkpoints_filled(
    trained, tmp_path, monkeypatch
):
    """C1 end to end: ``resume=auto`` with room for 2 W (the run's own checkpoints took the
    rest) trains on, keeping its 3 newest checkpoints."""
    run = copy_run(trained, tmp_path / "run")
    free = {"bytes": 2**50}
    monkeypatch.setattr(resources, "free_disk", lambda path: free["bytes"])
    free["bytes"] = 2 * resumed(tmp_path, run).parts.footprint.checkpoint
    (run / "result.json").unlink()  # preempted: resume=auto continues it
    given = ["trainer.max_opts=400"]
    summary = train(make_config(tmp_path, f"run_dir={run}", "resume=auto", *given), given)
    assert summary["opt_steps"] == 400
    names = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert names == ["000000200", "000000300", "000000400", "best"]


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


def saved_agent(run, **keys) -> None:
    """Set ``keys`` in the ``agent`` of every saved config of ``run`` (and the saved
    ``check_resources: false``, which is not the loading command's: never used)."""
    for config_file in run.glob("checkpoints/*/config.json"):
        config = json.loads(config_file.read_text())
        config["agent"] |= keys
        config["check_resources"] = False
        config_file.write_text(json.dumps(config))


def test_a_crafted_networks_size_is_refused_before_it_is_built(trained, tmp_path):
    """``load_policy`` (and so ``border eval``, ``export`` and ``push``) of a run whose saved
    config asks for [100000, 100000]: one line, nothing allocated (a 40 GB layer would be)."""
    run = copy_run(trained, tmp_path / "run")
    saved_agent(run, hidden_sizes=[100_000, 100_000])
    with pytest.raises(ConfigError) as refused:
        load_policy(run)
    assert str(refused.value).startswith(
        "agent.hidden_sizes=[100000, 100000]: DQN's networks (their weights and targets, what"
        " building it allocates) needs ~74.5 GiB, more than the"
    )


def test_a_saved_depth_is_refused_before_the_estimate_builds_it(trained, tmp_path):
    """S6: a million one-unit layers took the estimate minutes to build on the meta device; the
    depth is bounded first (here the test's 15 s limit would end it)."""
    run = copy_run(trained, tmp_path / "run")
    saved_agent(run, hidden_sizes=[1] * 10**6)
    with pytest.raises(ConfigError) as refused:
        load_policy(run)
    assert str(refused.value) == (
        "len(agent.hidden_sizes)=1000000: more than 64 hidden layers (border's networks are plain"
        f" MLPs); lower it {ANYWAY}"
    )


def test_loading_a_policy_bounds_its_networks_not_a_training_update(trained, tmp_path):
    """C4: a run trained at a batch size whose update this machine could not hold still loads
    to act: acting builds the networks (their weights), never Adam's moments nor an update."""
    run = copy_run(trained, tmp_path / "run")
    saved_agent(run, batch_size=10**9)
    with pytest.raises(ConfigError, match=r"^agent.batch_size=1000000000: one DQN update"):
        prepare(make_config(tmp_path, "agent.batch_size=1e9", "replay_buffer.capacity=1e9"))
    assert load_policy(run).agent.batch_size == 10**9


def wide_run(trained, where):
    """A copy of the tiny run whose policy is DQN [256, 256]'s: 264 KiB of weights, 528 KiB with
    its target, in a 265 KiB ``policy.pt``."""
    run = copy_run(trained, where / "run")
    saved_agent(run, hidden_sizes=[256, 256])
    policy = DQN(*CARTPOLE, hidden_sizes=[256, 256]).policy_state()
    for file in run.glob("checkpoints/*/policy.pt"):
        torch.save(policy, file)
    return run


def test_the_loading_commands_take_check_resources_false(trained, tmp_path, monkeypatch, caplog):
    """With 400 KiB of memory available the file loads, the networks would not fit: refused, and
    built with the loading command's own ``check_resources=false`` (a warning)."""
    from border_py.cli.main import main

    run = wide_run(trained, tmp_path)
    monkeypatch.setattr(resources, "available_memory", lambda: (400 * 2**10, "of memory available"))
    line = (
        "agent.hidden_sizes=[256, 256]: DQN's networks (their weights and targets, what building"
        " it allocates) needs ~528.0 KiB, more than the 400.0 KiB of memory available; lower it"
    )
    with pytest.raises(ConfigError) as refused:
        load_policy(run)
    assert str(refused.value) == f"{line} {ANYWAY}"
    with caplog.at_level(logging.WARNING, logger="border_py.resources"):
        assert load_policy(run, check_resources=False).agent.args.hidden_sizes == [256, 256]
        out = tmp_path / "export"
        assert (
            main(["export", str(run), "-f", "numpy", "-o", str(out), "check_resources=false"]) == 0
        )
        assert (out / "policy.py").is_file()
        evaluated = ["eval", str(run), "eval.n_episodes=1", "eval.max_steps=5"]
        assert main([*evaluated, f"eval.out={tmp_path}", "check_resources=false"]) == 0
    assert caplog.messages == [f"check_resources=false: {line}; running anyway"] * 3
    assert main(evaluated) == 2


def test_push_takes_check_resources_false(trained, tmp_path, monkeypatch, caplog):
    """``border push`` too: its networks, and the saved ``trainer.eval_max_steps`` it plays."""
    from border_py.hub.folder import PushSettings
    from border_py.hub.remote import push

    run = wide_run(trained, tmp_path)
    monkeypatch.setattr(resources, "available_memory", lambda: (400 * 2**10, "of memory available"))
    settings = PushSettings("me/x", episodes=1)
    with pytest.raises(ConfigError, match=r"^agent.hidden_sizes=\[256, 256\]: DQN's networks"):
        push(run, settings, tmp_path / "refused")
    with caplog.at_level(logging.WARNING, logger="border_py.resources"):
        push(run, replace(settings, check_resources=False), tmp_path / "pushed")
    assert (tmp_path / "pushed" / "README.md").is_file()
    assert len(caplog.messages) == 2  # load_policy's, and the export's own load


def test_a_saved_eval_max_steps_is_bounded_where_push_plays_it(caplog):
    from border_py.hub.score import eval_max_steps

    assert eval_max_steps({"trainer": {"eval_max_steps": 10_000_000}}) == 10_000_000
    saved = {"trainer": {"eval_max_steps": 10**15}}
    line = (
        "trainer.eval_max_steps=1000000000000000: more than 10,000,000 steps per evaluation"
        " episode in the run's config, which the card's evaluation plays; lower it"
    )
    with pytest.raises(ConfigError) as refused:
        eval_max_steps(saved)
    assert str(refused.value) == f"{line} {ANYWAY}"
    with caplog.at_level(logging.WARNING, logger="border_py.resources"):
        assert eval_max_steps(saved, enforce=False) == 10**15
    assert caplog.messages == [f"check_resources=false: {line}; running anyway"]


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
