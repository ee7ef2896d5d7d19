"""The progress view: rendered into a recorded, forced-terminal rich console of a given width,
and as plain progress lines elsewhere; what it counts, its rates and its last frame."""

from __future__ import annotations

import io
import logging
import re

import pytest
from rich.console import Console

from border_py import train
from border_py.recorders import console as console_module
from border_py.recorders import progress as progress_module
from border_py.recorders.progress import Budget, ProgressView, Steps

from ..conftest import make_config

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
TIME = re.compile(r"\d:\d\d:\d\d")


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def terminal(monkeypatch, width: int) -> io.StringIO:
    """Make the view draw into a terminal of ``width`` columns; return what it draws."""
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=width)
    monkeypatch.setattr(console_module, "_console", console)
    return screen


def frames(screen: io.StringIO) -> list[str]:
    """The frames the live view drew, as plain text (each redraw clears the line first)."""
    parts = (ANSI.sub("", part).strip() for part in re.split(r"\x1b\[2K", screen.getvalue()))
    return [part for part in parts if part]


def drive(
    view: ProgressView, clock: Clock, points: list[tuple[float, int, int]], **counters
) -> None:
    """Refresh the view at (time, opt steps, env steps) points; samples are the env steps."""
    for now, opt_steps, env_steps in points:
        clock.now = now
        view.update(Steps(opt_steps, env_steps), env_steps, **counters)
        assert view.live
        view.progress.refresh()


def test_at_80_columns_an_env_step_budget_shows_env_steps_their_rate_and_the_actors(monkeypatch):
    screen = terminal(monkeypatch, 80)
    clock = Clock()
    budget = Budget.of(None, 100_000)  # every recipe's budget, and plain border train's
    view = ProgressView(budget, Steps(0, 0), True, 30, capacity=50_000, n_actors=2, clock=clock)
    view.on_eval(0.95213, best=0.97)
    # 453 env steps and 110 opt steps every 0.5 s: 906 env steps/s, 220 opt steps/s
    points = [(0.5 * i, 110 * i, 453 * i) for i in range(1, 30)]
    drive(view, clock, points, buffer_size=1000, actors_alive=2, restarts=0)
    assert view.rate("env_steps") == pytest.approx(906)
    assert view.rate("opt_steps") == pytest.approx(220)
    live = frames(screen)
    assert all(len(frame) <= 80 for frame in live)
    last = live[-1]
    assert last.startswith("env steps ") and "13137/100000" in last and "13%" in last
    assert "906 env steps/s" in last and "actors 2/2" in last
    assert TIME.search(last)  # 86863 env steps left at 906/s
    assert "opt/s" not in screen.getvalue()  # no budget of env steps called opt steps
    clock.now = 20.0  # the stop: the actors are gone, a final evaluation and checkpoint later
    view.finish(Steps(3300, 13600), 13600, 1000, actors_alive=0, restarts=0)
    final = frames(screen)[-1]
    assert len(final) <= 80 and "13600/100000" in final and not TIME.search(final)
    assert "actors 2/2" in final and "actors 0/2" not in final  # as they were while training
    # the session's rates, timed from the first step to the last (as the run summary times
    # opt_steps_per_sec), not diluted by the stop
    assert "906 env steps/s" in final
    assert view.rate("opt_steps", ended=True) == pytest.approx(220)
    assert not view.live


def test_at_80_columns_the_count_and_time_remaining_stay_and_minor_stats_drop(monkeypatch):
    screen = terminal(monkeypatch, 80)
    clock = Clock()
    view = ProgressView(Budget.of(20000, None), Steps(0, 0), True, 30, 1000, 2, clock=clock)
    view.on_eval(0.95213, best=0.97)
    points = [(0.5 * i, 100 * i, 400 * i) for i in range(1, 10)]
    drive(view, clock, points, buffer_size=500, actors_alive=2, restarts=0)
    last = frames(screen)[-1]
    assert len(last) <= 80
    assert last.startswith("opt steps ━") and "900/20000" in last  # the bar and the count
    assert re.search(r"0:01:\d\d", last)  # 19100 opt steps left at 200 opt steps/s: 96 s
    assert "200 opt steps/s | actors 2/2" in last
    assert "eval" not in last and "env steps/s" not in last and "buffer" not in last
    view.close()


