"""R2D2 (Kapturowski et al., ICLR 2019): recurrent double Q-learning on stored sequences.

On a batch of sequences (:mod:`border_py.sequences`: burn-in ``B``, learning steps ``L``,
bootstrap tail ``N``), both networks start each row from its stored state and burn in over its
real burn-in steps (:meth:`~border_py.agents.recurrent.RecurrentQNetwork.unroll`); then, at each
learning step ``t`` whose action is real (``mask_t``), with the actors' precomputed n-step sum
``R_t``, discount ``d_t`` (``gamma^m``, 0 after a terminal state) and offset ``m_t``
(the paper's §2.3, with h the value rescaling of :mod:`border_py.agents.rescaling`):

    a*_t     = argmax_a Q(s_{t+m}, a)                         (online network: double Q)
    y_t      = h(R_t + d_t * h^-1(Q_target(s_{t+m}, a*_t)))
    delta_t  = y_t - Q(s_t, a_t)
    loss     = sum_{rows, t} mask_t * w_row * l(delta_t) / max(1, sum_{rows, t} mask_t)
    priority = eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t|      (over masked-in steps)

``l`` is the squared error (``loss=mse``: Acme's R2D2 learner, ``0.5 sum_t td^2`` per sequence,
up to its factor 1/2) or the Huber loss (``loss=huber``), as DQN's key means; ``w_row`` is the
row's importance-sampling weight under prioritized replay. The loss is the mean over the batch's
real learning steps (Acme sums over a sequence's steps; a mean keeps the learning rate's scale
that of DQN's per-transition mean whatever ``L`` is). A padded step is selected away, never
multiplied by 0 (:mod:`border_py.agents.sequence_batch`): it changes neither the loss, its
gradients nor the priority.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from border_py.agents.batch import obs_tensor
from border_py.agents.discrete import DiscreteValueAgent, value_parts
from border_py.agents.hparams import HParams, Rule, configured_by
from border_py.agents.recurrent import CORES, RecurrentQNetwork
from border_py.agents.recurrent_inference import RecurrentInference
from border_py.agents.rescaling import rescale, unrescale
from border_py.agents.sequence_batch import SequenceBatch
from border_py.config import count, flag, fraction, positive_count, require, widths
from border_py.sequences import Sequences

__all__ = ["R2D2", "R2D2Args", "sequence_loss", "sequence_priority", "sequence_targets"]


def sequence_targets(
    q: torch.Tensor, q_target: torch.Tensor, batch: SequenceBatch, rescaling: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Q(s_t, a_t), y_t)``, each ``(rows, L)``, from the online and target unrolls ``q``,
    ``q_target`` ``(rows, L + N, n_actions)`` (index 0 is the learning start); ``y`` carries no
    gradient. ``rescaling``: with h and h^-1 (see the module docstring), else
    ``y = R + d * Q_target(s_{t+m}, a*)``."""
    length = batch.mask.shape[1]
    q_taken = q[:, :length].gather(2, batch.action.unsqueeze(2)).squeeze(2)
    bootstrap = torch.arange(length, device=q.device) + batch.offset  # t + m, from the start
    pick = bootstrap.unsqueeze(2).expand(-1, -1, q.shape[2])
    with torch.no_grad():
        best = q.gather(1, pick).argmax(dim=2, keepdim=True)  # a* = argmax_a Q(s_{t+m}, a)
        value = q_target.gather(1, pick).gather(2, best).squeeze(2)
        if not rescaling:
            return q_taken, batch.ret + batch.discount * value
        return q_taken, rescale(batch.ret + batch.discount * unrescale(value))


def sequence_loss(
    q_taken: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    weight: torch.Tensor | None,
    loss: str,
) -> torch.Tensor:
    """The mean of ``w_row * l(Q - y)`` over the batch's masked-in steps (``l``: ``mse`` or
    ``huber``); a masked-out step is selected away."""
    loss_fn = F.smooth_l1_loss if loss == "huber" else F.mse_loss
    per_step = loss_fn(q_taken, y, reduction="none")
    if weight is not None:
        per_step = per_step * weight.unsqueeze(1)
    return torch.where(mask, per_step, 0.0).sum() / mask.sum().clamp(min=1)


def sequence_priority(td_abs: torch.Tensor, mask: torch.Tensor, eta: float) -> torch.Tensor:
    """Per row ``eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t|`` over its masked-in steps
    (0 for a row without any), ``(rows,)``."""
    td = torch.where(mask, td_abs, 0.0)
    mean = td.sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    return eta * td.max(dim=1).values + (1 - eta) * mean


def _core(key: str, value: Any) -> None:
    require(key, value in CORES, " or ".join(repr(c) for c in CORES), value)


