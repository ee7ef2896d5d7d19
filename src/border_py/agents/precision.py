"""The precision actors act in: ``actor_manager.policy_dtype`` resolved for an agent and a CPU.

``float32`` and ``bfloat16`` are what they say (the learner refuses bfloat16 for an agent that
cannot act in it, and the serial trainer refuses it: its actor acts with the learner's own
network). ``auto`` is bfloat16 where the agent offers it
(:class:`~border_py.agents.base.ActingPrecision`) and the CPU that acts has AMX bfloat16 units
(:func:`~border_py.agents.inference.native_bfloat16`), float32 elsewhere and in the serial
trainer. It is resolved in two steps: for the agent once, in the learner
(:func:`resolve_for_agent`), then for the CPU where the actors run (:func:`resolve_on_cpu`): the
learner's own for local actor processes, each node's for Ray actors, which may run on other
machines. A resumed run resolves it again.
"""

from __future__ import annotations

from collections.abc import Collection

from border_py.agents.base import ActingPrecision
from border_py.agents.inference import native_bfloat16

__all__ = [
    "POLICY_DTYPES",
    "for_local_actors",
    "for_ray_actors",
    "offered_dtypes",
    "resolve_for_agent",
    "resolve_here",
    "resolve_on_cpu",
]

POLICY_DTYPES = ("auto", "float32", "bfloat16")  # actor_manager.policy_dtype's values


def offered_dtypes(agent: object) -> tuple[str, ...]:
    """The precisions ``agent``'s actors can act in (float32 alone for an agent that is no
    :class:`~border_py.agents.base.ActingPrecision`)."""
    return tuple(agent.acting_dtypes()) if isinstance(agent, ActingPrecision) else ("float32",)


def resolve_for_agent(setting: str, offered: Collection[str]) -> str:
    """``setting`` for an agent that can act in ``offered``: ``auto`` stays ``auto`` (bfloat16 on
    a CPU with AMX) where bfloat16 is offered, else becomes float32; float32 and bfloat16 stay."""
    if setting == "auto" and "bfloat16" not in offered:
        return "float32"
    return setting


def resolve_on_cpu(dtype: str) -> str:
    """``dtype`` (after :func:`resolve_for_agent`) on the CPU that calls this: ``auto`` is
    bfloat16 where it has AMX bfloat16 units, float32 elsewhere; float32 and bfloat16 stay."""
    if dtype == "auto":
        return "bfloat16" if native_bfloat16() else "float32"
    return dtype


def resolve_here(setting: str, offered: Collection[str]) -> str:
    """The precision actors on this machine act in for ``setting``, for an agent that can act in
    ``offered``."""
    return resolve_on_cpu(resolve_for_agent(setting, offered))


def for_local_actors(setting: str, agent: object) -> tuple[str, str]:
    """What actor processes on this machine act in for ``setting`` with ``agent``, and the log's
    words for it (``bfloat16 (policy_dtype=auto: DQN offers bfloat16 and this CPU has AMX
    bfloat16 units)``)."""
    offered = offered_dtypes(agent)
    dtype = resolve_here(setting, offered)
    if setting != "auto":
        return dtype, dtype
    name = type(agent).__name__
    if "bfloat16" not in offered:
        why = f"{name} acts in float32 only with this network"
    elif dtype == "bfloat16":
        why = f"{name} offers bfloat16 and this CPU has AMX bfloat16 units"
    else:
        why = "this CPU has no AMX bfloat16 units"
    return dtype, f"{dtype} (policy_dtype=auto: {why})"


def for_ray_actors(setting: str, agent: object) -> tuple[str, str]:
    """What the specs of Ray actors carry for ``setting`` with ``agent`` (``auto``: each actor's
    node decides, :func:`resolve_on_cpu`), and the log's words for it."""
    dtype = resolve_for_agent(setting, offered_dtypes(agent))
    if dtype != "auto":
        return dtype, dtype
    return dtype, (
        "bfloat16 on nodes whose CPU has AMX bfloat16 units, float32 on the others"
        " (policy_dtype=auto)"
    )