def test_a_wide_terminal_shows_every_stat(monkeypatch):
    screen = terminal(monkeypatch, 200)
    clock = Clock()
    view = ProgressView(Budget.of(1000, None), Steps(0, 0), True, 30, 200, 2, clock=clock)
    view.on_eval(120.0, best=150.0)
    drive(
        view,
        clock,
        [(0.0, 100, 1000), (3.0, 300, 3000)],
        buffer_size=100,
        actors_alive=1,
        restarts=1,
    )
    assert view.rate("opt_steps") == pytest.approx(200 / 3)
    assert view.rate("env_steps") == view.rate("samples") == pytest.approx(2000 / 3)
    last = frames(screen)[-1]
    assert "300/1000" in last and "30%" in last and "0:00:11" in last  # 700 left at 66.7/s
    stats = [
        "actors 1/2, 1 restarts",  # an actor in trouble comes first
        "67 opt steps/s",
        "eval 120 (best 150)",
        "667 env steps/s",
        "667 samples/s",
        "buffer 50%",
    ]
    assert " | ".join(stats) in last
    view.close()
    view.close()  # idempotent


def test_an_actor_in_trouble_outranks_the_rates(monkeypatch):
    screen = terminal(monkeypatch, 80)
    clock = Clock()
    view = ProgressView(Budget.of(20000, None), Steps(0, 0), True, 30, 1000, 8, clock=clock)
    drive(view, clock, [(0.0, 10, 20), (0.5, 20, 40)], buffer_size=10, actors_alive=7, restarts=2)
    last = frames(screen)[-1]
    assert "actors 7/8, 2 restarts" in last and "opt steps/s" not in last
    view.close()


def test_no_time_remaining_until_the_budgets_counter_has_a_rate(monkeypatch):
    screen = terminal(monkeypatch, 120)
    clock = Clock()
    view = ProgressView(Budget.of(20000, None), Steps(0, 0), True, 30, 1000, 2, clock=clock)
    counters = {"buffer_size": 1000, "actors_alive": 2, "restarts": 0}
    drive(view, clock, [(0.5 * i, 0, 100 * i) for i in range(6)], **counters)  # warmup
    assert view.rate("opt_steps") is None and view.rate("env_steps") == pytest.approx(200)
    assert "-:--:--" in frames(screen)[-1] and "opt steps/s" not in frames(screen)[-1]
    drive(view, clock, [(3.0, 1, 600), (3.5, 40, 700), (4.0, 80, 800)], **counters)
    assert view.rate("opt_steps") == pytest.approx(79)  # 79 opt steps from 3.0 s to 4.0 s
    assert "0:04:13" in frames(screen)[-1]  # 19920 left at 79/s
    assert "79 opt steps/s" in frames(screen)[-1]
    view.close()


def test_a_counter_that_stood_still_for_the_whole_window_has_rate_0(monkeypatch):
    terminal(monkeypatch, 120)
    clock = Clock()
    view = ProgressView(Budget.of(20000, None), Steps(0, 0), True, 30, 1000, 2, clock=clock)
    window = progress_module.RATE_WINDOW_SECONDS
    drive(view, clock, [(0.0, 10, 20), (0.5, 20, 40), (1.0 + window, 20, 40)], buffer_size=1)
    assert view.rate("opt_steps") == 0.0
    view.close()


