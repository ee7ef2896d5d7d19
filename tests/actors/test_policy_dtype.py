"""``actor_manager.policy_dtype``: actor processes act in bfloat16 where the agent offers it, and
every other combination is refused in one line before a run starts."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from border_py import train
from border_py.actors.clock import LocalClock
from border_py.actors.process import ActorSpec, build_sampler
from border_py.actors.sampler import SampleStats
from border_py.actors.settings import ActorSettings
from border_py.agents.inference import ConvInference
from border_py.errors import ConfigError
from border_py.runs.settings import RunSettings
from border_py.shipped import option_keys
from border_py.trainers.components import build_components

pytest.importorskip("minatar")

MINATAR = ("env=minatar", "trainer=async", "replay_buffer=uniform")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_actor_acts_in_the_precision_its_spec_names(tiny_config, dtype):
    config = OmegaConf.to_container(tiny_config(*MINATAR), resolve=True)
    assert isinstance(config, dict)
    spec = ActorSpec(0, 0, n_envs=2, n_buffer=8, epsilons=None, policy_dtype=dtype, seed=0)
    sampler = build_sampler(spec, config, LocalClock())
    try:
        agent = sampler.agent
        if dtype == "bfloat16":
            assert isinstance(agent.fast_q, ConvInference)
            assert agent.fast_q.dtype == torch.bfloat16
        else:
            assert agent.fast_q is None  # the module itself
        batch = sampler.sample(8, SampleStats(), lambda: None)
        assert len(batch) >= 8 and batch.frames is None  # whole observations (uniform replay)
        with torch.no_grad():
            q = agent.q(torch.from_numpy(batch.obs)).numpy()
        acted = agent.q_values(batch.obs)
        assert np.abs(acted - q).max() <= (0.03 if dtype == "bfloat16" else 1e-6) * np.abs(q).max()
    finally:
        sampler.close()


def test_a_precision_other_than_float32_or_bfloat16_is_refused():
    with pytest.raises(
        ConfigError, match=r"policy_dtype='float16': must be 'float32' or 'bfloat16'"
    ):
        ActorSettings(**option_keys("actor_manager", "_actors") | {"policy_dtype": "float16"})


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
    ("capabilities", "warned"),
    [({"amx_bf16": True, "avx512_bf16": True}, False), ({"avx512_bf16": True}, True), ({}, True)],
)
def test_bfloat16_on_a_cpu_without_amx_is_warned_of(
    tiny_config, monkeypatch, caplog, capabilities, warned
):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities)
    config = OmegaConf.to_container(
        tiny_config(*MINATAR, "actor_manager.policy_dtype=bfloat16"), resolve=True
    )
    assert isinstance(config, dict)
    with caplog.at_level(logging.WARNING, logger="border_py.trainers.components"):
        build_components(config, RunSettings.of(config), 0)
    messages = [r.getMessage() for r in caplog.records if "no AMX bfloat16 units" in r.getMessage()]
    assert len(messages) == int(warned)
