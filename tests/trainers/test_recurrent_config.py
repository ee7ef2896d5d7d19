"""agent=r2d2 and the sequence replay options: built through the config, and what they refuse
in one line before anything starts."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from border_py.actors.recurrent import RecurrentStream
from border_py.actors.sampler import Sampler, SampleStats
from border_py.agents.r2d2 import R2D2
from border_py.errors import ConfigError
from border_py.replay.sequence_prioritized import PrioritizedSequenceReplayBuffer
from border_py.runs.settings import RunSettings
from border_py.sequences import Sequences
from border_py.trainers.components import build_components, checkpoint_nbytes

R2D2_RUN = ("agent=r2d2", "replay_buffer=sequence_prioritized", "trainer=serial")


def _components(tiny_config, *overrides: str):
    config = OmegaConf.to_container(tiny_config(*overrides), resolve=True)
    assert isinstance(config, dict)
    return config, build_components(config, RunSettings.of(config), 0)


def _refusal(tiny_config, *overrides: str) -> str:
    with pytest.raises(ConfigError) as err:
        _components(tiny_config, *overrides)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_r2d2_is_built_with_a_sequence_buffer_and_its_sampler_carries_memory(tiny_config):
    config, parts = _components(tiny_config, *R2D2_RUN)
    assert isinstance(parts.agent, R2D2) and parts.agent.period == 8  # length // 2
    assert isinstance(parts.buffer, PrioritizedSequenceReplayBuffer)
    _, replay = checkpoint_nbytes(config, parts, replay=True)
    assert replay > 0  # the sequences' bytes, sized by the agent's burn-in, length and state
    sampler = Sampler(parts.env_factory, parts.agent, 2, seed=0, priorities=True)
    assert isinstance(sampler.stream, RecurrentStream)
    stats = SampleStats()
    batch = None
    while batch is None:  # the first windows close after length + n_step steps
        batch = sampler.step(stats)
    assert isinstance(batch, Sequences) and batch.priority is not None  # the actor's initial ones
    assert batch.priority.shape == (len(batch),) and np.isfinite(batch.priority).all()
    sampler.close()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ("agent=r2d2", "replay_buffer=uniform"),
            "replay_buffer._target_=border_py.replay.uniform.UniformReplayBuffer: the recurrent"
            " agent R2D2 learns from sequences: use replay_buffer=sequence or"
            " replay_buffer=sequence_prioritized",
        ),
        (
            ("agent=dqn", "replay_buffer=sequence"),
            "replay_buffer._target_=border_py.replay.sequence_replay.SequenceReplayBuffer: stores"
            " sequences for recurrent agents (agent=r2d2); DQN learns from transitions: use"
            " replay_buffer=uniform or replay_buffer=prioritized",
        ),
        ((*R2D2_RUN, "agent.length=0"), "agent.length=0: must be a positive int"),
        ((*R2D2_RUN, "agent.burn_in=-1"), "agent.burn_in=-1: must be a non-negative int"),
        ((*R2D2_RUN, "agent.period=17"), "agent.period=17: must be at most length=16"),
        ((*R2D2_RUN, "agent.n_step=17"), "agent.n_step=17: must be at most length=16"),
        (
            (*R2D2_RUN, "replay_buffer.frame_stack=4"),
            "replay_buffer.frame_stack=4: sequence replay stores observations as they are",
        ),
        (
            (*R2D2_RUN, "env=pendulum"),
            "agent._target_: R2D2 needs a Discrete action space, the env has Box(",
        ),
        (
            (*R2D2_RUN, "env=gym", "env.id=popgym:popgym-RepeatPreviousEasy-v0"),
            "agent._target_: R2D2 needs Box observations, the env has Discrete(4)",
        ),
    ],
)
def test_bad_sequence_settings_are_refused_in_one_line(tiny_config, overrides, message):
    assert _refusal(tiny_config, *overrides).startswith(message)