@dataclass(frozen=True)
class R2D2Args(HParams):
    """R2D2's hyper-parameters; the defaults are the paper's (Table 2) where it gives one."""

    rules: ClassVar[Mapping[str, Rule]] = {
        "core": _core,
        "core_size": positive_count,
        "head_sizes": widths,
        "burn_in": count,
        "length": positive_count,
        "period": positive_count,
        "eta": fraction,
        "burn_in_grad": flag,
        "prev_reward": flag,
        "value_rescaling": flag,
    }

    hidden_sizes: Sequence[int] = (128,)
    """Widths of the fully connected layers between the torso and the core (the paper's Atari
    network has none: its CNN feeds the LSTM)."""
    network: str = "auto"
    """The torso: ``auto``, ``mlp``, ``cnn`` or ``minatar`` (as DQN's)."""
    core: str = "lstm"
    """The recurrent core: ``lstm`` or ``gru``."""
    core_size: int = 128
    """The core's hidden width (the paper's LSTM: 512)."""
    head_sizes: Sequence[int] = ()
    """Hidden widths of the head after the core, of each stream with ``dueling`` (the paper: one
    of 512)."""
    dueling: bool = False
    """A dueling head, ``Q = V + A - mean_a A`` (the paper's)."""
    prev_reward: bool = False
    """Feed the previous reward to the core beside the one-hot previous action (the paper does;
    off by default: SB3's ``predict`` cannot supply rewards)."""
    burn_in: int = 40
    """Burn-in steps stored before each sequence's learning steps, run only to produce the
    start state (fewer at an episode's start)."""
    length: int = 80
    """Learning steps per sequence."""
    period: int | None = None
    """Env steps between the starts of an episode's sequences, at most ``length`` (None:
    ``length // 2``, the paper's overlap of 40 on 80)."""
    burn_in_grad: bool = False
    """Let gradients flow through the burn-in (the paper, §3, and DI-engine do not)."""
    value_rescaling: bool = True
    """Learn ``h(Q)`` (eps 1e-3) instead of ``Q``."""
    eta: float = 0.9
    """Priority mix: ``eta * max |delta| + (1 - eta) * mean |delta|`` over a sequence."""
    lr: float = 1e-4
    """Adam learning rate."""
    adam_eps: float = 1e-3
    """Adam's epsilon."""
    gamma: float = 0.997
    """Discount factor."""
    n_step: int = 5
    """Rewards summed per target (the actors precompute the sums), at most ``length``."""
    batch_size: int = 64
    """Sequences per optimization step."""
    loss: str = "mse"
    """``mse`` (squared TD error, Acme's) or ``huber``."""
    max_grad_norm: float | None = 10.0
    """Gradient-norm clipping threshold (None: no clipping), as DQN's."""
    target_update_interval: int = 2500
    """Opt steps between hard target copies."""
    eps_start: float = 1.0
    """Initial exploration epsilon (Ape-X actors fix their own instead)."""
    eps_final: float = 0.05
    """Final exploration epsilon."""
    eps_decay_steps: int = 10000
    """Env steps of the run over which epsilon decays linearly."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.period is not None:
            require(
                "period", self.period <= self.length, f"at most length={self.length}", self.period
            )
        # a sequence stores n_step bootstrap steps past its length learning steps: a tail longer
        # than the learning part would mostly store steps no target sums over
        require("n_step", self.n_step <= self.length, f"at most length={self.length}", self.n_step)


class R2D2(DiscreteValueAgent[R2D2Args]):
    """R2D2 for discrete actions: a recurrent Q-network (:mod:`border_py.agents.recurrent`)
    learned on stored sequences, acting epsilon-greedily with a recurrent state per env.

    Args:
        observation_space: the env's (Box) observation space.
        action_space: the env's Discrete action space.
        device: where the learner's networks live (``cpu`` or ``cuda``).
        seed: seeds network initialization and exploration.
        **hparams: the fields of :class:`R2D2Args`.
    """

    acting_module = "q"
    checkpointed = value_parts("q")

    @configured_by(R2D2Args)
    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        device: str = "cpu",
        seed: int = 0,
        **hparams: Any,
    ) -> None:
        super().__init__(R2D2Args, observation_space, action_space, device, seed, hparams)
        args = self.args

        def q_net() -> RecurrentQNetwork:
            return RecurrentQNetwork(
                observation_space,
                self.n_actions,
                args.hidden_sizes,
                args.network,
                args.core,
                args.core_size,
                args.head_sizes,
                args.dueling,
                args.prev_reward,
            )

        self.q, self.q_target, self.optimizers = self.value_network("q", seed, q_net)
        # an MLP torso on the CPU acts with numpy (the module's step costs several times more)
        self.fast_step = RecurrentInference.of(self.q)
        self.burn_in, self.length = args.burn_in, args.length
        self.period = args.period if args.period is not None else max(1, args.length // 2)

    def initial_state(self, n: int) -> np.ndarray:
        """The state of ``n`` envs at an episode's start: float32 zeros ``(n, k, core_size)``."""
        return self.q.initial_state(n).cpu().numpy()

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        """Actions for observations each taken as an episode's first (a zero state, no previous
        action or reward): the :class:`~border_py.agents.base.Agent` protocol's stateless call.
        Actors and evaluations act with :meth:`act_recurrent`, which carries each env's state."""
        n = len(obs)
        no_action, no_reward = np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.float32)
        return self.act_recurrent(obs, self.initial_state(n), no_action, no_reward, explore)[0]

    def act_recurrent(
        self,
        obs: np.ndarray,
        state: np.ndarray,
        prev_action: np.ndarray,
        prev_reward: np.ndarray,
        explore: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Epsilon-greedy (``explore``) or greedy actions for a batch of envs, and their next
        states: the network's :meth:`~border_py.agents.recurrent.RecurrentQNetwork.step`, in
        numpy for an MLP torso on the CPU (:mod:`border_py.agents.recurrent_inference`).

        Args:
            obs: ``(n, *obs_shape)``.
            state: float32 ``(n, k, core_size)``: each env's state before this step (zeros at an
                episode's first step).
            prev_action: int ``(n,)``: the action taken before this step (-1 at an episode's
                first step).
            prev_reward: ``(n,)``: the reward that followed it (0 at an episode's first step).
            explore: epsilon-greedy (advances the schedule), else greedy.
        """
        if self.fast_step is not None:
            q_np, next_state_np = self.fast_step(obs, prev_action, prev_reward, state)
            actions = q_np.argmax(axis=1)
        else:
            with torch.inference_mode():
                q, next_state = self.q.step(
                    obs_tensor(obs, self.device),
                    torch.as_tensor(prev_action, dtype=torch.int64, device=self.device),
                    torch.as_tensor(prev_reward, dtype=torch.float32, device=self.device),
                    torch.as_tensor(state, dtype=torch.float32, device=self.device),
                )
                actions, next_state_np = q.argmax(dim=1).cpu().numpy(), next_state.cpu().numpy()
        return (self.explore(actions) if explore else actions), next_state_np

    def losses(
        self, batch: SequenceBatch, bootstrap: RecurrentQNetwork
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(loss, priority (rows,), Q(s_t, a_t) (rows, L))`` on ``batch``, bootstrapped from
        ``bootstrap`` (the target network; an actor's copy has only the online one)."""
        args = self.args
        q = self.q.unroll(batch, args.burn_in_grad)
        with torch.no_grad():
            q_next = q if bootstrap is self.q else bootstrap.unroll(batch)
        q_taken, y = sequence_targets(q, q_next.detach(), batch, args.value_rescaling)
        loss = sequence_loss(q_taken, y, batch.mask, batch.weight, args.loss)
        priority = sequence_priority((y - q_taken.detach()).abs(), batch.mask, args.eta)
        return loss, priority, q_taken

    def update(self, batch: Sequences) -> dict[str, Any]:
        """One gradient step on ``batch``'s loss, then the target copy every
        ``target_update_interval`` steps.

        Importance weights (``batch.weight``) multiply each row's steps once; for a prioritized
        sample (``batch.index`` set) the metrics include ``td_error``: each row's new priority
        (``eta`` max/mean mix of ``|delta|``, float32 numpy ``(rows,)``) for the replay.
        """
        metrics = self.update_tensors(SequenceBatch.of(batch, self.device))
        priority = metrics.pop("td_error")
        if batch.index is not None:  # a numpy copy waits for a GPU: only when the buffer needs it
            metrics["td_error"] = priority.cpu().numpy().astype(np.float32)
        return metrics

    def update_tensors(self, batch: SequenceBatch) -> dict[str, Any]:
        """:meth:`update` on a batch already converted on the device (the learner's prefetch,
        :mod:`border_py.trainers.prefetch`); ``td_error``, each row's new priority, stays a
        device tensor."""
        loss, priority, q_taken = self.losses(batch, self.q_target)
        optimizer = self.optimizers["q"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # after clipping the gradients' norm to max_grad_norm
        self.opt_steps += 1
        if self.opt_steps % self.args.target_update_interval == 0:  # theta' <- theta
            self.q_target.load_state_dict(self.q.state_dict())
        q_sum = torch.where(batch.mask, q_taken.detach(), 0.0).sum()  # no sync: no mask indexing
        return {
            "train/loss": loss.detach(),
            "train/q_mean": q_sum / batch.mask.sum().clamp(min=1),
            "td_error": priority,
        }

    def td_error(self, batch: Sequences) -> np.ndarray:
        """Each row's priority with the online network for the bootstrap too (an actor's copy
        has no target network): initial priorities for prioritized replay. No gradient, no
        state change."""
        with torch.no_grad():
            _, priority, _ = self.losses(SequenceBatch.of(batch, self.device), self.q)
        return priority.cpu().numpy().astype(np.float32)
