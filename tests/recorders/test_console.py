"""The console: number formatting and the run summary table (the progress view that shares its
console is tested in test_progress.py)."""

from __future__ import annotations

import re

import pytest

from border_py import train
from border_py.recorders.console import (
    ACCOUNTING_LABELS,
    SUMMARY_KEYS,
    format_number,
    summary_table,
)

from ..conftest import TINY, make_config


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
    "accounting": {"sent": 41300, "received": 41200, "dropped": 100, "received_total": 61200},
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
        "transitions  sent 41,300 · received 41,200 · dropped at stop 100 · received in all"
        " sessions 61,200",
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


def test_the_summary_of_a_real_run_shows_no_raw_key(tmp_path):
    summary = train(make_config(tmp_path, *TINY, "trainer=serial", "trainer.max_opts=60"))
    assert set(summary["accounting"]) == set(ACCOUNTING_LABELS)  # every count has its words
    assert set(summary) <= SUMMARY_KEYS  # no row for an unknown key
    table = summary_table(summary)
    assert "transitions  sent " in table and " received in all sessions " in table
    assert "_" not in table, table  # no key spelled as the code names it


def test_summary_table_names_the_selection_and_the_fresh_scores():
    fresh = {"episodes": 100, "seeds": [5, 104]}
    summary = {
        "best_return": 500.0,
        "final_return": 500.0,
        "mean_return": 320.5,
        "selection_episodes": 10,
        "final_eval": {"return_mean": 487.25, "return_std": 12.5, "opt_steps": 9000} | fresh,
        "best_eval": {"return_mean": 495.5, "return_std": 4.25, "opt_steps": 7000} | fresh,
        "objective": 500.0,
    }
    assert summary_table(summary).splitlines()[:2] == [
        "returns     best 500 · final 500 · mean 320 · objective 500 (selection evaluations of"
        " 10 episodes)",
        "fresh eval  final weights 487 ± 12.5 · best checkpoint 496 ± 4.25 (100 fresh episodes)",
    ]
    del summary["best_eval"]  # a run without a best checkpoint
    assert "fresh eval  final weights 487 ± 12.5 (100 fresh episodes)" in summary_table(summary)


# a recurrent agent's run: its actors send sequences, which the samples and the accounting count
R2D2_TINY = (
    "agent=r2d2",
    "replay_buffer=sequence",
    "trainer=serial",
    "agent.core_size=16",
    "agent.burn_in=2",
    "agent.length=4",
    "agent.n_step=2",
    "agent.batch_size=4",
    "trainer.warmup_period=40",
    "trainer.max_opts=5",
)


def test_a_summary_of_sequences_names_them_where_transitions_are_named_otherwise():
    summary = {
        "opt_steps": 5,
        "env_steps": 80,
        "samples": 20,
        "seconds": 1.0,
        "accounting": {"sent": 20, "received": 20, "dropped": 0, "received_total": 20},
        "sample_unit": "sequences",
    }
    assert summary_table(summary).splitlines() == [
        "steps      5 opt · 80 env · 20 sequences",
        "time       0:00:01 · completed",
        "sequences  sent 20 · received 20 · dropped at stop 0 · received in all sessions 20",
    ]
    del summary["sample_unit"]  # a run of transitions: as before
    assert summary_table(summary).splitlines()[::2] == [
        "steps        5 opt · 80 env · 20 samples",
        "transitions  sent 20 · received 20 · dropped at stop 0 · received in all sessions 20",
    ]


def test_a_recurrent_run_says_sequences_in_its_log_and_summary(tmp_path):
    summary = train(make_config(tmp_path, *TINY, *R2D2_TINY))
    assert summary["sample_unit"] == "sequences" and set(summary) <= SUMMARY_KEYS
    log = (tmp_path / "run" / "train.log").read_text()
    acc = summary["accounting"]
    line = f"sequences this session: sent {acc['sent']}, received {acc['received']}, dropped"
    assert line in log, log
    assert re.search(rf"^sequences +sent {acc['sent']} · received ", log, re.MULTILINE), log
    assert f"{summary['samples']} sequences" in log and "transitions" not in log
