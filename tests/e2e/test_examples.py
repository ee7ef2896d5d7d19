"""examples/: the reference agent (TinyQ) and env (Corridor) written against the agent contract
in docs/05-customization/agents.md, run as a user would: configs on Hydra's search path, serial and
async, a resume, ``border eval``, and the Python script with each start method."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import REPO, run_border, selected_cases, two_at_a_time

EXAMPLES = {"PYTHONPATH": str(REPO / "examples")}
RECIPE = ["hydra.searchpath=[pkg://tiny_rl.conf]", "experiment=tiny_q_corridor", "progress=false"]
TRAINERS = {
    "serial": ["trainer=serial"],
    "async": ["trainer=async", "actor_manager.n_actors=2"],
}
BEST = 0.94  # seven steps right: six of -0.01, then +1


def summary(run_dir):
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "completed"
    return result["summary"]


@pytest.fixture(scope="module")
def solved(request, tmp_path_factory) -> dict[str, Exception | None]:
    """:func:`solve_resume_evaluate` in every selected trainer, two at a time: what each raised."""
    test = "test_tiny_q_solves_corridor_resumes_and_evaluates"
    trainers = [case["trainer"] for case in selected_cases(request, test)]
    errors = two_at_a_time(
        lambda trainer: solve_resume_evaluate(tmp_path_factory.mktemp("tiny_q"), trainer), trainers
    )
    return dict(zip(trainers, errors, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(TRAINERS))
def test_tiny_q_solves_corridor_resumes_and_evaluates(solved, trainer):
    if (error := solved[trainer]) is not None:
        raise error


def solve_resume_evaluate(tmp_path: Path, trainer: str) -> None:
    """TinyQ solves Corridor in ``trainer``, a resume and ``border eval`` need its package
    trusted, and then continue and evaluate it; in ``tmp_path``."""
    run_dir = tmp_path / "run"
    out = run_border(
        ["train", *RECIPE, *TRAINERS[trainer], f"hydra.run.dir={run_dir}"], tmp_path, env=EXAMPLES
    )
    assert out.returncode == 0, out.stderr
    first = summary(run_dir)
    assert first["best_return"] == pytest.approx(BEST) and first["solved_at"] is not None

    more = first["opt_steps"] + 250
    resume = [
        "train",
        f"resume={run_dir}",
        "trainer.target_return=null",
        f"trainer.max_opts={more}",
    ]
    out = run_border(resume, tmp_path, env=EXAMPLES)  # a run dir is data: its code is not trusted
    assert out.returncode == 2
    assert (
        "agent._target_=tiny_rl.agent.TinyQ in " in out.stderr
        and "add trust=[tiny_rl.agent.TinyQ]" in out.stderr
    )
    out = run_border([*resume, "trust=[tiny_rl]"], tmp_path, env=EXAMPLES)
    assert out.returncode == 0, out.stderr
    assert summary(run_dir)["opt_steps"] == more

    evaluate = ["eval", str(run_dir), "eval.n_episodes=3"]
    assert run_border(evaluate, tmp_path, env=EXAMPLES).returncode == 2
    out = run_border([*evaluate, "trust=[tiny_rl]"], tmp_path, env=EXAMPLES)
    assert out.returncode == 0, out.stderr
    (written,) = (run_dir / "checkpoints" / "best").glob("eval_*.json")
    assert json.loads(written.read_text())["episode_returns"] == pytest.approx([BEST] * 3)


@pytest.mark.slow
def test_a_video_of_an_env_without_rgb_array_rendering_is_refused_in_one_line(tmp_path):
    run_dir = tmp_path / "run"
    short = ["trainer=serial", "trainer.max_opts=10", "trainer.warmup_period=64"]
    short += ["trainer.eval_interval=10", "trainer.eval_episodes=1", f"hydra.run.dir={run_dir}"]
    out = run_border(["train", *RECIPE, *short], tmp_path, env=EXAMPLES)
    assert out.returncode == 0, out.stderr
    out = run_border(
        ["eval", str(run_dir), "eval.video=true", "trust=[tiny_rl]"], tmp_path, env=EXAMPLES
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "border: error: eval.video=true: tiny_rl:Corridor-v0 does not render rgb_array frames"
        " (its render modes: ansi); record videos of an env that does"
    ]
    assert not list((run_dir / "checkpoints" / "best").glob("videos_*"))


@pytest.fixture(scope="module")
def scripted(request, tmp_path_factory) -> dict[str, Exception | None]:
    """:func:`train_with_the_script` with every selected start method, two at a time: what each
    raised."""
    test = "test_the_python_script_trains_with_every_start_method"
    methods = [case["start_method"] for case in selected_cases(request, test)]
    errors = two_at_a_time(
        lambda method: train_with_the_script(tmp_path_factory.mktemp("script"), method), methods
    )
    return dict(zip(methods, errors, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_the_python_script_trains_with_every_start_method(scripted, start_method):
    if (error := scripted[start_method]) is not None:
        raise error


def train_with_the_script(tmp_path: Path, start_method: str) -> None:
    """``examples/train_tiny_q.py`` trains TinyQ to Corridor's best return with ``start_method``,
    in ``tmp_path``."""
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "train_tiny_q.py"),
            f"run_dir={tmp_path / 'run'}",
            f"actor_manager.start_method={start_method}",
            "progress=false",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("returns      best 0.94")
    assert summary(tmp_path / "run")["best_return"] == pytest.approx(BEST)


def test_tiny_q_resumes_with_the_lr_it_is_given(monkeypatch):
    """The example agent keeps its configured lr after loading a state (the agent contract,
    docs/05-customization/agents.md)."""
    import gymnasium as gym

    monkeypatch.syspath_prepend(str(REPO / "examples"))
    from tiny_rl.agent import TinyQ

    spaces = {
        "observation_space": gym.spaces.Box(-1, 1, (3,)),
        "action_space": gym.spaces.Discrete(2),
    }
    saved = TinyQ(**spaces, lr=1e-3).state_dict()
    resumed = TinyQ(**spaces, lr=3e-4)
    resumed.load_state_dict(saved)
    assert [g["lr"] for g in resumed.optimizer.param_groups] == [3e-4]
