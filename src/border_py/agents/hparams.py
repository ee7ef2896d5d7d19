"""The agents' hyper-parameters: a documented dataclass per agent, validated by one rule per name.

Each agent's hyper-parameters are a frozen dataclass derived from :class:`HParams` (``DQNArgs``,
``IQNArgs``, ``SACArgs``): its fields, with their defaults and docs, are the keys of the agent's
config group, so the constructor only builds networks from them. A field is checked with the
rule for its name in :data:`RULES` when the dataclass is built: a key means the same (and is
checked the same way) in every agent, and a bad value is one :class:`~border_py.errors.ConfigError`
line naming it (``build`` prefixes the group: ``agent.lr=-1: must be a positive float``).

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

from border_py.config import flag, fraction, non_negative, positive, require, widths

Rule = Callable[[str, Any], None]
Init = TypeVar("Init", bound=Callable[..., None])


def _null_or_positive(key: str, value: Any) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    require(key, value is None or (number and value > 0), "null or > 0", value)


def _null_or_number(key: str, value: Any) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    require(key, value is None or number, "null or a number", value)


def _loss(key: str, value: Any) -> None:
    require(key, value in ("huber", "mse"), "'huber' or 'mse'", value)


_positive_int = partial(positive, kind=int)

RULES: dict[str, Rule] = {
    # optimization
    "lr": positive,
    "actor_lr": positive,
    "critic_lr": positive,
    "alpha_lr": positive,
    "adam_eps": positive,
    "batch_size": _positive_int,
    "max_grad_norm": _null_or_positive,
    "compile": flag,
    # returns and targets
    "gamma": fraction,
    "n_step": _positive_int,
    "target_update_interval": _positive_int,
    "tau": partial(fraction, open_low=True),
    "double_dqn": flag,
    "loss": _loss,
    # networks
    "hidden_sizes": widths,
    "dueling": flag,
    "n_critics": _positive_int,
    # IQN
    "n_cos": _positive_int,
    "n_tau": _positive_int,
    "n_tau_prime": _positive_int,
    "k": _positive_int,
    "kappa": positive,
    # SAC's entropy and exploration
    "alpha": positive,
    "learn_alpha": flag,
    "target_entropy": _null_or_number,
    "random_steps": non_negative,
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
