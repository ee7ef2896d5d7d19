"""The recurrent Q-network of R2D2 (Kapturowski et al. 2019) and its unroll over stored sequences.

    obs -> torso -> [features, one-hot previous action, previous reward?] -> LSTM/GRU -> head -> Q

The torso is one of :mod:`border_py.agents.networks`' (MLP, MinAtar or Nature CNN) with optional
fully connected layers after it; the core gets, as in the paper's appendix, "the reward and
one-hot action vector from the previous time step" (the reward only when asked: a caller such as
SB3's ``predict`` cannot supply it); the head is linear or dueling.

The core's state travels as one tensor ``(rows, k, hidden)``: ``k = 2`` rows ``(h, c)`` for an
LSTM, ``k = 1`` for a GRU, what :class:`~border_py.sequences.Sequences` stores.

:meth:`RecurrentQNetwork.unroll` starts each row from its stored state, the state before the
row's first present index ``B - burn``, and runs its ``burn`` real burn-in steps (a packed
sequence of each row's own length: the left padding before them never reaches the core), under
``no_grad`` unless asked (the paper's burn-in, §3: "only for unrolling the network and producing
a start state"); then the learning steps and the bootstrap tail with gradients. It equals
stepping :meth:`RecurrentQNetwork.step` one index at a time from the stored state (a test checks
it), which is how an actor acts.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from border_py.agents.networks import DuelingHead, dense, torso
from border_py.agents.sequence_batch import SequenceBatch
from border_py.config import require

__all__ = ["CORES", "RecurrentQNetwork"]

CORES = ("lstm", "gru")
CoreState = torch.Tensor | tuple[torch.Tensor, torch.Tensor]  # what nn.LSTM / nn.GRU take


class RecurrentQNetwork(nn.Module):
    """Q-values from a recurrent core over a torso, one set per step.

    Args:
        observation_space: the env's observation space.
        n_actions: number of actions.
        hidden_sizes: widths of the fully connected layers between the torso and the core.
        network: the torso, see :func:`~border_py.agents.networks.torso`.
        core: ``lstm`` or ``gru``.
        core_size: the core's hidden width.
        head_sizes: hidden widths of the head after the core (of each stream with ``dueling``).
        dueling: a dueling head, ``Q = V + A - mean_a A``.
        prev_reward: feed the previous reward to the core (the previous action always is).
    """

    def __init__(
        self,
        observation_space: gym.Space,
        n_actions: int,
        hidden_sizes: Sequence[int] = (),
        network: str = "auto",
        core: str = "lstm",
        core_size: int = 128,
        head_sizes: Sequence[int] = (),
        dueling: bool = False,
        prev_reward: bool = False,
    ) -> None:
        super().__init__()
        require("core", core in CORES, " or ".join(repr(c) for c in CORES), core)
        encoder, dim = torso(observation_space, network)
        self.torso = nn.Sequential(encoder, *dense(dim, hidden_sizes, None))
        width = int(hidden_sizes[-1]) if hidden_sizes else dim
        self.n_actions, self.prev_reward, self.core_size = n_actions, prev_reward, core_size
        self.state_parts = 2 if core == "lstm" else 1
        rnn = nn.LSTM if core == "lstm" else nn.GRU
        self.core = rnn(width + n_actions + int(prev_reward), core_size, batch_first=True)
        self.head: nn.Module = (
            DuelingHead(core_size, head_sizes, n_actions)
            if dueling
            else nn.Sequential(*dense(core_size, head_sizes, n_actions))
        )

    def initial_state(self, rows: int) -> torch.Tensor:
        """The state of an episode's first step: zeros ``(rows, k, core_size)``."""
        weight = next(self.parameters())
        shape = (rows, self.state_parts, self.core_size)
        return torch.zeros(shape, dtype=weight.dtype, device=weight.device)

    def core_inputs(
        self, obs: torch.Tensor, prev_action: torch.Tensor, prev_reward: torch.Tensor
    ) -> torch.Tensor:
        """The core's inputs ``(rows, steps, width + n_actions [+ 1])`` for ``obs`` of shape
        ``(rows, steps, *obs_shape)`` and the previous actions (-1: none, a zero one-hot) and
        rewards ``(rows, steps)``."""
        rows, steps = prev_action.shape
        features = self.torso(obs.flatten(0, 1)).view(rows, steps, -1)
        one_hot = F.one_hot(prev_action.clamp(min=0), self.n_actions).to(features.dtype)
        parts = [features, one_hot * (prev_action >= 0).unsqueeze(-1)]
        if self.prev_reward:
            parts.append(prev_reward.to(features.dtype).unsqueeze(-1))
        return torch.cat(parts, dim=-1)

    def step(
        self,
        obs: torch.Tensor,
        prev_action: torch.Tensor,
        prev_reward: torch.Tensor,
        state: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step for a batch of envs (acting): ``(Q (rows, n_actions), next state)`` for
        ``obs`` ``(rows, *obs_shape)``, ``prev_action``/``prev_reward`` ``(rows,)`` and the
        state the envs had before this step ``(rows, k, core_size)``."""
        inputs = self.core_inputs(obs.unsqueeze(1), prev_action[:, None], prev_reward[:, None])
        out, core_state = self.core(inputs, self._core_state(state))
        return self.head(out[:, 0]), self._state(core_state)

    def unroll(self, batch: SequenceBatch, grad_through_burn_in: bool = False) -> torch.Tensor:
        """Q-values at every index from the learning start on, ``(rows, L + N, n_actions)``.

        Each row starts from its stored state and runs its own burn-in steps first (see the
        module docstring); ``grad_through_burn_in``: let gradients flow through them too (the
        paper and DI-engine do not; Acme does).
        """
        start = batch.burn_in
        with torch.set_grad_enabled(grad_through_burn_in and torch.is_grad_enabled()):
            state = self.burned_in_state(batch)
        inputs = self.core_inputs(
            batch.obs[:, start:], batch.prev_action[:, start:], batch.prev_reward[:, start:]
        )
        out, _ = self.core(inputs, self._core_state(state))
        return self.head(out)

    def burned_in_state(self, batch: SequenceBatch) -> torch.Tensor:
        """The state at the learning start: each row's stored state run through its ``burn``
        real burn-in steps, at ``[B - burn, B)`` (rows without burn-in keep theirs)."""
        rows = (batch.burn > 0).nonzero().squeeze(1)
        if batch.burn_in == 0 or len(rows) == 0:
            return batch.state
        burn = batch.burn[rows]
        # left-align: step j of a row is its index B - burn + j (those past its burn are not run)
        steps = torch.arange(batch.burn_in, device=burn.device)
        index = ((batch.burn_in - burn).unsqueeze(1) + steps).clamp(max=batch.burn_in - 1)
        at = rows.unsqueeze(1), index
        inputs = self.core_inputs(batch.obs[at], batch.prev_action[at], batch.prev_reward[at])
        packed = pack_padded_sequence(inputs, burn.cpu(), batch_first=True, enforce_sorted=False)
        _, core_state = self.core(packed, self._core_state(batch.state[rows]))
        return batch.state.index_copy(0, rows, self._state(core_state))

    def _core_state(self, state: torch.Tensor) -> CoreState:
        """``(rows, k, hidden)`` as the core takes it: ``(h, c)`` or ``h``, each ``(1, rows, hidden)``."""
        parts = [state[:, i].unsqueeze(0).contiguous() for i in range(self.state_parts)]
        return (parts[0], parts[1]) if self.state_parts == 2 else parts[0]

    @staticmethod
    def _state(core_state: CoreState) -> torch.Tensor:
        """The core's ``(h, c)`` or ``h`` as one ``(rows, k, hidden)`` tensor."""
        parts = core_state if isinstance(core_state, tuple) else (core_state,)
        return torch.stack([part[0] for part in parts], dim=1)
