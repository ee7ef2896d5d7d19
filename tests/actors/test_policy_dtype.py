"""``actor_manager.policy_dtype``: actor processes act in bfloat16 where the agent offers it;
``auto`` (the default) does where the agent offers it and the actors' CPU has AMX; every other
combination is refused in one line before a run starts."""

from __future__ import annotations

import json
import logging
import re

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from border_py import train
from border_py.actors.clock import LocalClock
from border_py.actors.process import ActorSpec, build_sampler
from border_py.actors.sampler import SampleStats
from border_py.actors.settings import ActorSettings
from border_py.agents.dqn import DQN
from border_py.agents.inference import ConvInference
from border_py.agents.precision import (
    offered_dtypes,
    resolve_for_agent,
    resolve_here,
)
from border_py.errors import ConfigError
from border_py.runs.settings import RunSettings
from border_py.shipped import option_keys
from border_py.trainers.components import build_components

from ..conftest import make_config, scalar_tags

pytest.importorskip("minatar")

MINATAR = ("env=minatar", "trainer=async", "replay_buffer=uniform")
AGENT = "tests.actors.test_policy_dtype.ReportingDQN"  # DQN that says what it acts in (below)
AMX = {"amx_bf16": True, "avx512_bf16": True}  # torch.cpu.get_capabilities() of a CPU with AMX


def cpu(monkeypatch, amx: bool) -> None:
    """Make this process see a CPU with AMX bfloat16 units (``amx``), or one without."""
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: AMX if amx else {})


@pytest.mark.parametrize(
    ("dtype", "amx", "acted"),
    [
        ("float32", True, "float32"),
        ("bfloat16", True, "bfloat16"),
        ("auto", True, "bfloat16"),  # a Ray actor's spec: its own CPU decides
        ("auto", False, "float32"),
    ],
)
def test_an_actor_acts_in_the_precision_its_spec_names(tiny_config, monkeypatch, dtype, amx, acted):
    cpu(monkeypatch, amx)
    config = OmegaConf.to_container(tiny_config(*MINATAR), resolve=True)
    assert isinstance(config, dict)
    spec = ActorSpec(0, 0, n_envs=2, n_buffer=8, epsilons=None, policy_dtype=dtype, seed=0)
    sampler = build_sampler(spec, config, LocalClock())
    try:
        agent = sampler.agent
        if acted == "bfloat16":
            assert isinstance(agent.fast_q, ConvInference)
            assert agent.fast_q.dtype == torch.bfloat16
        else:
            assert agent.fast_q is None  # the module itself
        batch = sampler.sample(8, SampleStats(), lambda: None)
        assert len(batch) >= 8 and batch.frames is None  # whole observations (uniform replay)
        with torch.no_grad():
            q = agent.q(torch.from_numpy(batch.obs)).numpy()
        values = agent.q_values(batch.obs)
        tolerance = 0.03 if acted == "bfloat16" else 1e-6
        assert np.abs(values - q).max() <= tolerance * np.abs(q).max()
    finally:
        sampler.close()


def test_auto_is_the_default(tiny_config):
    config = OmegaConf.to_container(tiny_config(*MINATAR), resolve=True)
    assert isinstance(config, dict)
    assert config["actor_manager"]["policy_dtype"] == "auto"
    assert ActorSettings(**option_keys("actor_manager", "_actors")).policy_dtype == "auto"


@pytest.mark.parametrize(
    ("overrides", "offers"),
    [
        (MINATAR, True),  # DQN with MinAtar's CNN torso
        (("agent=iqn", *MINATAR), False),
        (("env=cartpole", "trainer=async", "experiment=none"), False),  # DQN with an MLP
    ],
)
def test_auto_resolves_to_bfloat16_where_the_agent_offers_it_and_the_cpu_has_amx(
    tiny_config, monkeypatch, overrides, offers
):
    config = OmegaConf.to_container(tiny_config(*overrides), resolve=True)
    assert isinstance(config, dict)
    parts = build_components(config, RunSettings.of(config), 0)
    offered = offered_dtypes(parts.agent)
    assert ("bfloat16" in offered) is offers
    for amx in (True, False):
        cpu(monkeypatch, amx)
        # local actors: the learner's CPU is theirs, it resolves auto for them once
        assert resolve_here("auto", offered) == ("bfloat16" if offers and amx else "float32")
        # explicit values stay what they say (an agent without bfloat16 is refused: below)
        assert resolve_here("float32", offered) == "float32"
        assert resolve_here("bfloat16", offered) == "bfloat16"
    # Ray actors: auto goes to each node, whose own CPU decides, where the agent offers bfloat16
    assert resolve_for_agent("auto", offered) == ("auto" if offers else "float32")
    assert resolve_for_agent("float32", offered) == "float32"


