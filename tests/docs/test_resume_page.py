"""docs/06-architecture/overview.md, "What a resume restores": its table names every key of
``trainer.pt`` (``TrainerState``'s fields, and the actors' keys of both trainers), so a part added
to the state without a line on the page fails here."""

from __future__ import annotations

import dataclasses
import re

from border_py.actors.runtime import slots_state
from border_py.runs.state import SERIAL_KEY, TrainerState

from .blocks import REPO

PAGE = REPO / "docs" / "06-architecture" / "overview.md"


def _first_column_names() -> set[str]:
    """The backquoted names in the first column of the section's table."""
    text = PAGE.read_text()
    section = text.split("## What a resume restores", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`(\w+)`", row.split(" | ")[0])}


def test_the_page_names_every_key_of_trainer_pt():
    fields = {f.name for f in dataclasses.fields(TrainerState)} - {"actors"}
    actors_keys = {*slots_state([], []), SERIAL_KEY, "actor"}  # actor processes'; the serial one's
    assert _first_column_names() == fields | actors_keys
