"""The live progress view on a terminal (rendered into a forced-terminal rich console)."""

from __future__ import annotations

import io
import time

from rich.console import Console

from border_py.recorders import console as console_module
from border_py.recorders.console import ProgressView


def test_live_view_shows_bar_rates_evals_buffer_and_actors(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(
        console_module, "_console", Console(file=screen, force_terminal=True, width=200)
    )
    view = ProgressView(
        max_opts=1000, start_opts=0, enabled=True, interval=30, capacity=200, n_actors=2
    )
    assert view.live is not None  # a terminal: the rich bar, not plain lines
    view.update(opt_steps=100, samples=1000, buffer_size=50, actors_alive=2, restarts=0)
    time.sleep(0.2)
    view.on_eval(120.0, best=150.0)
    view.update(opt_steps=300, samples=3000, buffer_size=100, actors_alive=1, restarts=1)
    opt_rate, sample_rate = view.rates()
    assert sample_rate == 10 * opt_rate > 0  # 2000 samples per 200 opt steps
    assert 0 < view.eta(300) < float("inf")
    view.close()
    view.close()  # idempotent
    out = screen.getvalue()
    assert "opt steps" in out and "300/1000" in out and "30%" in out
    assert "eval 120.0 (best 150.0)" in out
    assert "buffer 50%" in out and "actors 1/2, 1 restarts" in out


def test_disabled_view_shows_nothing(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(
        console_module, "_console", Console(file=screen, force_terminal=True, width=200)
    )
    view = ProgressView(1000, 0, enabled=False, interval=30, capacity=10)
    assert not view.due() and view.live is None
    view.close()
    assert screen.getvalue() == ""