def test_the_last_frame_shows_the_final_counters_and_no_time_remaining(monkeypatch):
    screen = terminal(monkeypatch, 80)
    clock = Clock()
    view = ProgressView(Budget.of(1000, None), Steps(0, 0), True, 30, capacity=100, clock=clock)
    drive(view, clock, [(0.5 * i, 100 * i, 200 * i) for i in range(1, 7)], buffer_size=100)
    assert TIME.search(frames(screen)[-1]) and "600/1000" in frames(screen)[-1]
    clock.now = 4.5
    view.finish(Steps(1000, 2000), 0, buffer_size=100)  # ends between two refreshes
    last = frames(screen)[-1]
    assert "1000/1000" in last and "100%" in last and not TIME.search(last)
    assert "200 opt steps/s" in last  # 500 opt steps from 0.5 s to 3.0 s
    assert not view.live


def test_closing_without_final_counters_leaves_no_stale_time_remaining(monkeypatch):
    screen = terminal(monkeypatch, 80)
    clock = Clock()
    view = ProgressView(Budget.of(1000, None), Steps(0, 0), True, 30, capacity=100, clock=clock)
    drive(view, clock, [(0.5 * i, 100 * i, 200 * i) for i in range(1, 7)], buffer_size=100)
    view.close()
    assert "600/1000" in frames(screen)[-1] and not TIME.search(frames(screen)[-1])


def test_plain_lines_off_a_terminal_say_what_they_count(monkeypatch, caplog):
    monkeypatch.setattr(console_module, "_console", Console(file=io.StringIO()))
    clock = Clock()
    view = ProgressView(Budget.of(1000, None), Steps(0, 0), True, 1, capacity=100, clock=clock)
    assert not view.live
    caplog.set_level(logging.INFO, logger=progress_module.__name__)
    for now, opt_steps in [(1.0, 10), (2.0, 60), (3.5, 110), (5.0, 160)]:
        clock.now = now
        view.update(Steps(opt_steps, 4 * opt_steps), 0, buffer_size=50)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("progress:")]
    assert len(lines) == 4  # one per interval
    assert lines[0] == "progress: opt steps 10/1000 (1%) | buffer 50%"  # no rate yet, no ETA
    assert lines[1].endswith("| ETA 0:00:19")  # 50 opt steps in 1 s: 940 left at 50/s
    assert lines[3] == (  # 150 opt steps from 1 s to 5 s: 840 left at 37.5/s
        "progress: opt steps 160/1000 (16%) | 38 opt steps/s | 150 env steps/s | buffer 50%"
        " | ETA 0:00:23"
    )
    assert not any("\x1b" in line for line in lines)
    view.close()


def test_disabled_view_shows_nothing(monkeypatch):
    screen = terminal(monkeypatch, 200)
    view = ProgressView(Budget.of(1000, None), Steps(0, 0), enabled=False, interval=30, capacity=10)
    assert not view.due() and not view.live
    view.finish(Steps(1000, 2000), 10, buffer_size=10)
    assert screen.getvalue() == ""


@pytest.mark.slow
def test_a_runs_last_frame_agrees_with_its_summary(monkeypatch, tmp_path):
    screen = terminal(monkeypatch, 120)
    summary = train(
        make_config(
            tmp_path,
            "trainer=serial",
            "trainer.max_opts=null",
            "trainer.max_env_steps=6000",
            "trainer.replay_ratio=64",  # seconds of training: the view's refreshes (0.5 s) time it
            "trainer.warmup_period=200",
            "trainer.eval_interval=100000",
            "trainer.save_interval=0",
            "agent.hidden_sizes=[16]",
        )
    )
    last = frames(screen)[-1]
    assert last.startswith("env steps ") and "6000/6000" in last and "100%" in last
    match = re.search(r"([\d.]+)(k?) opt steps/s", last)
    assert match, last
    shown = float(match[1]) * (1000 if match[2] else 1)
    # both time this session from its first opt step to its last: the view at its refreshes
    # (every 0.5 s), the summary at the steps themselves
    assert shown == pytest.approx(summary["opt_steps_per_sec"], rel=0.25)
