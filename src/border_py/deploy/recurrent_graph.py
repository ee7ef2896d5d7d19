"""The greedy step of border's recurrent agent (R2D2) as one torch module, what its exports run:
the state is an explicit input and output, the graph itself holds none (onnxruntime is stateless;
the caller feeds the returned state back, zeros at an episode's start).

Inputs, in order, for a batch of ``B`` envs:

- ``obs`` ``(B, *shape)``: as the env gives them (see :mod:`border_py.deploy.graph`);
- ``h`` ``(1, B, hidden)`` float32, then for an LSTM ``c`` ``(1, B, hidden)``: the core's state
  before this step (``nn.LSTM``'s layout, and sb3-contrib ``RecurrentPPO``'s);
- ``prev_action`` ``(B,)`` int64: the action taken before this step, -1 at an episode's first;
- ``prev_reward`` ``(B,)`` float32 (only for an agent with ``prev_reward``): the reward that
  followed it, 0 at an episode's first step.

Outputs: ``action`` ``(B,)`` int64 (the arg max of Q), ``values`` ``Q(s, .)`` ``(B, n)``, then
``next_h`` (and ``next_c``): the state after this step. The four input signatures are four small
classes (:data:`STEPS`) so that every input is a named tensor of the exported graph; each is
scriptable (TorchScript) and exportable (``torch.onnx``) as it is.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from border_py.agents.recurrent import RecurrentQNetwork
from border_py.deploy.graph import ObsCheck

__all__ = ["STEPS", "RecurrentStep", "recurrent_step", "step_inputs", "step_names"]


class RecurrentStep(nn.Module):
    """What the four signatures share: the core's input and the greedy head.

    Args:
        q: the agent's recurrent Q-network (its torso, core and head are used as they are).
        check: the observations' check (:class:`~border_py.deploy.graph.ObsCheck` for
            TorchScript; ``nn.Identity`` where the format checks inputs itself).
    """

    def __init__(self, q: RecurrentQNetwork, check: nn.Module) -> None:
        super().__init__()
        self.check = check
        self.torso, self.core, self.head = q.torso, q.core, q.head
        self.n_actions = int(q.n_actions)
        self.prev_reward = bool(q.prev_reward)

    def inputs(
        self, obs: torch.Tensor, prev_action: torch.Tensor, prev_reward: torch.Tensor | None
    ) -> torch.Tensor:
        """The core's input ``(B, 1, width)``, as
        :meth:`~border_py.agents.recurrent.RecurrentQNetwork.core_inputs` builds it."""
        features = self.torso(self.check(obs))
        one_hot = F.one_hot(prev_action.clamp(min=0), self.n_actions).to(features.dtype)
        parts = [features, one_hot * (prev_action >= 0).unsqueeze(-1)]
        if prev_reward is not None:
            parts.append(prev_reward.to(features.dtype).unsqueeze(-1))
        return torch.cat(parts, dim=-1).unsqueeze(1)

    def greedy(self, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(argmax_a Q, Q)`` of the core's output ``(B, 1, hidden)``."""
        q = self.head(out[:, 0])
        return q.argmax(dim=1), q


class LSTMStep(RecurrentStep):
    """``(obs, h, c, prev_action) -> (action, values, next_h, next_c)``."""

    def forward(
        self, obs: torch.Tensor, h: torch.Tensor, c: torch.Tensor, prev_action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        out, (next_h, next_c) = self.core(self.inputs(obs, prev_action, None), (h, c))
        action, q = self.greedy(out)
        return action, q, next_h, next_c


class LSTMRewardStep(RecurrentStep):
    """``(obs, h, c, prev_action, prev_reward) -> (action, values, next_h, next_c)``."""

    def forward(
        self,
        obs: torch.Tensor,
        h: torch.Tensor,
        c: torch.Tensor,
        prev_action: torch.Tensor,
        prev_reward: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        out, (next_h, next_c) = self.core(self.inputs(obs, prev_action, prev_reward), (h, c))
        action, q = self.greedy(out)
        return action, q, next_h, next_c


class GRUStep(RecurrentStep):
    """``(obs, h, prev_action) -> (action, values, next_h)``."""

    def forward(
        self, obs: torch.Tensor, h: torch.Tensor, prev_action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, next_h = self.core(self.inputs(obs, prev_action, None), h)
        action, q = self.greedy(out)
        return action, q, next_h


class GRURewardStep(RecurrentStep):
    """``(obs, h, prev_action, prev_reward) -> (action, values, next_h)``."""

    def forward(
        self,
        obs: torch.Tensor,
        h: torch.Tensor,
        prev_action: torch.Tensor,
        prev_reward: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, next_h = self.core(self.inputs(obs, prev_action, prev_reward), h)
        action, q = self.greedy(out)
        return action, q, next_h


# (LSTM?, previous reward?) -> the step's class
STEPS: dict[tuple[bool, bool], type[RecurrentStep]] = {
    (True, False): LSTMStep,
    (True, True): LSTMRewardStep,
    (False, False): GRUStep,
    (False, True): GRURewardStep,
}


def recurrent_step(q: RecurrentQNetwork, space: gym.Space | None) -> RecurrentStep:
    """A frozen CPU copy of ``q``'s greedy step, its observations checked against ``space``
    (None: unchecked, for a format that checks its inputs itself)."""
    check: nn.Module = nn.Identity() if space is None else ObsCheck(space)
    net = copy.deepcopy(q).cpu()
    step = STEPS[(net.state_parts == 2, bool(net.prev_reward))](net, check)
    return step.eval().requires_grad_(False)


def step_names(q: RecurrentQNetwork) -> tuple[list[str], list[str]]:
    """The step's input and output names, in order (see the module docstring)."""
    lstm = q.state_parts == 2
    inputs = ["obs", "h", *(["c"] if lstm else []), "prev_action"]
    inputs += ["prev_reward"] if q.prev_reward else []
    outputs = ["action", "values", "next_h", *(["next_c"] if lstm else [])]
    return inputs, outputs


def step_inputs(
    q: RecurrentQNetwork,
    obs: np.ndarray,
    state: np.ndarray,
    prev_action: np.ndarray,
    prev_reward: np.ndarray,
) -> dict[str, np.ndarray]:
    """The step's named inputs for ``obs``, a state ``(B, k, hidden)`` as the agent keeps it
    (:class:`~border_py.agents.base.RecurrentActing`) and the previous actions and rewards."""
    names = step_names(q)[0]
    values = {
        "obs": obs,
        "h": np.ascontiguousarray(state[None, :, 0], dtype=np.float32),
        "prev_action": np.asarray(prev_action, dtype=np.int64),
        "prev_reward": np.asarray(prev_reward, dtype=np.float32),
    }
    if q.state_parts == 2:
        values["c"] = np.ascontiguousarray(state[None, :, 1], dtype=np.float32)
    return {name: values[name] for name in names}
