"""``config.flatten``: the one reading of a nested config as dotted keys, which a resume's change
log (runs/resume.py) and the recorded hyper-parameters (recorders/base.py) both take."""

from __future__ import annotations

import logging

from border_py.config import flatten, lookup
from border_py.recorders.base import hyperparameters
from border_py.runs import resume


def test_a_nested_config_flattens_to_its_leaves_and_each_key_reads_back():
    config = {"seed": 0, "agent": {"lr": 1e-3, "hidden_sizes": [16, 16], "opt": {}}, "x": None}
    flat = flatten(config)
    assert flat == {"seed": 0, "agent.lr": 1e-3, "agent.hidden_sizes": [16, 16], "x": None}
    assert all(lookup(config, key) == value for key, value in flat.items())
    assert flatten({}) == {} and flatten({1: {"a": 2}}) == {"1.a": 2}


def test_the_change_log_and_the_hyperparameters_name_the_same_keys(caplog):
    saved = {"seed": 0, "agent": {"lr": 1e-3, "hidden_sizes": [16]}, "trainer": {"max_opts": 5}}
    config = {"seed": 0, "agent": {"lr": 3e-4, "hidden_sizes": [32]}, "trainer": {"max_opts": 5}}
    with caplog.at_level(logging.INFO, logger=resume.__name__):
        resume._log_changes(saved, {}, config)
    assert [r.getMessage() for r in caplog.records] == [
        "resume: agent.hidden_sizes changed from [16] to [32]",
        "resume: agent.lr changed from 0.001 to 0.0003",
    ]
    assert hyperparameters(config) == {
        "seed": 0,
        "agent.lr": 3e-4,
        "agent.hidden_sizes": "[32]",
        "trainer.max_opts": 5,
    }
