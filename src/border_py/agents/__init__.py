"""Agents: the learning algorithms. See :class:`border_py.agents.base.Agent` for the protocol and
:func:`check_agent` to check an agent against it."""

from border_py.agents.check import AgentCheckError, check_agent

__all__ = ["AgentCheckError", "check_agent"]
