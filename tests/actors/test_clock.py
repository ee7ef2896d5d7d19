"""Exploration schedules run in the run's env steps (:mod:`border_py.actors.clock`): the serial
trainer's actor, one actor and two actors act with the same epsilon at the same total env step,
SAC's random phase ends at the same total, and a clock started at a resumed run's env steps goes
on from there."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from border_py.actors.clock import LocalClock, RunClock, SharedClock
from border_py.actors.sampler import Sampler, SampleStats
from border_py.agents.dqn import DQN
from border_py.agents.exploration import linear_epsilon
from border_py.agents.sac import SAC
from border_py.envs.factory import GymEnvFactory

DECAY = 60  # env steps of the epsilon decay, all actors together


def _dqn_sampler(clock: RunClock, seed: int) -> Sampler:
    factory = GymEnvFactory("CartPole-v1")
    agent = DQN(
        *factory.spaces(),
        hidden_sizes=[8],
        seed=seed,
        eps_start=1.0,
        eps_final=0.1,
        eps_decay_steps=DECAY,
    )
    return Sampler(factory, agent, n_envs=1, seed=seed, clock=clock)


def _epsilons(samplers: list[Sampler], clock: RunClock, total: int) -> dict[int, float]:
    """Step the samplers in turn until the run's clock reaches ``total``; after each env step,
    the run's env steps and the epsilon of the sampler that took it (its next exploring call's)."""
    seen: dict[int, float] = {}
    while clock.position() < total:
        for sampler in samplers:
            sampler.step(SampleStats())
            seen[clock.position()] = sampler.agent.exploration_stats()["train/epsilon"]
    return seen


def test_the_serial_actor_one_actor_and_two_give_the_same_epsilon_at_the_same_total():
    serial = LocalClock()  # the serial trainer's actor
    one = SharedClock.create(mp.get_context("spawn"), 1, 0)
    two = SharedClock.create(mp.get_context("spawn"), 2, 0)
    by_serial = _epsilons([_dqn_sampler(serial, 0)], serial, 2 * DECAY)
    by_one = _epsilons([_dqn_sampler(one.slot(0), 1)], one, 2 * DECAY)
    by_two = _epsilons([_dqn_sampler(two.slot(i), 2 + i) for i in range(2)], two, 2 * DECAY)
    schedule = {t: linear_epsilon(t, 1.0, 0.1, DECAY) for t in range(1, 2 * DECAY + 1)}
    assert by_serial == schedule
    assert by_one == schedule
    assert by_two == schedule  # each actor on its own would be at half the total: eps 0.55 at 60
    assert by_two[DECAY] == pytest.approx(0.1)


def _advance(clock: SharedClock, env_steps: int) -> None:
    clock.advance(env_steps)


def test_each_actor_adds_to_its_own_slot_and_every_slot_reads_the_total():
    clock = SharedClock.create(mp.get_context("spawn"), 3, 1000)
    clock.slot(0).advance(4)
    clock.slot(2).advance(6)
    child = mp.get_context("fork").Process(target=_advance, args=(clock.slot(1), 5))
    child.start()  # another process adds to slot 1: the memory is shared, not copied
    child.join(timeout=10)
    assert child.exitcode == 0
    assert [clock.position(), clock.slot(0).position(), clock.slot(1).position()] == [1015] * 3
    with pytest.raises(RuntimeError, match="no slot"):
        clock.advance(1)


def _sac_sampler(clock: RunClock, seed: int, random_steps: int) -> Sampler:
    factory = GymEnvFactory("Pendulum-v1")
    agent = SAC(*factory.spaces(), hidden_sizes=[8], seed=seed, random_steps=random_steps)
    return Sampler(factory, agent, n_envs=2, seed=seed, clock=clock)


def _random_phase(samplers: list[Sampler], clock: RunClock, steps: int) -> list[tuple[int, float]]:
    """(run's env steps, train/random_phase) after each vector step of each sampler, in turn."""
    seen = []
    for _ in range(steps):
        for sampler in samplers:
            sampler.step(SampleStats())
            seen.append((clock.position(), sampler.agent.exploration_stats()["train/random_phase"]))
    return seen


def test_sacs_random_phase_ends_at_the_same_total_for_one_actor_and_two():
    one, two = LocalClock(), SharedClock.create(mp.get_context("spawn"), 2, 0)
    alone = _random_phase([_sac_sampler(one, 0, random_steps=20)], one, 20)
    pair = _random_phase([_sac_sampler(two.slot(i), i, random_steps=20) for i in range(2)], two, 10)
    for seen in (alone, pair):  # two envs per actor: the run's clock goes by 2
        assert seen == [(t, float(t < 20)) for t in range(2, 42, 2)]


def test_an_actor_added_on_resume_goes_on_from_the_runs_env_steps():
    resumed = SharedClock.create(mp.get_context("spawn"), 2, 50)  # the checkpoint counted 50
    samplers = [_dqn_sampler(resumed.slot(i), 7 + i) for i in range(2)]  # slot 1: a new actor
    seen = _epsilons(samplers, resumed, 60)
    assert seen == {t: linear_epsilon(t, 1.0, 0.1, DECAY) for t in range(51, 61)}
    assert max(seen.values()) < 0.26  # a fresh schedule would start at 1.0
    at_30 = LocalClock(30)
    sac = _sac_sampler(at_30, 0, random_steps=20)  # an actor past the run's random phase
    assert _random_phase([sac], at_30, 1) == [(32, 0.0)]  # not redone: a fresh count says 1.0
