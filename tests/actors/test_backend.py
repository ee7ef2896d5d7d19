"""What every actor backend shares: the settings, and the spec each incarnation starts from."""

from __future__ import annotations

import pytest

from border_py.actors.backend import ActorRecord, ActorSettings, apex_epsilons


def test_an_incarnation_continues_its_slot_with_its_own_epsilons():
    settings = ActorSettings(n_actors=2, n_envs_per_actor=2, n_buffer=50, exploration="apex")
    record = ActorRecord.resumed(
        {"incarnation": 1, "received": 0, "episodes": 0, "return_sum": 0.0, "env_steps": 700}
    )
    spec = settings.spec(1, record)
    assert (spec.index, spec.incarnation, spec.n_envs, spec.n_buffer) == (1, 2, 2, 50)
    assert spec.exploration_steps == 700
    assert spec.epsilons == pytest.approx(apex_epsilons(4, 0.4, 7.0)[2:])
    assert ActorSettings().spec(0, ActorRecord()).epsilons is None  # the agent's own schedule
