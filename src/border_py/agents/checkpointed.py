"""An agent's checkpointed parts, declared once; saving and loading are generic over them.

An agent lists what its training state is made of in the class attribute ``checkpointed``: the key
each part is saved under and what kind of thing it is (a module's weights, a tensor, a counter, a
random generator, optimizers). :class:`Checkpointed` derives ``state_dict`` and
``load_state_dict`` from that list, and ``policy_state``/``load_policy_state`` from
``acting_module`` (the network actors act with), so save and load cannot drift apart and a new
part is one line. The keys are the checkpoint format (the agent state in ``trainer.pt``):
renaming one makes older checkpoints unloadable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import torch

from border_py.agents.networks import cpu_weights

__all__ = [
    "Checkpointed",
    "Count",
    "OptimizerStates",
    "OptionalArray",
    "Part",
    "RandomState",
    "Tensor",
    "Weights",
]


def described(saved: Any) -> str:
    """``of shape (...)`` for a tensor, ``of type <type>`` for anything else."""
    if isinstance(saved, torch.Tensor):
        return f"of shape {tuple(saved.shape)}"
    return f"of type {type(saved).__name__}"


class Part(Protocol):
    """How one checkpointed part of an agent is saved and restored."""

    required: ClassVar[bool]  # False: checkpoints written before the part existed lack it

    def save(self, agent: Any) -> Any:
        """The part's state: tensors, numbers and plain containers only."""

    def load(self, agent: Any, saved: Any) -> None:
        """Restore what :meth:`save` returned (None for a missing optional part)."""


@dataclass(frozen=True)
class Weights:
    """The weights (``state_dict``) of the module ``agent.<attr>``."""

    attr: str
    required: ClassVar[bool] = True

    def save(self, agent: Any) -> Any:
        return getattr(agent, self.attr).state_dict()

    def load(self, agent: Any, saved: Any) -> None:
        getattr(agent, self.attr).load_state_dict(saved)


@dataclass(frozen=True)
class Tensor:
    """The tensor ``agent.<attr>`` (e.g. a learned scalar), restored in place."""

    attr: str
    required: ClassVar[bool] = True

    def save(self, agent: Any) -> Any:
        return getattr(agent, self.attr).detach().clone()

    def load(self, agent: Any, saved: Any) -> None:
        target = getattr(agent, self.attr)
        if not isinstance(saved, torch.Tensor) or saved.shape != target.shape:
            raise ValueError(
                f"saved {self.attr} {described(saved)}, not the agent's {tuple(target.shape)}"
            )
        with torch.no_grad():
            target.copy_(saved)


@dataclass(frozen=True)
class Count:
    """The integer counter ``agent.<attr>`` (env steps, opt steps)."""

    attr: str
    required: ClassVar[bool] = True

    def save(self, agent: Any) -> Any:
        return getattr(agent, self.attr)

    def load(self, agent: Any, saved: Any) -> None:
        setattr(agent, self.attr, int(saved))


@dataclass(frozen=True)
class RandomState:
    """The state of the random generator ``agent.<attr>``: numpy's or torch's."""

    attr: str
    required: ClassVar[bool] = True

    def save(self, agent: Any) -> Any:
        generator = getattr(agent, self.attr)
        if isinstance(generator, np.random.Generator):
            return generator.bit_generator.state
        return generator.get_state()

    def load(self, agent: Any, saved: Any) -> None:
        generator = getattr(agent, self.attr)
        if isinstance(generator, np.random.Generator):
            generator.bit_generator.state = saved
        else:
            generator.set_state(saved)


@dataclass(frozen=True)
class OptimizerStates:
    """``agent.optimizers`` (:class:`~border_py.agents.optim.Optimizers`): all of them by name, or
    the one named ``only``, saved alone. Loading keeps the configured learning rates and epsilons
    (the resume rule of :meth:`~border_py.agents.optim.Optimizers.load_state_dict`)."""

    only: str | None = None
    required: ClassVar[bool] = True

    def save(self, agent: Any) -> Any:
        if self.only is None:
            return agent.optimizers.state_dict()
        return agent.optimizers[self.only].state_dict()

    def load(self, agent: Any, saved: Any) -> None:
        agent.optimizers.load_state_dict(saved if self.only is None else {self.only: saved})


@dataclass(frozen=True)
class OptionalArray:
    """The float32 numpy array ``agent.<attr>`` of rows of ``agent.<width>`` values (e.g. one
    per env row and action dim), or None; saved as a tensor. A checkpoint written before the
    part existed restores None."""

    attr: str
    width: str
    required: ClassVar[bool] = False

    def save(self, agent: Any) -> Any:
        array = getattr(agent, self.attr)
        return None if array is None else torch.from_numpy(array.copy())

    def load(self, agent: Any, saved: Any) -> None:
        if saved is not None:  # refused before the copy: a float32 tensor of such rows
            width = getattr(agent, self.width)
            rows = isinstance(saved, torch.Tensor) and saved.ndim == 2 and saved.shape[1] == width
            if not rows or saved.dtype != torch.float32:
                dtype = f" and {saved.dtype}" if isinstance(saved, torch.Tensor) else ""
                raise ValueError(
                    f"saved {self.attr} {described(saved)}{dtype}, not float32 rows of {width}"
                )
        setattr(agent, self.attr, None if saved is None else saved.numpy().copy())


class Checkpointed:
    """Base of an agent whose training state is its declared parts.

    A subclass sets two class attributes:

    Attributes:
        acting_module: the attribute holding the network actors act with; its weights are what
            the learner publishes (:meth:`policy_state`).
        checkpointed: the saved key of each part, in the order they are saved and restored.
    """

    acting_module: ClassVar[str]
    checkpointed: ClassVar[Mapping[str, Part]]

    def policy_state(self) -> dict[str, torch.Tensor]:
        """The weights of the acting network, on CPU (all an actor needs)."""
        return cpu_weights(getattr(self, self.acting_module))

    def load_policy_state(self, state: dict[str, torch.Tensor]) -> None:
        """Load weights produced by :meth:`policy_state`."""
        getattr(self, self.acting_module).load_state_dict(state)

    def state_dict(self) -> dict[str, Any]:
        """Every part of :attr:`checkpointed`, by its key."""
        return {key: part.save(self) for key, part in self.checkpointed.items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        for key, part in self.checkpointed.items():
            part.load(self, state[key] if part.required else state.get(key))
