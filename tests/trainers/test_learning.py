"""Real training on a small budget: DQN with the shipped defaults must solve CartPole-v1."""

from __future__ import annotations

import pytest

from border_py import train

from ..conftest import FEW_FRESH_EVALS, make_config, scalar_tags


@pytest.mark.slow
def test_serial_dqn_solves_cartpole(tmp_path):
    cfg = make_config(
        tmp_path,
        "seed=0",
        "trainer=serial",
        "trainer.target_return=475",
        "trainer.max_opts=25000",
        FEW_FRESH_EVALS,
    )
    summary = train(cfg)
    assert summary["best_return"] >= 475, summary
    assert summary["solved_at"] is not None
    evals = scalar_tags(tmp_path / "run")["eval/return_mean"]
    assert max(v for _, v in evals) == pytest.approx(summary["best_return"])
    assert (tmp_path / "run" / "checkpoints" / "best" / "policy.pt").is_file()
