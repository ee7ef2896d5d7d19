"""Recipes looked up by task, as RL Zoo does: ``border train env=gym env.id=Acrobot-v1 agent=dqn``
trains with the shipped recipe for DQN on Acrobot-v1 (``experiment=dqn_acrobot``).

The rule: when the command names no ``experiment``, the agent option and the env id it trains
(from ``agent=``, ``env=`` and ``env.id=``, else the defaults) are looked up among the shipped
recipes (``conf/experiment/*.yaml``, each naming its agent and env); a match is applied as if
``experiment=<name>`` were given, so every ``key=value`` on the command line still wins over the
recipe. ``experiment=none`` turns the lookup off; a sweep over the agent, env or env id skips it.
"""

from __future__ import annotations

from functools import cache

import yaml

from border_py.config import config_dir

DEFAULT_AGENT, DEFAULT_ENV = "dqn", "cartpole"  # conf/train.yaml's defaults


def _choice(overrides: list[str], key: str) -> str | None:
    values = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == key]
    return values[-1].strip("'\"") if values else None


@cache
def _env_id(option: str) -> str | None:
    path = config_dir() / "env" / f"{option}.yaml"
    if not path.is_file():
        return None
    env_id = (yaml.safe_load(path.read_text()) or {}).get("id")
    return None if env_id in (None, "???") else str(env_id)


@cache
def recipes() -> dict[tuple[str, str], str]:
    """(agent option, env id) -> the shipped recipe (experiment) that trains it."""
    found = {}
    for path in sorted((config_dir() / "experiment").glob("*.yaml")):
        spec = yaml.safe_load(path.read_text()) or {}
        chosen = {}
        for entry in spec.get("defaults", []):
            if isinstance(entry, dict):
                for key, value in entry.items():
                    chosen[str(key).removeprefix("override /")] = str(value)
        agent, env = chosen.get("agent"), chosen.get("env")
        env_id = (spec.get("env") or {}).get("id") or (env and _env_id(env))
        if agent and env_id:
            found[(agent, str(env_id))] = path.stem
    return found


def lookup(overrides: list[str]) -> str | None:
    """The recipe the rule (see the module docstring) picks for these overrides, if any."""
    if any(o.split("=", 1)[0].lstrip("+~") == "experiment" for o in overrides):
        return None
    for key in ("agent", "env", "env.id"):
        value = _choice(overrides, key)
        if value is not None and ("," in value or "(" in value):  # swept: one recipe cannot fit
            return None
    agent = _choice(overrides, "agent") or DEFAULT_AGENT
    env_id = _choice(overrides, "env.id") or _env_id(_choice(overrides, "env") or DEFAULT_ENV)
    if env_id is None:
        return None
    return recipes().get((agent, env_id))
