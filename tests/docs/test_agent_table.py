"""The "which algorithm?" table (docs/03-algorithms/index.md) follows what each agent declares:
generated at build time by the mkdocs hook docs/hooks/agent_table.py."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import gymnasium as gym
import numpy as np

from border_py.agents.base import Accepts
from border_py.config import group_options

from .blocks import REPO

PAGE = REPO / "docs" / "03-algorithms" / "index.md"


def hook() -> ModuleType:
    """The hook module, loaded from its file as mkdocs loads it."""
    spec = importlib.util.spec_from_file_location("agent_table", REPO / "docs/hooks/agent_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(markdown: str) -> dict[str, list[str]]:
    """The table's rows by their title (the header row under ``""``)."""
    cells = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("|") and not line.startswith("| ---")
    ]
    return {row[0]: row[1:] for row in cells}


class Discrete:
    """An agent that declares only the spaces it takes."""

    accepts = Accepts(observation=(gym.spaces.Box,), action=(gym.spaces.Discrete,))


class Continuous(Discrete):
    """The same agent, now for bounded continuous actions, with Ape-X epsilons and prioritized
    replay."""

    accepts = Accepts(
        observation=(gym.spaces.Box, gym.spaces.MultiBinary),
        action=(gym.spaces.Box,),
        bounded_actions=True,
    )
    reports_td_error = True

    def set_epsilon(self, epsilon: float | np.ndarray) -> None: ...


def test_the_table_changes_with_what_an_agent_declares():
    before = rows(hook().table({"mine": Discrete}))
    after = rows(hook().table({"mine": Continuous}))
    assert before[""] == after[""] == ["`agent=mine`"]
    assert before["class"] == [f"`{__name__}.Discrete`"]
    changed = {title for title in before if before[title] != after[title]}
    assert changed == {
        "class",
        "observations",
        "actions",
        "`replay_buffer=prioritized`",
        "`actor_manager.exploration=apex`",
    }
    assert (before["observations"], after["observations"]) == (["`Box`"], ["`Box`, `MultiBinary`"])
    assert (before["actions"], after["actions"]) == (["`Discrete`"], ["`Box` with finite bounds"])
    assert (
        after["`replay_buffer=prioritized`"] == after["`actor_manager.exploration=apex`"] == ["yes"]
    )
    assert before["`trainer.prefetch`"] == after["`trainer.prefetch`"] == ["no"]


def test_an_agent_that_declares_nothing_takes_any_space_and_the_users_agent_comes_last():
    table = rows(hook().table({"yours": None, "plain": object}))
    assert table[""] == ["`agent=plain`", "`agent=yours`"]
    assert table["observations"] == ["any (not declared)", "as your class declares"]
    assert table["class"] == ["`builtins.object`", "yours (`agent._target_`)"]


def test_every_shipped_agent_has_its_column_linked_to_its_api_entry():
    table = rows(hook().table(hook().shipped_agents()))
    options = ("dqn", "iqn", "r2d2", "sac", "custom")
    assert table[""] == [f"`agent={option}`" for option in options]
    assert sorted(group_options("agent")) == ["custom", "dqn", "iqn", "r2d2", "sac"]
    assert table["class"][:4] == [
        "[`DQN`][border_py.agents.dqn.DQN]",
        "[`IQN`][border_py.agents.iqn.IQN]",
        "[`R2D2`][border_py.agents.r2d2.R2D2]",
        "[`SAC`][border_py.agents.sac.SAC]",
    ]
    assert table["actions"][:4] == [
        "`Discrete`",
        "`Discrete`",
        "`Discrete`",
        "`Box` with finite bounds",
    ]
    assert table["`replay_buffer=prioritized`"][:4] == [
        "yes",
        "yes",
        "yes (`replay_buffer=sequence_prioritized`)",
        "no",
    ]
    memory = table["memory: `replay_buffer=sequence` (a recurrent state per env)"]
    assert memory[:4] == ["no", "no", "yes", "no"]
    assert table["`replay_buffer.priority_from_actors`"][0] == "yes, from the values it acted on"


def test_the_algorithms_page_gets_the_table_where_its_marker_is():
    module = hook()
    markdown = PAGE.read_text()
    assert markdown.count(module.MARKER) == 1
    built = module.on_page_markdown(markdown)
    assert module.MARKER not in built and "| `agent=dqn` |" in built
    assert module.on_page_markdown("no marker") == "no marker"
