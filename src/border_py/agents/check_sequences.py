"""The experience :func:`border_py.agents.check.check_agent` feeds a recurrent agent
(:class:`~border_py.agents.base.RecurrentActing`): sequences cut as its actors cut them.

The env is stepped as an actor steps it (:class:`~border_py.envs.vector.VectorEnv`, one env) by a
copy of the agent built for the purpose, through the actors' own
:class:`~border_py.actors.recurrent.RecurrentStream`: each step's state is the one the copy acted
with, zeros at every episode start, and the windows are cut by the actors'
:class:`~border_py.actors.sequencer.SequenceBuilder` with the agent's ``burn_in``, ``length``,
``period``, ``n_step`` and ``gamma``. Batches are drawn from them uniformly (with replacement).

To check that padding changes nothing, :func:`garbled` fills what a batch pads with other values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.sequences import Sequences

__all__ = ["GARBLE", "collect_sequences", "garbled", "padded", "sample_sequences"]

MAX_STEPS = 20_000  # env steps a collection may take (far more than a batch needs)
MIN_STEPS = 200  # env steps a collection takes at least (several episodes)
GARBLE = 3.0  # what padded observations, rewards and targets hold in a garbled batch


def collect_sequences(agent: Any, env: Any, sequences: int, seed: int) -> Sequences:
    """At least ``sequences`` sequences (and :data:`MIN_STEPS` env steps) of ``env`` as an actor
    cuts them, acting with ``agent`` (exploring; a copy kept for this: it acts and moves on).

    Raises:
        RuntimeError: no sequence in :data:`MAX_STEPS` env steps.
    """
    # imported here: the actors import this package (its protocol), so not at its import
    from border_py.actors.recurrent import RecurrentStream
    from border_py.envs.vector import VectorEnv

    envs = VectorEnv([env], seed)
    stream = RecurrentStream(agent, 1, float(agent.gamma), int(agent.n_step))
    parts: list[Sequences] = []
    rows, steps = 0, 0
    while (rows < sequences or steps < MIN_STEPS) and steps < MAX_STEPS:
        obs = envs.obs
        action = stream.act(obs)
        stream.add(obs, action, envs.step(action))
        steps += 1
        if (taken := stream.take()) is not None:
            parts.append(taken)
            rows += len(taken)
    if not parts:
        raise RuntimeError(f"no sequence was cut in {steps} env steps")
    return Sequences.concat(parts)


def sample_sequences(experience: Sequences, rng: np.random.Generator, size: int) -> Sequences:
    """``size`` rows drawn uniformly (with replacement) from ``experience``."""
    rows = rng.integers(0, len(experience), size)
    columns = {name: array[rows] for name, array in experience.arrays().items()}
    return Sequences(**columns, burn_in=experience.burn_in)


def padded(batch: Sequences) -> int:
    """The padded entries of ``batch``: stored indices without an observation, and learning
    steps without an action."""
    return int((~batch.present).sum() + (~batch.mask).sum())


def garbled(batch: Sequences, n_actions: int) -> Sequences:
    """``batch`` with other values where it pads: observations, actions and rewards at indices
    without an observation (:data:`GARBLE`, the next of the ``n_actions``), and at learning
    steps without an action their action, ``ret`` and ``discount`` (:data:`GARBLE`) and
    ``offset`` (the tail ``N``, a bootstrap index inside the window). What an agent learns from
    it must be what it learns from ``batch``."""
    learning = slice(batch.burn_in, batch.burn_in + batch.length)
    blank = ~batch.present
    unacted = blank.copy()
    unacted[:, learning] |= ~batch.mask
    obs = batch.obs.copy()
    obs[blank] = np.asarray(GARBLE).astype(obs.dtype)
    action = np.where(unacted, (batch.action + 1) % n_actions, batch.action)
    masked = ~batch.mask
    return Sequences(
        obs=obs,
        action=action,
        reward=np.where(unacted, np.float32(GARBLE), batch.reward),
        present=batch.present,
        state=batch.state,
        burn=batch.burn,
        first_prev_action=batch.first_prev_action,
        first_prev_reward=batch.first_prev_reward,
        ret=np.where(masked, np.float32(GARBLE), batch.ret),
        discount=np.where(masked, np.float32(GARBLE / 4), batch.discount),
        offset=np.where(masked, max(batch.tail, 1), batch.offset),
        mask=batch.mask,
        burn_in=batch.burn_in,
        weight=batch.weight,
        index=batch.index,
    )
