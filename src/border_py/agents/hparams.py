"""The agents' hyper-parameters: a documented dataclass per agent, validated by one rule per name.

Each agent's hyper-parameters are a frozen dataclass derived from :class:`HParams` (``DQNArgs``,
``IQNArgs``, ``SACArgs``): its fields, each with its doc beside it, are the keys of the agent's
config group, so the constructor only builds networks from them. Their defaults are the Python
API's (``DQN(observation_space, action_space)``); a config never falls back on them: each agent's
shipped YAML gives every field (``tests/test_architecture_defaults.py`` checks it), and a config
that lacks one gets the YAML's value (:func:`border_py.runs.compat.complete`). A field is checked
with the rule for its name in :data:`RULES` when the dataclass is built: a key means the same (and
is checked the same way) in every agent, and a bad value is one
:class:`~border_py.errors.ConfigError` line naming it (``build`` prefixes the group:
``agent.lr=-1: must be a positive float``).

The config layer reads an agent's keys from its signature (:func:`border_py.config.config_keys`,
:func:`~border_py.config.coerce_counts`); :func:`configured_by` gives the constructor, which takes
``**hparams``, the signature that lists the dataclass's fields.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, TypeVar

from border_py.config import (
    count,
    flag,
    fraction,
    null_or,
    number,
    positive,
    positive_count,
    positive_number,
    require,
    widths,
)

__all__ = ["HParams", "Rule", "configured_by"]

Rule = Callable[[str, Any], None]
Init = TypeVar("Init", bound=Callable[..., None])


def _loss(key: str, value: Any) -> None:
    require(key, value in ("huber", "mse"), "'huber' or 'mse'", value)


RULES: dict[str, Rule] = {
    # optimization
    "lr": positive,
    "actor_lr": positive,
    "critic_lr": positive,
    "alpha_lr": positive,
    "adam_eps": positive,
    "batch_size": positive_count,
    "max_grad_norm": null_or(positive_number),
    "compile": flag,
    # returns and targets
    "gamma": fraction,
    "n_step": positive_count,
    "target_update_interval": positive_count,
    "tau": partial(fraction, open_low=True),
    "double_dqn": flag,
    "loss": _loss,
    # networks
    "hidden_sizes": widths,
    "dueling": flag,
    "n_critics": positive_count,
    # IQN
    "n_cos": positive_count,
    "n_tau": positive_count,
    "n_tau_prime": positive_count,
    "k": positive_count,
    "kappa": positive,
    # SAC's entropy and exploration
    "alpha": positive,
    "learn_alpha": flag,
    "target_entropy": null_or(number),
    "random_steps": count,
}


@dataclass(frozen=True)
class HParams:
    """Base of an agent's hyper-parameters dataclass, checked when it is built.

    Each field is checked with the class's own rule for its name (:attr:`rules`), else with
    :data:`RULES`' (a field with neither is checked where it is used); a field whose default is
    None may be None.

    Attributes:
        rules: rules of this agent's own that replace (or add to) :data:`RULES`.
    """

    rules: ClassVar[Mapping[str, Rule]] = {}

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None and field.default is None:
                continue
            rule = self.rules.get(field.name, RULES.get(field.name))
            if rule is not None:
                rule(field.name, value)


def configured_by(args_class: type[HParams]) -> Callable[[Init], Init]:
    """Decorate an agent's ``__init__(self, <runtime parameters>, **hparams)``: its signature then
    lists ``args_class``'s fields, with their types and defaults, as keyword parameters in place
    of ``**hparams`` (what the config layer checks and converts the agent's keys by)."""
    hints = typing.get_type_hints(args_class)
    keywords = [
        inspect.Parameter(
            field.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty
            if field.default is dataclasses.MISSING
            else field.default,
            annotation=hints[field.name],
        )
        for field in dataclasses.fields(args_class)
    ]

    def decorate(init: Init) -> Init:
        runtime = [
            p
            for p in inspect.signature(init, eval_str=True).parameters.values()
            if p.kind is not p.VAR_KEYWORD
        ]
        init.__signature__ = inspect.Signature([*runtime, *keywords])  # type: ignore[attr-defined]
        return init

    return decorate
