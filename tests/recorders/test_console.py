"""The console: the live progress view rendered into a forced-terminal rich console of a given
width, the plain progress lines elsewhere, number formatting and the run summary table."""

from __future__ import annotations

import io
import logging
import math
import re

import pytest
from rich.console import Console

from border_py.recorders import console as console_module
from border_py.recorders.console import (
    ETA_AFTER_SECONDS,
    ProgressView,
    format_number,
    summary_table,
)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


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


def drive(view: ProgressView, clock: Clock, steps: list[tuple[float, int]], **counters) -> None:
    """Refresh the view at (time, opt steps) points; samples grow 10 per opt step."""
    for now, opt_steps in steps:
        clock.now = now
        view.update(opt_steps=opt_steps, samples=10 * opt_steps, **counters)
        assert view.live is not None
        view.live.refresh()


def test_at_80_columns_the_bar_count_and_eta_stay_and_minor_stats_drop(monkeypatch):
    screen = terminal(monkeypatch, 80)
    clock = Clock()
    view = ProgressView(20000, 0, True, 30, capacity=1000, n_actors=2, clock=clock)
    assert view.live is not None  # a terminal: the rich bar, not plain lines
    view.on_eval(0.95213, best=0.97)
    counters = {"buffer_size": 500, "actors_alive": 2, "restarts": 0}
    drive(view, clock, [(0.5 * i, 100 * i) for i in range(1, 10)], **counters)
    last = frames(screen)[-1]
    assert len(last) <= 80
    assert "━" in last and "900/20000" in last  # the bar and the count
    assert re.search(r"ETA 0:\d\d:\d\d", last)  # 19100 opt steps left at 200 opt/s: 95 s
    assert "eval 0.952 (best 0.97)" in last  # significant digits, not 1.0
    assert "buffer" not in last and "actors" not in last  # the minor stats went first
    view.close()


def test_a_wide_terminal_shows_every_stat(monkeypatch):
    screen = terminal(monkeypatch, 200)
    clock = Clock()
    view = ProgressView(1000, 0, True, 30, capacity=200, n_actors=2, clock=clock)
    view.on_eval(120.0, best=150.0)
    drive(
        view,
        clock,
        [(0.0, 100), (3.0, 300)],
        buffer_size=100,
        actors_alive=1,
        restarts=1,
    )
    opt_rate, sample_rate = view.rates()
    assert (opt_rate, sample_rate) == pytest.approx((200 / 3, 2000 / 3))
    last = frames(screen)[-1]
    assert "300/1000" in last and "30%" in last and "ETA 0:00:10" in last
    for text in ("667 samples/s | 67 opt/s", "eval 120 (best 150)", "buffer 50%"):
        assert text in last
    assert "actors 1/2, 1 restarts" in last
    view.close()
    view.close()  # idempotent


def test_an_actor_in_trouble_outranks_the_rates(monkeypatch):
    screen = terminal(monkeypatch, 80)
    clock = Clock()
    view = ProgressView(20000, 0, True, 30, capacity=1000, n_actors=8, clock=clock)
    drive(view, clock, [(0.0, 10), (0.5, 20)], buffer_size=10, actors_alive=7, restarts=2)
    last = frames(screen)[-1]
    assert "actors 7/8, 2 restarts" in last and "samples/s" not in last
    view.close()


def test_no_eta_until_the_opt_step_rate_is_known(monkeypatch):
    screen = terminal(monkeypatch, 120)
    clock = Clock()
    view = ProgressView(20000, 0, True, 30, capacity=1000, n_actors=2, clock=clock)
    counters = {"buffer_size": 1000, "actors_alive": 2, "restarts": 0}
    drive(view, clock, [(0.5 * i, 0) for i in range(6)], **counters)  # warmup: no opt steps
    drive(view, clock, [(3.0, 1), (3.5, 40), (4.0, 80)], **counters)  # optimizing for 1 s
    assert view.eta(80) == math.inf
    assert not any("ETA" in frame for frame in frames(screen))
    after = 3.0 + ETA_AFTER_SECONDS
    drive(view, clock, [(after, 160)], **counters)  # 159 opt steps in 2 s
    assert view.eta(160) == pytest.approx((20000 - 160) / (159 / ETA_AFTER_SECONDS))
    assert "ETA 0:04:09" in frames(screen)[-1]
    view.close()


def test_the_last_frame_shows_the_final_counters_and_no_eta(monkeypatch):
    screen = terminal(monkeypatch, 80)
    clock = Clock()
    view = ProgressView(1000, 0, True, 30, capacity=100, clock=clock)
    drive(view, clock, [(0.5 * i, 100 * i) for i in range(1, 7)], buffer_size=100)
    assert "ETA" in frames(screen)[-1] and "600/1000" in frames(screen)[-1]
    clock.now = 4.5
    view.finish(opt_steps=1000, samples=1000, buffer_size=100)  # ends between two refreshes
    last = frames(screen)[-1]
    assert "1000/1000" in last and "100%" in last and "ETA" not in last
    assert view.live is None


