"""What a pushed run's card shows of it besides numbers: its learning curve (``border report``'s
per-run figure) and a replay video of one fresh evaluation episode."""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import warnings
from pathlib import Path

from border_py.deploy.load import Policy
from border_py.errors import ConfigError, first_line, printable
from border_py.evaluation.evaluator import Evaluator
from border_py.evaluation.video import check_video
from border_py.files import create_file, open_regular
from border_py.hub.score import Score
from border_py.reports.aggregate import group_runs
from border_py.reports.collect import read_run
from border_py.reports.plots import plot_runs

__all__ = ["draw_curve", "record_replay"]

log = logging.getLogger(__name__)


def draw_curve(run_dir: Path, label: str, out: Path) -> bool:
    """The run's ``eval/return_mean`` over env steps as a PNG (``border report``'s per-run figure,
    titled with the env, agent and budget, its curve named ``label``); False when the run has no evaluation to draw."""
    row = dataclasses.replace(read_run(run_dir, run_dir), job=label, overrides=[])
    groups, _ = group_runs([row])
    drawn = plot_runs(groups, out, "env_steps")
    if not drawn:
        log.warning("learning curve skipped: %s has no evaluations with env steps", run_dir)
    return drawn


def record_replay(policy: Policy, score: Score, out: Path) -> bool:
    """Record the fresh evaluation's first episode as ``out`` (an mp4); False, with a warning
    saying why, when the env cannot render ``rgb_array`` frames or moviepy is missing."""
    try:
        check_video(policy.env_factory, "replay video skipped")
    except ConfigError as exc:
        log.warning("%s", printable(first_line(exc)))
        return False
    frames = Path(tempfile.mkdtemp(prefix=".replay-", dir=out.parent))
    try:
        with warnings.catch_warnings():  # the video dir is new: made just above
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
            evaluator = Evaluator(
                policy.env_factory, 1, score.seeds.start, score.max_steps, frames, score.epsilon
            )
        try:
            evaluator.evaluate(policy.agent)
        finally:
            evaluator.close()
        videos = sorted(frames.glob("*.mp4"))
        if not videos:
            log.warning("replay video skipped: the recorder wrote no video")
            return False
        with open_regular(videos[0]) as source:
            create_file(out, lambda f: shutil.copyfileobj(source, f))
        return True
    finally:
        shutil.rmtree(frames, ignore_errors=True)
