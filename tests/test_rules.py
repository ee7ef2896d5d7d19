"""The one helper per kind of check (``border_py.config``): a number is never a bool, null is
allowed only where a rule says so, and each refusal is one line naming the key."""

from __future__ import annotations

import pytest

from border_py.config import (
    build,
    count,
    is_int,
    is_number,
    non_negative,
    null_or,
    number,
    positive,
    positive_count,
)
from border_py.errors import ConfigError
from border_py.overrides import to_plain

from .conftest import make_config


def _refusal(rule, key, value) -> str:
    with pytest.raises(ConfigError) as refused:
        rule(key, value)
    (line,) = str(refused.value).splitlines()
    return line


@pytest.mark.parametrize("value", [True, False, "1", None, [1]])
def test_a_bool_or_anything_else_is_no_number(value):
    assert not is_number(value) and not is_int(value)
    assert _refusal(number, "k", value) == f"k={value!r}: must be a number"


def test_numbers_and_counts():
    assert is_number(1) and is_number(0.5) and is_int(3) and not is_int(3.0)
    number("k", -2.5)
    count("k", 0)
    positive_count("k", 1)
    assert _refusal(count, "k", -1) == "k=-1: must be a non-negative int"
    assert _refusal(positive_count, "k", 0) == "k=0: must be a positive int"
    assert _refusal(positive, "k", True) == "k=True: must be a positive float"
    assert _refusal(lambda k, v: non_negative(k, v, float), "k", -1.0) == (
        "k=-1.0: must be a non-negative float"
    )


def test_null_or_a_rule():
    null_or(count)("k", None)
    null_or(count)("k", 4)
    assert _refusal(null_or(count), "k", -1) == "k=-1: must be null or a non-negative int"
    assert _refusal(null_or(number), "k", True) == "k=True: must be null or a number"
    assert not count.ok(None)  # a rule allows null only through null_or


def test_a_bool_is_no_niceness(tmp_path):
    """``actor_manager.nice=true`` read as 1 before the one int check."""
    spec = to_plain(make_config(tmp_path, "actor_manager.nice=true"))["actor_manager"]
    assert _refusal(lambda k, v: build(k, v), "actor_manager", spec) == (
        "actor_manager.nice=True: must be an int in [0, 19]"
    )
