"""How the table and the figure name a group of runs: by the values of the keys whose value
differs between groups (the swept keys, less the task's own when the runs trained on several env
ids: the env id is shown on its own), the keys named once (a column's header, a legend's title)
and every value in full (a long one is wrapped, never cut)."""

from __future__ import annotations

import textwrap

from border_py.reports.aggregate import Group
from border_py.reports.tasks import task_keys

__all__ = ["SEPARATOR", "UNSET", "group_keys", "values_label", "wrap"]

SEPARATOR = " · "  # between keys in a title, between their values in a label
UNSET = "default"  # the value of a swept key a group does not set


def group_keys(groups: list[Group]) -> list[str]:
    """The keys that tell ``groups`` apart, in order of first appearance: their swept keys (see
    :func:`~border_py.reports.aggregate.group_runs`) less the task's own."""
    named = task_keys(groups)
    keys = groups[0].swept if groups else {}
    return [key for key in keys if key not in named]


def values_label(group: Group, keys: list[str]) -> str:
    """The group's value of each of ``keys`` (:data:`UNSET` where it sets none), in full."""
    return SEPARATOR.join(group.swept.get(key) or UNSET for key in keys)


def wrap(text: str, width: int) -> str:
    """``text`` on lines of about ``width`` characters, broken at spaces only: a word (a value,
    a number) longer than ``width`` stays whole on its own line."""
    return "\n".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False))
