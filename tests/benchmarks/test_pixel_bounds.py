"""benchmarks/pixel_bounds.py: at its tiny size on MinAtar it measures every stage, runs the recipe
for real and tells its processes apart; its measurement of the run from outside (pixel_run.py)
counts each process's CPU over the steady stretch and, for a learner that evaluates in its own
process, the evaluations' time."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from ..conftest import REPO

POSITIVE = (
    "bare_opt_per_sec",
    "bare_denormals_kept_opt_per_sec",
    "bare_before_opt_per_sec",
    "bare_after_opt_per_sec",
    "learner_opt_per_sec",
    "raw_env_steps_per_sec",
    "actor_policy_us",
    "actor_env_us",
    "actor_us_per_step",
    "env_steps_per_opt",
    "learner_bound_env_steps_per_sec",
    "actor_bound_env_steps_per_sec",
    "bound_env_steps_per_sec",
    "run_seconds",
    "run_env_steps_per_sec",
    "run_opt_steps_per_sec",
    "fed_vs_bare",
    "actors_vs_raw",
    "run_vs_bound",
    "cpu_cores_learner",
    "cpu_cores_actors",
    "criterion_value",
)


@pytest.fixture
def pixel_run(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import pixel_run

    return pixel_run


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("minatar") is None, reason="the [minatar] extra")
def test_pixel_bounds_runs_at_its_tiny_size():
    command = [
        *(sys.executable, "benchmarks/pixel_bounds.py", "--recipe", "minatar"),
        *("--seconds", "0.5", "--env-steps", "8000", "--warmup", "500", "--fill", "2000"),
        *("trainer=async", "actor_manager.n_actors=1", "trainer.eval_env_interval=500"),
        # ~230 opt steps: a steady stretch of about a second, CPU sampled every 0.2 s
        *("trainer.eval_episodes=2", "trainer.replay_ratio=2", "actor_manager.n_buffer=64"),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1].startswith("RESULT ")
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert {k: result[k] for k in POSITIVE if not result[k] > 0} == {}
    assert result["experiment"] == "dqn_minatar_breakout" and result["trainer"] == "async"
    assert result["env_steps_per_opt"] == 32  # batch 64 / the test's replay ratio 2
    bare = (result["bare_before_opt_per_sec"] + result["bare_after_opt_per_sec"]) / 2
    assert result["bare_opt_per_sec"] == pytest.approx(bare, rel=1e-3)  # before and after the run
    assert result["fed_vs_bare"] == pytest.approx(result["run_opt_steps_per_sec"] / bare, rel=1e-3)
    learner, actors = (result[f"{k}_bound_env_steps_per_sec"] for k in ("learner", "actor"))
    assert result["bound_env_steps_per_sec"] == pytest.approx(min(learner, actors), rel=1e-3)
    assert result["binding"] == ("learner" if learner < actors else "actors")
    criterion = {"learner": "fed_vs_bare", "actors": "actors_vs_raw"}[result["binding"]]
    assert result["criterion"] == criterion
    assert result["criterion_value"] == result[criterion]
    # each child told apart by the name it took (border-actor-0, border-evaluator)
    assert (result["processes_learner"], result["processes_actors"]) == (1, 1)
    assert result["processes_evaluator"] == 1
    assert 0 <= result["evaluator_cpu_share"] < 1  # evaluations in the stretch: as the load lets
    assert result["evaluator_measured"] == "its process"
    assert any(line.startswith("binds: ") for line in lines)


def test_the_cpu_of_each_role_is_counted_between_two_moments(pixel_run):
    samples = pixel_run.CpuSamples(
        times=[0.0, 1.0, 2.0, 3.0],
        cpu=[{1: 0.5, 2: 0.1}, {1: 1.0, 2: 0.3, 3: 0.2}, {1: 1.6, 3: 0.9}, {1: 2.0, 3: 1.0}],
        roles={1: "learner", 2: "evaluator", 3: "actors"},
    )
    used = samples.by_role(0.5, 2.5)  # from the first sample to the third
    assert used == pytest.approx({"learner": 1.1, "actors": 0.9, "evaluator": 0.2, "other": 0.0})


def test_children_are_told_apart_by_their_names(pixel_run):
    assert pixel_run.role_of(True, "python3.11") == "learner"
    assert pixel_run.role_of(False, "border-actor-12") == "actors"
    assert pixel_run.role_of(False, "border-evaluato") == "evaluator"  # the kernel's 15 bytes
    assert pixel_run.role_of(False, "python3.11") == "other"  # the forkserver


def test_an_evaluation_in_the_learner_costs_what_its_windows_took_beyond_the_usual(pixel_run):
    walls = [0.0, 1.0, 2.0, 3.5, 4.5, 5.5, 7.5]  # windows of 1 s, two of them longer
    ends = [3.0, 7.0, 9.0]  # the last ends after the stretch
    assert pixel_run.in_process_evaluation(walls, ends) == pytest.approx(0.5 + 1.0)
    assert pixel_run.in_process_evaluation(walls, []) == 0.0


def test_a_child_shows_its_name():
    code = (
        "from border_py.processes.children import show_name; show_name('border-evaluator');"
        " import psutil; print(psutil.Process().name())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "border-evaluato"  # what ps and psutil show, 15 bytes


def test_a_stretch_without_two_cpu_samples_is_refused_in_one_line(pixel_run, tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(tmp_path / "tensorboard")
    for step in range(3):  # the steady stretch: from the second record to the last, 0.1 s
        writer.add_scalar("perf/env_steps", 100 * step, step, walltime=1000.0 + step / 10)
    writer.close()
    samples = pixel_run.CpuSamples(times=[999.0, 1000.15, 1001.0], cpu=[{}, {}, {}])
    with pytest.raises(SystemExit, match=r"\(0.10 s\) holds 1 CPU sample\(s\), 2 are needed"):
        pixel_run.steady_figures(tmp_path, samples)
