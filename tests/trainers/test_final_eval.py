"""trainers/final.py: at a run's end the final weights and ``best/`` play fresh episodes, on reset
seeds no selection evaluation used, and ``result.json`` says what they scored; a first Ctrl-C cuts
them short."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
import uuid

import pytest

from border_py import train
from border_py.agents.dqn import DQN
from border_py.cli.eval import evaluate_checkpoint
from border_py.envs.factory import GymEnvFactory
from border_py.errors import ConfigError
from border_py.evaluation.evaluator import Evaluator
from border_py.evaluation.seeds import run_eval_seeds, selection_seed
from border_py.evaluation.service import InlineEvaluation
from border_py.runs.timeline import is_complete
from border_py.trainers.final import PolicySnapshot, final_scores, final_seeds
from border_py.trainers.train import prepare

from ..conftest import BORDER, REPO, TINY, make_config, processes_with_marker
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


class CountingDQN(DQN):
    """A DQN that counts its act calls (one per evaluation step)."""

    calls = 0

    def act(self, obs, explore):
        self.calls += 1
        return super().act(obs, explore)


def _in_process(agent: DQN) -> tuple[InlineEvaluation, PolicySnapshot, PolicySnapshot]:
    """The serial trainer's evaluation service with ``agent``; its final weights (the agent's own)
    and other weights as best/'s."""
    cartpole = GymEnvFactory("CartPole-v1")
    service = InlineEvaluation(Evaluator(cartpole, 2, 7, 200), agent)
    final = PolicySnapshot(300, 900, {k: v.clone() for k, v in agent.policy_state().items()})
    best = PolicySnapshot(
        150, 450, DQN(*cartpole.spaces(), hidden_sizes=[8], seed=4).policy_state()
    )
    return service, final, best


def test_a_stop_during_the_final_evaluation_in_process_ends_it_and_starts_no_other(caplog):
    agent = CountingDQN(*GymEnvFactory("CartPole-v1").spaces(), hidden_sizes=[8], seed=3)
    service, final, best = _in_process(agent)
    try:
        with caplog.at_level(logging.INFO):
            scores = final_scores(service, range(500, 600), final, best, lambda: agent.calls >= 7)
    finally:
        service.close()
    assert scores == {}
    assert agent.calls == 7  # not one step past the stop, in the first of 100 episodes
    assert "evaluation of the opt 300 weights stopped after 0 of 100 episodes" in caplog.text
    assert "opt 150" not in caplog.text  # best/'s episodes were not started
    assert "final evaluation cut short by a stop signal: result.json has no final_eval" in (
        caplog.text
    )


def test_a_stop_during_best_s_final_evaluation_keeps_final_eval(caplog):
    agent = CountingDQN(*GymEnvFactory("CartPole-v1").spaces(), hidden_sizes=[8], seed=3)
    service, final, best = _in_process(agent)
    seeds = range(500, 503)
    try:
        final_steps = int(sum(service.evaluator.evaluate(agent, seeds).episode_returns))
        agent.calls = 0
        with caplog.at_level(logging.INFO):
            scores = final_scores(  # a stop 2 steps into best/'s first episode
                service, seeds, final, best, lambda: agent.calls >= final_steps + 2
            )
    finally:
        service.close()
    assert list(scores) == ["final_eval"] and scores["final_eval"]["episodes"] == 3
    assert agent.calls == final_steps + 2
    assert "evaluation of the opt 150 weights stopped after 0 of 3 episodes" in caplog.text
    assert "best/'s final evaluation cut short by a stop signal: result.json has no best_eval" in (
        caplog.text
    )


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["serial", "async"])
def test_one_ctrl_c_during_the_final_evaluation_ends_it_in_seconds(tmp_path, trainer):
    """The final evaluation's 100 episodes are slow (0.2 s a step: minutes in all, as on Atari),
    training and selection evaluations are not. One Ctrl-C once they have begun (in the learner's
    process: serial; in the evaluator's: async): the run ends at once, completed (its budget was
    done: a resume has nothing left to train), its final checkpoint written, no final_eval, no
    process left."""
    run, flag, marker = tmp_path / "run", tmp_path / "final_started", uuid.uuid4().hex
    fresh = final_seeds(SEED, 100)
    slow = (
        "env.wrappers=[{_target_:tests.slow_episodes.SlowOnSeeds,"
        f"first:{fresh[0]},last:{fresh[-1]},flag:'{flag}',evaluation_only:true}}]"
    )
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    args = [f"trainer={trainer}", "experiment=none", *TINY, f"seed={SEED}", slow]
    args += ["trainer.final_eval_episodes=100", "progress=false", f"run_dir={run}"]
    proc = subprocess.Popen(
        [*BORDER, "train", *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        env={**os.environ, "PYTHONPATH": path, "BORDER_TEST_MARKER": marker},
    )
    try:
        deadline = time.monotonic() + 180
        while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert flag.exists(), "the final evaluation never started"
        os.killpg(proc.pid, signal.SIGINT)  # one Ctrl-C
        sent = time.monotonic()
        output, _ = proc.communicate(timeout=30)  # the evaluation alone would take minutes
        seconds = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, output
    assert seconds < 10, output
    assert "Traceback" not in output and "stopping now" not in output, output
    assert "final evaluation cut short by a stop signal: result.json has no final_eval" in output
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "completed", result
    summary = result["summary"]
    assert summary["opt_steps"] == 300 and not summary["interrupted"]
    assert "final_eval" not in summary and "best_eval" not in summary
    assert is_complete(run / "checkpoints" / "000000300")
    deadline = time.monotonic() + 5
    while processes_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_with_marker(marker)