def test_closing_without_final_counters_leaves_no_stale_eta(monkeypatch):
    screen = terminal(monkeypatch, 80)
    clock = Clock()
    view = ProgressView(1000, 0, True, 30, capacity=100, clock=clock)
    drive(view, clock, [(0.5 * i, 100 * i) for i in range(1, 7)], buffer_size=100)
    view.close()
    assert "600/1000" in frames(screen)[-1] and "ETA" not in frames(screen)[-1]


def test_plain_lines_off_a_terminal_show_the_eta_only_once_known(monkeypatch, caplog):
    monkeypatch.setattr(console_module, "_console", Console(file=io.StringIO()))
    clock = Clock()
    view = ProgressView(1000, 0, True, interval=1, capacity=100, clock=clock)
    assert view.live is None
    caplog.set_level(logging.INFO, logger=console_module.__name__)
    for now, opt_steps in [(1.0, 10), (2.0, 60), (3.5, 110), (5.0, 160)]:
        clock.now = now
        view.update(opt_steps=opt_steps, samples=opt_steps, buffer_size=50)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("progress:")]
    assert len(lines) == 4
    assert "ETA" not in lines[0] and "ETA" not in lines[1]  # optimizing for < 2 s
    assert lines[0].startswith("progress: opt 10/1000 (1%)") and "buffer 50%" in lines[0]
    assert lines[2].endswith("ETA 0:00:22")  # 100 opt steps in 2.5 s: 890 left at 40/s
    assert lines[3].endswith("| 38 samples/s | 38 opt/s | buffer 50% | ETA 0:00:22")


def test_disabled_view_shows_nothing(monkeypatch):
    screen = terminal(monkeypatch, 200)
    view = ProgressView(1000, 0, enabled=False, interval=30, capacity=10)
    assert not view.due() and view.live is None
    view.finish(opt_steps=1000, samples=10, buffer_size=10)
    assert screen.getvalue() == ""


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.95213, "0.952"),
        (1.0, "1"),
        (0.5, "0.5"),
        (-20.47, "-20.5"),
        (21.0, "21"),
        (475.2, "475"),
        (500.0, "500"),
        (999.7, "1000"),
        (12345.6, "12346"),
        (-1234.4, "-1234"),
        (0.000123456, "0.000123"),
        (-0.0, "0"),
        (None, "-"),
        (float("nan"), "nan"),
    ],
)
def test_format_number_keeps_three_significant_digits(value, text):
    assert format_number(value) == text


ASYNC_SUMMARY = {
    "best_return": 0.97,
    "final_return": 0.95213,
    "mean_return": 0.8125,
    "seconds": 83.7,
    "solved_at": {"opt_steps": 12000, "env_steps": 24000, "seconds": 54.2},
    "stopped_by_callback": False,
    "opt_steps": 20000,
    "env_steps": 40000,
    "samples": 41200,
    "opt_steps_per_sec": 812.34,
    "interrupted": False,
    "accounting": {"sent": 41300, "received": 41200, "dropped": 100},
    "restarts": 1,
    "objective": 0.97,
}


def test_summary_table_of_an_async_run():
    table = summary_table(ASYNC_SUMMARY)
    assert table.splitlines() == [
        "returns      best 0.97 · final 0.952 · mean 0.812 · objective 0.97",
        "steps        20,000 opt (812/s) · 40,000 env · 41,200 samples",
        "time         0:01:23 · target return reached",
        "solved at    opt 12,000 · env 24,000 · 0:00:54",
        "transitions  sent 41,300 · received 41,200 · dropped 100",
        "restarts     1",
    ]


def test_summary_table_of_an_interrupted_serial_run_without_evaluations():
    summary = {
        "best_return": None,
        "final_return": None,
        "mean_return": None,
        "seconds": 3.2,
        "solved_at": None,
        "stopped_by_callback": False,
        "opt_steps": 200,
        "env_steps": 400,
        "interrupted": True,
        "objective": float("nan"),
    }
    assert summary_table(summary).splitlines() == [
        "returns  best - · final - · mean - · objective nan",
        "steps    200 opt · 400 env",
        "time     0:00:03 · interrupted (final checkpoint saved)",
    ]


def test_summary_table_labels_nested_accounting_and_keeps_unknown_keys():
    summary = {
        "seconds": 1.0,
        "accounting": {
            "this session": {"sent": 10, "received": 10},
            "all sessions": {"sent": 30, "received": 30},
        },
        "note": "resumed",
    }
    assert summary_table(summary).splitlines() == [
        "time         0:00:01 · completed",
        "transitions  this session: sent 10 · received 10; all sessions: sent 30 · received 30",
        "note         resumed",
    ]