def test_a_precision_other_than_auto_float32_or_bfloat16_is_one_line(tiny_config, tmp_path):
    cfg = tiny_config(*MINATAR, "actor_manager.policy_dtype=float16")
    with pytest.raises(ConfigError) as error:
        train(cfg)
    assert str(error.value) == (
        "actor_manager.policy_dtype='float16': must be one of auto, float32, bfloat16"
    )
    assert not (tmp_path / "run").exists()  # refused before the run dir is made


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ("env=cartpole", "trainer=async", "experiment=none"),
            "actor_manager.policy_dtype='bfloat16': must be one of float32 for DQN with this"
            " network",
        ),
        (
            ("agent=iqn", *MINATAR),
            "actor_manager.policy_dtype='bfloat16': must be one of float32 for IQN",
        ),
        (
            ("env=minatar", "trainer=serial"),
            "actor_manager.policy_dtype='bfloat16': only actor processes (trainer=async)",
        ),
    ],
)
def test_bfloat16_where_no_actor_can_act_in_it_is_one_line(
    tiny_config, tmp_path, overrides, message
):
    cfg = tiny_config(*overrides, "actor_manager.policy_dtype=bfloat16")
    with pytest.raises(ConfigError) as error:
        train(cfg)
    assert message in str(error.value)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()  # refused before the run dir is made


@pytest.mark.parametrize(
    ("dtype", "capabilities", "warned"),
    [
        ("bfloat16", AMX, False),
        ("bfloat16", {"avx512_bf16": True}, True),
        ("bfloat16", {}, True),
        ("auto", {}, False),  # auto acts in float32 there: nothing to warn of
    ],
)
def test_bfloat16_on_a_cpu_without_amx_is_warned_of(
    tiny_config, monkeypatch, caplog, dtype, capabilities, warned
):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities)
    config = OmegaConf.to_container(
        tiny_config(*MINATAR, f"actor_manager.policy_dtype={dtype}"), resolve=True
    )
    assert isinstance(config, dict)
    with caplog.at_level(logging.WARNING, logger="border_py.trainers.components"):
        build_components(config, RunSettings.of(config), 0)
    messages = [r.getMessage() for r in caplog.records if "no AMX bfloat16 units" in r.getMessage()]
    assert len(messages) == int(warned)


class ReportingDQN(DQN):
    """DQN that reports, with every batch its actor sends, whether it acts in bfloat16 (as
    ``test/acting_bfloat16``, recorded by the learner like ``train/epsilon``): the actor
    processes' own word."""

    def exploration_stats(self) -> dict[str, float]:
        bf16 = isinstance(self.fast_q, ConvInference) and self.fast_q.dtype == torch.bfloat16
        return super().exploration_stats() | {"test/acting_bfloat16": float(bf16)}


def test_the_serial_trainer_acts_in_float32_with_auto_on_a_cpu_with_amx(
    tiny_config, monkeypatch, tmp_path
):
    cpu(monkeypatch, True)
    summary = train(tiny_config("env=minatar", "trainer=serial", "trainer.max_opts=20"))
    assert summary["policy_dtype"] == "float32"  # the learner's own network, no error
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["summary"]["policy_dtype"] == "float32"


@pytest.mark.slow
@pytest.mark.parametrize("amx", [True, False])
def test_async_actors_act_in_what_auto_resolved_to_and_the_run_records_it(
    tiny_config, monkeypatch, tmp_path, amx
):
    cpu(monkeypatch, amx)  # the learner's CPU: local actors run on it, it resolves auto for them
    cfg = tiny_config(
        *MINATAR,
        f"agent._target_={AGENT}",
        "actor_manager.n_actors=2",
        "actor_manager.n_envs_per_actor=2",
        "trainer.max_opts=100",
        "trainer.record_interval=25",
        "progress=false",
    )
    summary = train(cfg)
    expected = "bfloat16" if amx else "float32"
    assert summary["policy_dtype"] == expected
    run_dir = tmp_path / "run"
    assert json.loads((run_dir / "result.json").read_text())["summary"]["policy_dtype"] == expected
    acted = [value for _, value in scalar_tags(run_dir)["test/acting_bfloat16"]]
    assert acted and set(acted) == {float(amx)}  # every batch of both actors, in their word
    log = (run_dir / "train.log").read_text()
    reason = "offers bfloat16 and this CPU has AMX" if amx else "this CPU has no AMX"
    assert f"started 2 actors x 2 envs, acting in {expected} (policy_dtype=auto: " in log
    assert reason in log
    assert re.search(rf"acted in +{expected}\n", log)  # the run summary's row
    if amx:  # resumed on a CPU without AMX: the saved config says auto, resolved again
        cpu(monkeypatch, False)
        resumed = train(
            make_config(tmp_path, f"resume={run_dir}", "trainer.max_opts=150", f"trust=[{AGENT}]"),
            overrides=["trainer.max_opts=150"],
        )
        assert resumed["policy_dtype"] == "float32"
        later = [v for step, v in scalar_tags(run_dir)["test/acting_bfloat16"] if step > 100]
        assert later and set(later) == {0.0}
