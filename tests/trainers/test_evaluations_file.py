"""Every run writes ``evaluations.npz`` (RL Zoo's layout) at each selection evaluation, serial,
async and recurrent, and a resume appends to it; a run's end gives every recorder its honest
final score (``eval/final_*``, ``eval/best_*``), TensorBoard included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from border_py import train
from border_py.evaluation.history import read_evaluations

from ..conftest import TINY, make_config, scalar_tags
from .test_recurrent_run import SHORT as R2D2_SHORT


def _npz(run_dir: Path) -> dict[str, np.ndarray]:
    with np.load(run_dir / "evaluations.npz") as data:
        return {key: data[key] for key in data.files}


def _matches_tensorboard(run_dir: Path, episodes: int) -> dict[str, np.ndarray]:
    """The file's rows are the run's evaluations: one per ``eval/return_mean`` point, at its
    ``eval/env_steps``, each row's mean that point's value."""
    data, tags = _npz(run_dir), scalar_tags(run_dir)
    assert sorted(data) == ["ep_lengths", "results", "timesteps"]
    means = [v for _, v in tags["eval/return_mean"]]
    n = len(means)
    assert n >= 2
    assert data["timesteps"].shape == (n,) and data["timesteps"].dtype == np.int64
    assert data["results"].shape == data["ep_lengths"].shape == (n, episodes)
    assert data["timesteps"].tolist() == [int(v) for _, v in tags["eval/env_steps"]]
    np.testing.assert_allclose(data["results"].mean(axis=1), means, rtol=1e-6)
    lengths = [v for _, v in tags["eval/length_mean"]]
    np.testing.assert_allclose(data["ep_lengths"].mean(axis=1), lengths, rtol=1e-6)
    return data


def test_a_serial_run_writes_evaluations_npz_and_records_its_final_scores(tmp_path):
    summary = train(make_config(tmp_path, *TINY, "trainer=serial", "trainer.final_eval_episodes=3"))
    run_dir = tmp_path / "run"
    _matches_tensorboard(run_dir, episodes=2)  # debug=tiny: 2 episodes an evaluation
    tags = scalar_tags(run_dir)
    result = json.loads((run_dir / "result.json").read_text())["summary"]
    for name in ("final", "best"):
        score = result[f"{name}_eval"]
        assert summary[f"{name}_eval"] == score
        ((step, mean),) = tags[f"eval/{name}_return_mean"]
        assert step == summary["opt_steps"]  # at the run's end
        assert mean == pytest.approx(score["return_mean"], rel=1e-6)
        assert tags[f"eval/{name}_return_std"][0][1] == pytest.approx(score["return_std"], rel=1e-6)
        assert tags[f"eval/{name}_episodes"][0][1] == score["episodes"] == 3


@pytest.mark.slow
def test_an_async_run_writes_evaluations_npz(tmp_path):
    train(make_config(tmp_path, *TINY, "trainer=async", "trainer.eval_episodes=3"))
    _matches_tensorboard(tmp_path / "run", episodes=3)


@pytest.mark.slow
def test_a_recurrent_run_writes_evaluations_npz(tmp_path):
    train(make_config(tmp_path, *R2D2_SHORT, "trainer=serial", "trainer.max_opts=300"))
    _matches_tensorboard(tmp_path / "run", episodes=3)


@pytest.mark.slow
def test_a_resumed_run_appends_none_lost_none_repeated_as_the_uninterrupted_run(tmp_path):
    serial = [*TINY, "trainer=serial", "trainer.final_eval_episodes=0"]
    serial += ["trainer.save_replay_buffer=true"]  # the resume continues exactly
    full, part = tmp_path / "full", tmp_path / "part"
    train(make_config(full, *serial, "trainer.max_opts=600"))
    train(make_config(part, *serial, "trainer.max_opts=300"))
    run_dir = part / "run"
    before = _npz(run_dir)
    assert len(before["timesteps"]) == 2
    # an evaluation an earlier session made after its last checkpoint (then killed): another
    # timeline's, which the resume drops as TensorBoard's purge does
    planted = read_evaluations(run_dir / "evaluations.npz", 2)
    planted.append(99_999, [1.0, 1.0], [1, 1])
    planted.write(run_dir / "evaluations.npz")
    train(make_config(part, f"resume={run_dir}"), overrides=["trainer.max_opts=600"])
    after, uninterrupted = _npz(run_dir), _npz(full / "run")
    assert 99_999 not in after["timesteps"]
    for key in ("timesteps", "results", "ep_lengths"):
        np.testing.assert_array_equal(after[key][:2], before[key], err_msg=key)
        np.testing.assert_array_equal(after[key], uninterrupted[key], err_msg=key)
    _matches_tensorboard(run_dir, episodes=2)


class Recording:
    """A recorder that keeps what it is given (the recorder protocol)."""

    closed: list[dict[str, Any]] = []

    def open(self, run_dir: Path, config: dict[str, Any], resume_step: int | None) -> None:
        """Nothing to open."""

    def scalars(self, values: dict[str, Any], step: int) -> None:
        """Nothing kept."""

    def close(self, status: str = "completed", final: dict[str, float] | None = None) -> None:
        """Keep the run's end."""
        Recording.closed.append({"status": status, **(final or {})})


def test_every_recorder_gets_the_final_scores_at_the_end(tmp_path):
    Recording.closed = []
    recorder = f"+recorder.mine._target_={__name__}.Recording"
    summary = train(make_config(tmp_path, *TINY, "trainer=serial", recorder))
    (closed,) = Recording.closed
    assert closed["status"] == "completed"
    assert closed["eval/final_return_mean"] == summary["final_eval"]["return_mean"]
    assert closed["eval/best_return_std"] == summary["best_eval"]["return_std"]
    assert closed["eval/final_episodes"] == summary["final_eval"]["episodes"] == 2
    assert "eval/final_return_mean" in scalar_tags(tmp_path / "run")  # and TensorBoard too


def test_an_evaluation_failing_to_write_the_file_is_a_warning_not_a_lost_run(tmp_path, caplog):
    # a dir where the file goes: the write fails, the run goes on
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "evaluations.npz").mkdir()
    summary = train(make_config(tmp_path, *TINY, "trainer=serial"))
    assert summary["opt_steps"] == 300
    assert "evaluations.npz: not written" in caplog.text
