"""An mkdocs hook: the "which algorithm?" table, generated from what each shipped agent declares.

The page ``docs/03-algorithms/index.md`` holds the marker ``<!-- agent-table -->``; at build time
it becomes a table with one column per option of the ``agent`` config group (``conf/agent/*.yaml``),
read from the class its ``_target_`` names: the spaces it accepts (its ``accepts``) and the
optional capabilities of ``border_py.agents.base`` it provides, each in a row named by the setting
that needs it. A cell says what the class declares, so the table changes with the code and cannot
drift from it (``tests/docs/test_agent_table.py`` builds one from fake agent classes). An option
whose ``_target_`` is left to the user (``agent=custom``) gets a column that says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from border_py.agents import base
from border_py.config import group_options, resolve_target
from border_py.shipped import option_keys

MARKER = "<!-- agent-table -->"


def _has_methods(protocol: type) -> Callable[[type], bool]:
    """Whether a class defines every method of ``protocol`` (its data members are per instance)."""
    methods = [name for name, value in vars(protocol).items() if callable(value) and name[0] != "_"]
    return lambda cls: all(callable(getattr(cls, name, None)) for name in methods)


def _capabilities() -> list[tuple[str, Callable[[type], str]]]:
    """Each capability's row: its title (the setting that needs it) and its cell for a class."""

    def yes(test: Callable[[type], bool]) -> Callable[[type], str]:
        return lambda cls: "yes" if test(cls) else "no"

    def reports_td_error(cls: type) -> bool:  # base.reports_td_error, on the class
        return getattr(cls, "reports_td_error", False) is True

    def actor_priorities(cls: type) -> str:
        if not _has_methods(base.TDErrorScoring)(cls):
            return "no"
        return "yes, from the values it acted on" if _has_methods(base.ValueActing)(cls) else "yes"

    recurrent = _has_methods(base.RecurrentActing)

    def prioritized(cls: type) -> str:
        if not reports_td_error(cls):
            return "no"
        return "yes (`replay_buffer=sequence_prioritized`)" if recurrent(cls) else "yes"

    return [
        ("`replay_buffer=prioritized`", prioritized),
        ("memory: `replay_buffer=sequence` (a recurrent state per env)", yes(recurrent)),
        ("`replay_buffer.priority_from_actors`", actor_priorities),
        ("`actor_manager.exploration=apex`", yes(_has_methods(base.FixedEpsilon))),
        ("`actor_manager.policy_dtype`", yes(_has_methods(base.ActingPrecision))),
        ("`trainer.prefetch`", yes(_has_methods(base.TensorUpdate))),
        ("exploration over the run's env steps", yes(_has_methods(base.ExplorationPosition))),
    ]


def _spaces(cls: type) -> tuple[str, str]:
    """The observation and action cells: the space types ``accepts`` declares."""
    accepts = base.declared_spaces(cls)
    if accepts is None:
        return "any (not declared)", "any (not declared)"
    observation = ", ".join(f"`{kind.__name__}`" for kind in accepts.observation)
    action = ", ".join(f"`{kind.__name__}`" for kind in accepts.action)
    if accepts.bounded_actions:
        action += " with finite bounds"
    return observation, action


def table(agents: Mapping[str, type | None]) -> str:
    """The Markdown table of ``agents`` (``{agent option: its class}``, None for a class the user
    names: ``agent=custom``), one column per agent, the user's last. A class of border_py links to
    its entry in the API reference."""
    capabilities = _capabilities()
    ordered = sorted(agents.items(), key=lambda item: item[1] is None)
    rows: list[list[str]] = [["class"], ["observations"], ["actions"]]
    rows += [[title] for title, _ in capabilities]
    for _, cls in ordered:
        if cls is None:
            cells = ["yours (`agent._target_`)", *["as your class declares"] * (len(rows) - 1)]
        else:
            path = f"{cls.__module__}.{cls.__qualname__}"
            shown = f"[`{cls.__name__}`][{path}]" if path.startswith("border_py.") else f"`{path}`"
            cells = [shown, *_spaces(cls), *(cell(cls) for _, cell in capabilities)]
        for row, cell in zip(rows, cells, strict=True):
            row.append(cell)
    header = ["", *(f"`agent={option}`" for option, _ in ordered)]
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def shipped_agents() -> dict[str, type | None]:
    """Every option of the shipped ``agent`` group and the class its ``_target_`` names."""
    agents: dict[str, type | None] = {}
    for option in group_options("agent"):
        target = option_keys("agent", option).get("_target_")
        agents[option] = resolve_target(target) if target and target != "???" else None
    return agents


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """mkdocs' hook: the marker, where a page holds it, becomes the table of the shipped agents."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, table(shipped_agents()))
