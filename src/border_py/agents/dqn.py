"""Deep Q-Network (Mnih et al. 2015), with double DQN (van Hasselt et al. 2016) as an option.

Loss on a batch of n-step transitions ``(s, a, R, s', d)`` where ``d`` already holds
``gamma**k`` (0 after a terminal state):

    y = R + d * Q_target(s', argmax_a' Q(s', a'))     (double DQN)
    y = R + d * max_a' Q_target(s', a')               (DQN)
    L = huber(Q(s, a) - y)  or  (Q(s, a) - y)**2
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from border_py.agents.batch import TensorBatch, obs_tensor
from border_py.agents.compiled import check_mode, compiled
from border_py.agents.discrete import DiscreteValueAgent, value_parts
from border_py.agents.exploration import linear_epsilon
from border_py.agents.footprint import Footprint, dqn_footprint
from border_py.agents.hparams import HParams, Rule, configured_by
from border_py.agents.inference import ConvInference, MLPInference
from border_py.agents.networks import polyak_update, q_network
from border_py.transitions import Transitions

__all__ = ["DQN", "DQNArgs", "dqn_targets", "linear_epsilon"]


def dqn_targets(
    reward: torch.Tensor,
    discount: torch.Tensor,
    next_q_online: torch.Tensor,
    next_q_target: torch.Tensor,
    double_dqn: bool,
) -> torch.Tensor:
    """TD targets ``R + d * Q_target(s', a*)``; ``a*`` from the online net when ``double_dqn``."""
    if double_dqn:
        best = next_q_online.argmax(dim=1, keepdim=True)
        next_value = next_q_target.gather(1, best).squeeze(1)
    else:
        next_value = next_q_target.max(dim=1).values
    return reward + discount * next_value


@dataclass(frozen=True)
class DQNArgs(HParams):
    """DQN's hyper-parameters (the keys of ``conf/agent/dqn.yaml``)."""

    rules: ClassVar[Mapping[str, Rule]] = {"compile_mode": check_mode}

    hidden_sizes: Sequence[int] = (256, 256)
    """Widths of the fully connected hidden layers (after the CNN torso for images: the Nature DQN
    has one of 512)."""
    network: str = "auto"
    """``auto`` (for uint8 (C, H, W) observations the Nature CNN from 36x36 and the MinAtar CNN
    below, else an MLP), ``mlp``, ``cnn`` or ``minatar``."""
    dueling: bool = False
    """A dueling head: the last hidden layer split into value and advantage streams,
    ``Q = V + A - mean_a A``."""
    lr: float = 1e-3
    """Adam learning rate."""
    adam_eps: float = 1e-8
    """Adam's epsilon (see :mod:`border_py.agents.optim`)."""
    gamma: float = 0.99
    """Discount factor."""
    n_step: int = 1
    """Rewards summed per transition (returns are computed by the actors)."""
    batch_size: int = 64
    """Transitions per optimization step."""
    double_dqn: bool = True
    """Pick next actions with the online network, value them with the target."""
    loss: str = "huber"
    """``huber`` or ``mse``."""
    max_grad_norm: float | None = 10.0
    """Gradient-norm clipping threshold (None: no clipping)."""
    target_update_interval: int = 100
    """Opt steps between hard target copies (when ``tau`` is None)."""
    tau: float | None = None
    """Polyak coefficient for a soft target update every opt step (None: hard copies)."""
    eps_start: float = 1.0
    """Initial exploration epsilon."""
    eps_final: float = 0.05
    """Final exploration epsilon."""
    eps_decay_steps: int = 10000
    """Env steps of the run (all actors together) over which epsilon decays linearly."""
    compile: bool = False
    """Run the TD loss (forward and backward) through ``torch.compile``
    (:mod:`border_py.agents.compiled`)."""
    compile_mode: str = "default"
    """``torch.compile``'s mode: ``default``, ``reduce-overhead`` (CUDA graphs) or
    ``max-autotune``."""


class DQN(DiscreteValueAgent[DQNArgs]):
    """DQN agent for discrete actions, epsilon-greedy.

    The Q-network is an MLP for vector observations and the Nature CNN (Mnih et al. 2015) for
    uint8 (C, H, W) images (MinAtar's CNN for images under 36x36), optionally with a dueling head
    (Wang et al. 2016). uint8 observations (pixels, or vectors such as Atari RAM) are scaled into
    [0, 1] inside the network.

    Args:
        observation_space: the env's (Box) observation space.
        action_space: the env's Discrete action space.
        device: where the learner's networks live (``cpu`` or ``cuda``).
        seed: seeds network initialization and exploration.
        **hparams: the fields of :class:`DQNArgs`.
    """

    acting_module = "q"  # actors act with the online Q-network
    checkpointed = value_parts("q")

    @configured_by(DQNArgs)
    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        device: str = "cpu",
        seed: int = 0,
        **hparams: Any,
    ) -> None:
        super().__init__(DQNArgs, observation_space, action_space, device, seed, hparams)
        args = self.args

        def q_net() -> torch.nn.Sequential:
            return q_network(
                observation_space, self.n_actions, args.hidden_sizes, args.network, args.dueling
            )

        self.q, self.q_target, self.optimizers = self.value_network("q", seed, q_net)
        # plain MLPs act with numpy, others with the module (or in bfloat16: set_acting_dtype)
        self.fast_q: MLPInference | ConvInference | None = MLPInference.of(self.q)
        self._loss = compiled(self._td_loss, args.compile, args.compile_mode)

    @classmethod
    def footprint(
        cls, observation_space: gym.Space, action_space: gym.Space, **hparams: Any
    ) -> Footprint:
        """What the agent of ``hparams`` takes on these spaces, without building it (see
        :func:`~border_py.agents.footprint.dqn_footprint`)."""
        args = DQNArgs(**hparams)
        n_actions = int(action_space.n)  # type: ignore[attr-defined]  # check_spaces: Discrete
        return dqn_footprint(
            observation_space,
            n_actions,
            args.hidden_sizes,
            args.network,
            args.dueling,
            args.double_dqn,
            args.batch_size,
        )

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` of the online network for a batch of observations, float32 (B, n_actions)."""
        if self.fast_q is not None:
            return self.fast_q(obs)
        with torch.inference_mode():
            return self.q(obs_tensor(obs, self.device)).cpu().numpy()

    def acting_dtypes(self) -> tuple[str, ...]:
        """``float32``, and ``bfloat16`` for a CNN torso (:class:`ConvInference`)."""
        return ("float32", "bfloat16") if ConvInference.of(self.q) else ("float32",)

    def set_acting_dtype(self, dtype: str) -> None:
        """Act in ``dtype``, one of :meth:`acting_dtypes`, from now on (:meth:`q_values` too, so
        the values an actor scores priorities from): ``bfloat16`` through
        :class:`ConvInference`, ``float32`` with the network as built. The updates and
        :meth:`td_error` stay float32."""
        if dtype not in self.acting_dtypes():
            raise ValueError(f"DQN acts in {self.acting_dtypes()} with this network, not {dtype!r}")
        if dtype == "float32":
            self.fast_q = MLPInference.of(self.q)
        else:
            self.fast_q = ConvInference.of(self.q, dtype)

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        """Epsilon-greedy (``explore``) or greedy actions for a batch of observations."""
        return self.act_with_values(obs, explore)[0]

    def act_with_values(self, obs: np.ndarray, explore: bool) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`act`'s actions and the Q-values they were chosen from (B, n_actions)."""
        q = self.q_values(obs)
        actions = q.argmax(axis=1)
        return (self.explore(actions) if explore else actions), q

    def _q_and_target(
        self, b: TensorBatch, bootstrap: torch.nn.Module
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Q(s, a), y)``: the online values of the taken actions and their TD targets, bootstrapped
        from ``bootstrap`` (the target network; an actor's copy has only the online one)."""
        with torch.no_grad():
            next_q = bootstrap(b.next_obs)
            double = self.args.double_dqn
            next_q_online = self.q(b.next_obs) if double and bootstrap is not self.q else next_q
            y = dqn_targets(b.reward, b.discount, next_q_online, next_q, double)
        q = self.q(b.obs).gather(1, b.action.unsqueeze(1)).squeeze(1)
        return q, y

    def update(self, batch: Transitions) -> dict[str, Any]:
        """One gradient step on the TD loss, then the target-network update.

        With importance-sampling weights (``batch.weight``, a prioritized sample) the loss is the
        mean of the weighted per-sample losses (each weight applied once); for a prioritized
        sample (``batch.index`` set) the metrics include ``td_error``, the per-sample
        ``|y - Q(s, a)|`` (float32 numpy), for the buffer's priority update.
        """
        metrics = self.update_tensors(TensorBatch.of(batch, self.device, discrete=True))
        td_error = metrics.pop("td_error")
        if batch.index is not None:  # a numpy copy waits for the GPU: only when the buffer needs it
            metrics["td_error"] = td_error.cpu().numpy().astype(np.float32)
        return metrics

    def update_tensors(self, batch: TensorBatch) -> dict[str, Any]:
        """:meth:`update` on a batch already on the device; ``td_error`` stays a device tensor."""
        q, loss, td_error = self._loss(batch)
        optimizer = self.optimizers["q"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # after clipping the gradients' norm to max_grad_norm
        self.opt_steps += 1

        if self.args.tau is not None:  # theta' <- tau * theta + (1 - tau) * theta'
            polyak_update(self.q, self.q_target, self.args.tau)
        elif self.opt_steps % self.args.target_update_interval == 0:  # theta' <- theta
            self.q_target.load_state_dict(self.q.state_dict())
        return {
            "train/loss": loss.detach(),
            "train/q_mean": q.detach().mean(),
            "td_error": td_error,
        }

    def _td_loss(self, b: TensorBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(Q(s, a), L, |y - Q(s, a)|)``: the update's pure tensor part (what ``compile``
        compiles)."""
        q, y = self._q_and_target(b, self.q_target)  # y = R + d * Q_target(s', a*)
        loss_fn = F.smooth_l1_loss if self.args.loss == "huber" else F.mse_loss
        loss = b.weighted_mean(loss_fn(q, y, reduction="none"))  # mean_i w_i * L(Q - y)
        return q, loss, (y - q.detach()).abs()

    def td_error(self, batch: Transitions) -> np.ndarray:
        """Per-sample ``|y - Q(s, a)|`` with the online network for the bootstrap too (an actor's
        copy has no target network): initial priorities for prioritized replay (Ape-X). No
        gradient, no state change."""
        with torch.no_grad():
            q, y = self._q_and_target(TensorBatch.of(batch, self.device, discrete=True), self.q)
        return (y - q).abs().cpu().numpy().astype(np.float32)
