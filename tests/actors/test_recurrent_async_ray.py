"""R2D2 on the async trainer with Ray actors (``actor_manager=ray``, on test_ray's local Ray bound
to 127.0.0.1): the same sequences, priorities and memory as local actors, returned as call
results; the run trains, evaluates, checkpoints and resumes, its epsilon schedule continuing."""

from __future__ import annotations

from typing import Any

import pytest

from border_py.agents.exploration import linear_epsilon
from border_py.runs.checkpoint import load_checkpoint

from ..conftest import make_config, scalar_tags
from .test_ray import local_ray, no_leftover_processes  # noqa: F401  (the module's Ray, its check)
from .test_recurrent_async import ASYNC_R2D2, resumed_budget, streams_of, train_and_watch

RAY_R2D2 = [
    *(o for o in ASYNC_R2D2 if not o.startswith("actor_manager.exploration")),
    "actor_manager=ray",
    "agent.eps_decay_steps=100000",  # epsilon well above its final value: a restart would show
]


@pytest.fixture(scope="module")
def ray_run(local_ray, tmp_path_factory) -> dict[str, Any]:  # noqa: F811
    """One async R2D2 run on Ray actors of 1500 env steps, resumed from its checkpoint for 1600 env
    steps more. The first budget counts env steps, not opt steps: the learner can reach a few
    dozen opt steps on the batches of the actors' first calls alone, all sampled with the
    initial weights, while 1500 env steps need calls submitted after a publication."""
    root = tmp_path_factory.mktemp("r2d2_ray")
    first, noted = train_and_watch(
        make_config(root, *RAY_R2D2, "trainer.max_opts=null", "trainer.max_env_steps=1500")
    )
    saved = load_checkpoint(root / "run").state
    second, noted_after = train_and_watch(
        make_config(root, "resume=" + str(root / "run")), overrides=resumed_budget(saved)
    )
    return {
        "run": root / "run",
        "first": first,
        "second": second,
        "saved": saved,
        "noted": noted,
        "noted_after": noted_after,
    }


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_ray_actors_send_sequences_with_their_priorities_and_memory(ray_run):
    batches = [b for b in ray_run["noted"] if b["kind"] != "NoneType"]
    assert batches and {b["kind"] for b in batches} == {"Sequences"}
    assert all(b["priorities"] and b["fresh_state_at_starts"] for b in batches)
    assert any(b["some_memory"] for b in batches)
    assert {b["actor"] for b in batches} == {0, 1}
    assert not streams_of(batches, 0) & streams_of(batches, 1)  # keys through Ray's results
    first = ray_run["first"]
    acc = first["accounting"]
    assert acc["sent"] == acc["received"] == first["samples"] == sum(b["rows"] for b in batches)
    assert max(b["policy_opt_steps"] for b in batches) > 0  # weights refreshed through Ray
    tags = scalar_tags(ray_run["run"])
    assert {"train/loss", "perf/policy_lag", "eval/return_mean"} <= set(tags)
    assert first["final_eval"]["episodes"] == 2


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_resumed_ray_r2d2_run_continues_its_slots_and_schedule(ray_run):
    second, saved, run = ray_run["second"], ray_run["saved"], ray_run["run"]
    assert second["opt_steps"] > saved.opt_steps and second["env_steps"] >= saved.env_steps + 1600
    acc = second["accounting"]
    assert acc["sent"] == acc["received"] > 0
    assert acc["received_total"] == saved.samples + acc["received"]
    after = [b for b in ray_run["noted_after"] if b["kind"] == "Sequences"]
    assert after and all(b["priorities"] and b["fresh_state_at_starts"] for b in after)
    before = [b for b in ray_run["noted"] if b["kind"] == "Sequences"]
    for actor in (0, 1):  # the next incarnations cut their sequences under new streams
        assert not streams_of(after, actor) & streams_of(before, actor)
    # each call explores from the run's env steps, the checkpoint's on: no restart at 1.0
    continued = linear_epsilon(saved.env_steps, 1.0, 0.05, 100000)
    assert continued < 1.0 and all(b["epsilon"] <= continued + 1e-9 for b in after)
    log = (run / "train.log").read_text()
    assert "actor 0 (incarnation 1) runs on node" in log  # the next incarnation: fresh seeds
