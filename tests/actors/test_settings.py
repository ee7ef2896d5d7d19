"""What every kind of actors shares: the settings, and the spec each incarnation starts from."""

from __future__ import annotations

import dataclasses
import logging

import psutil
import pytest

from border_py.actors.runtime import ActorRecord, Actors, accounting_of, slots_state
from border_py.actors.settings import ActorSettings, apex_epsilons
from border_py.config import build, group_options
from border_py.errors import ConfigError
from border_py.overrides import to_plain
from border_py.shipped import option_keys

from ..conftest import make_config


def actor_settings(**keys) -> ActorSettings:
    """The shared keys as shipped (``conf/actor_manager/_actors.yaml``), with ``keys`` over them."""
    return ActorSettings(**option_keys("actor_manager", "_actors") | keys)


def test_an_incarnation_continues_its_slot_with_its_own_epsilons():
    settings = actor_settings(
        n_actors=2, n_envs_per_actor=2, n_buffer=50, exploration="apex", policy_dtype="bfloat16"
    )
    record = ActorRecord.resumed(
        {"incarnation": 1, "received": 0, "episodes": 0, "return_sum": 0.0, "env_steps": 700}
    )
    spec = settings.spec(1, record, seed=7)
    assert (spec.index, spec.incarnation, spec.n_envs, spec.n_buffer) == (1, 2, 2, 50)
    assert spec.seed == 7  # the run's root seed: the actor process derives its seeds from it
    assert spec.epsilons == pytest.approx(apex_epsilons(4, 0.4, 7.0)[2:])
    assert spec.policy_dtype == "bfloat16"  # what build_sampler applies (local and Ray actors)
    default = actor_settings().spec(0, ActorRecord(), seed=0)
    assert default.epsilons is None  # the agent's own schedule
    assert default.policy_dtype == "auto"  # as set: a runtime passes what it resolved
    assert settings.spec(1, record, seed=7, policy_dtype="float32").policy_dtype == "float32"


def test_a_resumed_start_continues_the_saved_slots_and_starts_an_added_one_afresh():
    settings = actor_settings(n_actors=3, max_restarts=4)
    saved = {"incarnation": 2, "received": 10, "episodes": 1, "return_sum": 5.0, "env_steps": 900}
    records, kept, policies = settings.slots({"actors": [saved, saved]})
    assert [r.env_steps for r in records] == [900, 900, 0]
    assert [r.incarnation for r in records] == [3, 3, 0]  # their next incarnations
    assert kept == []
    assert [(p.what, p.max_restarts) for p in policies] == [(f"actor {i}", 4) for i in range(3)]
    fresh, _, _ = settings.slots(None)
    assert [r.env_steps for r in fresh] == [0, 0, 0]


def test_a_slot_a_resume_drops_keeps_its_record_and_counts_as_saved(caplog):
    saved = [
        {
            "incarnation": i,
            "received": 10 * (i + 1),
            "episodes": 1,
            "return_sum": 2.0,
            "env_steps": 7,
        }
        for i in range(4)
    ]
    with caplog.at_level(logging.INFO):
        records, kept, policies = actor_settings(n_actors=2).slots({"actors": saved})
    assert [r.incarnation for r in records] == [1, 2] and len(policies) == 2
    assert [r.incarnation for r in kept] == [2, 3]  # as saved: not run, no new incarnation
    assert slots_state(records, kept)["actors"][2:] == saved[2:]  # saved again unchanged
    assert accounting_of(records, kept)["received_total"] == 100
    assert accounting_of(records, kept)["received"] == 0  # this session's: none yet
    assert "actor_manager.n_actors=2: not running actor slots 2, 3 this session" in caplog.text


@pytest.mark.parametrize(
    ("group", "option"),
    [(g, o) for g in ("actor_manager", "trainer") for o in group_options(g)],
)
def test_a_settings_object_holds_its_keys_and_nothing_that_runs(tmp_path, group, option):
    """What an ``actor_manager`` or ``trainer`` option builds is its keys, checked: no process
    list, poll set, channel or connection (the runtime has those), and no child started."""
    config = to_plain(make_config(tmp_path, f"{group}={option}"))
    before = psutil.Process().children(recursive=True)
    settings = build(group, config[group])
    assert type(settings).__name__.endswith("Settings")
    assert set(vars(settings)) == {f.name for f in dataclasses.fields(settings)}
    if group == "actor_manager":
        actors = settings.runtime()
        assert isinstance(actors, Actors) and type(actors).__name__.endswith("Actors")
        assert actors.settings is settings  # built, not started: its slots' records fresh
        assert actors.records == [ActorRecord() for _ in range(settings.n_actors)]
    assert psutil.Process().children(recursive=True) == before


def test_settings_of_no_runtime_of_their_own_say_so_in_one_line():
    with pytest.raises(ConfigError) as refused:
        actor_settings().runtime()
    (line,) = str(refused.value).splitlines()
    assert line.startswith("actor_manager: ActorSettings holds settings only;")
