"""trainers/final.py: at a run's end the final weights and ``best/`` play fresh episodes, on reset
seeds no selection evaluation used, and ``result.json`` says what they scored."""

from __future__ import annotations

import json

import pytest

from border_py import train
from border_py.cli.eval import evaluate_checkpoint
from border_py.errors import ConfigError
from border_py.evaluation.seeds import run_eval_seeds, selection_seed
from border_py.trainers.final import final_seeds
from border_py.trainers.train import prepare

from ..conftest import TINY, make_config
from ..seed_log import logged_seeds

SEED = 3


def _seed_log(path) -> str:
    """An evaluation-only wrapper that logs every evaluation reset's seed to ``path``."""
    return f"env.wrappers=[{{_target_:tests.seed_log.SeedLog,path:'{path}',evaluation_only:true}}]"


def _run(tmp_path, trainer: str, *overrides: str) -> tuple[dict, list[int]]:
    """A tiny run (selection evaluations of 2 episodes at opt 150 and 300) whose evaluation resets
    are logged; its result.json's summary and the logged seeds."""
    log = tmp_path / "seeds.txt"
    config = make_config(
        tmp_path, *TINY, f"trainer={trainer}", f"seed={SEED}", _seed_log(log), *overrides
    )
    train(config)
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    return result["summary"], logged_seeds(log) if log.exists() else []


@pytest.mark.parametrize("trainer", ["serial", pytest.param("async", marks=pytest.mark.slow)])
def test_final_and_best_play_the_asked_episodes_on_seeds_no_selection_evaluation_used(
    tmp_path, trainer
):
    summary, seeds = _run(tmp_path, trainer, "trainer.final_eval_episodes=5")
    fresh = final_seeds(SEED, 5)
    first = selection_seed(SEED)
    selection = [first, first + 1]  # trainer.eval_episodes=2 (debug=tiny)
    final, best = summary["final_eval"], summary["best_eval"]
    assert final["episodes"] == best["episodes"] == 5
    assert final["seeds"] == best["seeds"] == [fresh[0], fresh[-1]]
    assert final["opt_steps"] == 300 and best["opt_steps"] in (150, 300)
    # what the evaluation env was really reset with: every selection evaluation, then the final
    # weights' episodes, then best/'s (the same ones), unless best/ holds the final weights
    played = 1 if best["opt_steps"] == 300 else 2
    assert seeds == selection * 2 + list(fresh) * played
    assert not set(fresh) & set(run_eval_seeds(SEED))  # none a selection evaluation may use
    for score in (final, best):
        assert isinstance(score["return_mean"], float) and score["return_std"] >= 0


def test_best_eval_is_what_border_eval_of_best_scores_on_the_same_seeds(tmp_path):
    config = make_config(
        tmp_path, *TINY, "trainer=serial", "trainer.final_eval_episodes=4", "trainer.max_opts=600"
    )
    best = train(config)["best_eval"]
    first = best["seeds"][0]
    _, _, result, _, record = evaluate_checkpoint(
        str(tmp_path / "run"), [f"eval.seed={first}", "eval.n_episodes=4"]
    )
    assert record["opt_steps"] == best["opt_steps"]
    assert result.return_mean == best["return_mean"]  # the same number, not a close one
    assert result.return_std == best["return_std"]


def test_final_eval_episodes_0_plays_and_writes_nothing(tmp_path):
    summary, seeds = _run(tmp_path, "serial", "trainer.final_eval_episodes=0")
    assert "final_eval" not in summary and "best_eval" not in summary
    first = selection_seed(SEED)
    assert seeds == [first, first + 1] * 2  # the selection evaluations only


def test_a_pruned_run_is_not_evaluated_again(tmp_path):
    log = tmp_path / "seeds.txt"
    config = make_config(
        tmp_path, *TINY, "trainer=serial", "trainer.final_eval_episodes=3", _seed_log(log)
    )
    summary = train(config, on_eval=lambda opt, env, value: True)  # a tuner pruning the trial
    assert summary["stopped_by_callback"] and "final_eval" not in summary
    assert len(logged_seeds(log)) == 2  # the one selection evaluation


def test_a_resumed_run_evaluates_its_own_final_weights(tmp_path):
    first, seeds = _run(tmp_path, "serial", "trainer.final_eval_episodes=2", "trainer.max_opts=150")
    assert first["final_eval"]["opt_steps"] == 150
    fresh = list(final_seeds(SEED, 2))
    assert seeds[-2:] == fresh  # best/ holds the final weights (one evaluation): played once
    resumed = train(
        make_config(tmp_path, f"resume={tmp_path / 'run'}", "trust=[tests.seed_log.SeedLog]"),
        overrides=["trainer.max_opts=300"],
    )
    assert resumed["final_eval"]["opt_steps"] == 300
    assert logged_seeds(tmp_path / "seeds.txt")[len(seeds) :][-2:] == fresh  # played again
    assert resumed["final_eval"]["seeds"] == first["final_eval"]["seeds"]  # the run's own seeds
    saved = json.loads((tmp_path / "run" / "result.json").read_text())["summary"]
    assert saved["final_eval"] == resumed["final_eval"]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("-1", "trainer.final_eval_episodes=-1: must be null (the env's default: 100, Atari 10)"),
        ("true", "trainer.final_eval_episodes=True: must be null"),
        ("20000", "trainer.final_eval_episodes=20000: more than 10,000 episodes"),
    ],
)
def test_a_bad_final_eval_episodes_is_one_line_naming_the_key(tmp_path, value, said):
    with pytest.raises(ConfigError) as bad:
        prepare(make_config(tmp_path, *TINY, f"trainer.final_eval_episodes={value}"), [])
    assert str(bad.value).startswith(said)
    assert "\n" not in str(bad.value)
