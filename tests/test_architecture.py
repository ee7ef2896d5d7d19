"""The package's shape, checked by tool so that it cannot drift unseen: no import cycle among
border_py's modules (imports under ``TYPE_CHECKING`` and inside functions included), the run's
layout named in one module, no module over 350 lines and no function over 60, what a resume
restores put back in one place, an exception's first line taken by ``border_py.errors.first_line``
only, and settings named settings (no class named for what runs, a ``...Trainer`` or
``...Actors``, is a settings dataclass)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import re
from pathlib import Path

import grimp
from hydra import compose, initialize_config_dir

from border_py.actors.local import LocalActors, LocalActorSettings
from border_py.actors.settings import ActorSettings
from border_py.config import config_dir, group_options, resolve_target
from border_py.trainers.settings import LoopSettings


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_module_of_border_py_takes_part_in_an_import_cycle():
    graph = grimp.build_graph("border_py")  # TYPE_CHECKING and function-level imports included
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for a, b in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")]:
        graph.add_import(importer=a, imported=b)
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


SRC = Path(__file__).resolve().parents[1] / "src" / "border_py"
# the names of a run's entries that mean nothing else ("best" and "tensorboard" also name an
# objective and a recorder): spelled out in border_py/layout.py only
LAYOUT_NAMES = {
    ".border_run",
    ".border_lock",
    ".hydra",
    "train.log",
    "result.json",
    "checkpoints",
    "abandoned",
    "attempts",
    "mlflow_run.json",
    "mlflow.db",
    "wandb_run.json",
    "policy.pt",
    "agent.pt",
    "trainer.pt",
    "config.json",
    "meta.json",
    "replay_buffer.npz",
    "arrays.json",
    "overrides.yaml",
    "multirun.yaml",
}


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_the_run_layout_is_named_in_one_module():
    spelled = [
        f"{path.relative_to(SRC)}:{node.lineno} {node.value!r}"
        for path in _sources()
        if path.name != "layout.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in LAYOUT_NAMES
    ]
    assert spelled == []


# below the size a module of one concept grows to, so that a module is split along its concepts
# before it is trimmed to fit (400 was met by three modules trimmed to it)
MAX_MODULE_LINES = 350


def test_no_module_over_the_cap_and_no_function_over_60():
    too_long = []
    for path in _sources():
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(SRC)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > 60:
                    too_long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}: {lines}")
    assert too_long == []


# who may call what puts a resumed run back (see border_py/runs/state.py): the parts of trainer.pt
# are handed back by TrainerState.restore, the run dir is repaired by its owner, the session
RESTORED_IN_ONE_PLACE = {
    "set_global_rng_state": {"runs/state.py"},
    # the prioritized buffers: their super's
    "continue_schedule": {
        "runs/state.py",
        "replay/prioritized.py",
        "replay/sequence_prioritized.py",
    },
    "recover": {"runs/session.py"},
    "set_aside_newer": {"runs/session.py"},
}


def test_what_a_resume_restores_is_restored_in_one_place():
    callers: dict[str, set[str]] = {name: set() for name in RESTORED_IN_ONE_PLACE}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in callers:
                    callers[name].add(str(path.relative_to(SRC)))
    assert callers == RESTORED_IN_ONE_PLACE


# an exception's first line taken inline: str(exc).splitlines()[0] (an IndexError for an exception
# without a message), or (str(exc).splitlines() or [...])[0]
INLINE_FIRST_LINE = re.compile(r"splitlines\(\)\s*(?:or\s*\[[^\]]*\]\s*\))?\s*\[0\]")


def test_the_first_line_of_a_message_is_taken_by_first_line_only():
    """``errors.first_line`` names a bare exception (``ValueError()``) by its type: every other
    module calls it rather than taking ``splitlines()[0]`` itself."""
    inline = [
        f"{path.relative_to(SRC)}:{number}"
        for path in _sources()
        if path.relative_to(SRC) != Path("errors.py")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if INLINE_FIRST_LINE.search(line)
    ]
    assert inline == []
    assert INLINE_FIRST_LINE.search("(str(exc).splitlines() or [type(exc).__name__])[0]")


# what a runtime's or a trainer's name ends in: such a class runs something, so it is never the
# settings it runs with
RUNNING = ("Trainer", "Actors")
SETTINGS_GROUPS = ("trainer", "actor_manager")  # the groups whose options build settings


@functools.cache
def _option_keys() -> list[set[str]]:
    """The keys of every option of :data:`SETTINGS_GROUPS` as composed (its ``_target_`` aside)."""
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        return [
            set(compose("train", overrides=[f"{group}={option}"])[group]) - {"_target_"}
            for group in SETTINGS_GROUPS
            for option in group_options(group)
        ]


def _is_settings(cls: type) -> bool:
    """A settings dataclass: a subclass of the trainers' or the actors' settings, or a dataclass
    whose fields hold the keys of an option of their groups."""
    if not dataclasses.is_dataclass(cls):
        return False
    if issubclass(cls, (LoopSettings, ActorSettings)):
        return True
    names = {field.name for field in dataclasses.fields(cls)}
    return any(keys <= names for keys in _option_keys())


def test_no_trainer_or_actors_class_is_a_settings_dataclass():
    """Settings are named settings; what runs is named for what it runs (``Trainer`` has its
    ``LoopSettings``, ``LocalActors`` its ``LocalActorSettings``)."""
    found = [
        (path, node.name)
        for path in _sources()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name.endswith(RUNNING)
    ]
    assert {"Trainer", "LocalActors", "RayActors", "InlineActors"} <= {name for _, name in found}
    lying = []
    for path, name in found:
        module = ".".join(("border_py", *path.relative_to(SRC).with_suffix("").parts))
        if _is_settings(getattr(importlib.import_module(module), name)):
            lying.append(f"{module}.{name}")
    assert lying == []


def test_the_settings_groups_build_settings_named_settings():
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        for group in SETTINGS_GROUPS:
            for option in group_options(group):
                target = compose("train", overrides=[f"{group}={option}"])[group]["_target_"]
                cls = resolve_target(target)
                assert target.endswith("Settings") and _is_settings(cls), (group, option, target)


def test_the_settings_test_tells_settings_from_what_runs():
    @dataclasses.dataclass
    class MyTrainer:  # no keys of an option: not settings (a dataclass with them is, by any name)
        pass

    keys = _option_keys()[0]
    fields = [(key, object, dataclasses.field(default=None)) for key in keys]
    settings_like = dataclasses.make_dataclass("MyTrainer", fields)
    assert _is_settings(settings_like) and _is_settings(LocalActorSettings)
    assert not _is_settings(MyTrainer) and not _is_settings(LocalActors)
