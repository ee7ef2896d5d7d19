"""An exception without a message (``ValueError()``) is still one line naming it: the first
line of every message is taken by ``border_py.errors.first_line`` (tests/test_architecture.py
checks that no module takes it inline)."""

from __future__ import annotations

import pytest
from hydra.errors import HydraException

from border_py.cli.errors import hydra_error_line
from border_py.errors import first_line

from .. import conftest
from ..conftest import run_border


def test_the_first_line_of_a_bare_exception_is_its_type():
    assert first_line(ValueError()) == "ValueError"
    assert first_line(ValueError("\n  \n")) == "ValueError"
    assert first_line(ValueError("\nbad value\nmore")) == "bad value"
    assert hydra_error_line(HydraException()) == "HydraException"


@pytest.mark.slow
def test_a_component_raising_a_bare_value_error_is_one_line(tmp_path):
    """An agent whose constructor raises ``ValueError()``: one line naming the group and the
    error, exit 2, no traceback (it was an ``IndexError`` traceback from the line's making)."""
    out = run_border(
        [
            "train",
            "agent=custom",
            "agent._target_=tests.security.bare_error.BareValueError",
            *conftest.TINY[:1],
            f"run_dir={tmp_path / 'run'}",
        ],
        conftest.REPO,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line == "border: error: agent: ValueError"
    assert out.stdout == "" and not (tmp_path / "run").exists()
