"""The agents' optimizer: Adam with optional gradient-norm clipping, and named sets of them.

:class:`Adam` makes the update of ``torch.optim.Adam(params, lr, eps=eps, fused=True)`` (torch's
fused kernel, through the functional ``torch.optim.adam.adam``), preceded when asked by the
clipping of ``torch.nn.utils.clip_grad_norm_``, and its ``state_dict`` has torch's format, so
either loads the other's (checkpoints written with ``torch.optim.Adam`` resume). It is not a
``torch.optim.Optimizer`` for two measured reasons: creating the first one imports
``torch._dynamo``, a large share of a learner's start-up, and its step's hooks and profiling
wrappers plus the generic clipping make its step markedly longer than this one's on the small
networks of CPU agents (``benchmarks/update_bench.py``; the figures:
docs/04-scaling/performance.md).

``eps`` is Adam's epsilon (``agent.adam_eps``): torch's default 1e-8. Dopamine's Atari configs
use larger ones: 1.5e-4 with lr 6.25e-5 for Rainbow and for IQN matched to Rainbow; 3.125e-4
(0.01 / batch size 32) with lr 5e-5 for IQN with the paper's settings, and with lr 2.5e-4 for C51.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.autograd.graph import increment_version
from torch.optim.adam import adam

from border_py.config import is_number

__all__ = ["Adam", "Optimizers"]

log = logging.getLogger(__name__)

CLIP_EPS = 1e-6  # added to the norm before dividing, as torch.nn.utils.clip_grad_norm_ does


class Adam:
    """Adam (Kingma & Ba, 2015) over a fixed list of parameters.

    A parameter's moments are created at its first step with a gradient (an actor that only acts
    never allocates them); parameters without a gradient are left alone, as torch's Adam does.

    Args:
        params: the parameters (all on one device).
        lr: learning rate.
        eps: added to the root of the second-moment estimate.
        betas: the moments' decay rates.
        max_grad_norm: clip the gradients' global L2 norm to this before each step (None: never).
    """

    def __init__(
        self,
        params: Sequence[torch.Tensor],
        lr: float,
        eps: float = 1e-8,
        betas: tuple[float, float] = (0.9, 0.999),
        max_grad_norm: float | None = None,
    ) -> None:
        if not params:
            raise ValueError("Adam got no parameters")
        self.params = list(params)
        self.lr, self.eps, self.betas = float(lr), float(eps), (float(betas[0]), float(betas[1]))
        self.max_grad_norm = max_grad_norm
        self.state: dict[int, dict[str, torch.Tensor]] = {}  # index -> step, exp_avg, exp_avg_sq

    def zero_grad(self) -> None:
        """Drop every parameter's gradient (the next backward writes fresh ones)."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """Clip the gradients (if ``max_grad_norm``), then one Adam step on the parameters that
        have one."""
        indices = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not indices:
            return
        grads: list[torch.Tensor] = [self.params[i].grad for i in indices]  # type: ignore[misc]
        if self.max_grad_norm is not None:  # g <- g * min(1, c / (|g|_2 + 1e-6)), |g| over all
            total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
            torch._foreach_mul_(grads, torch.clamp(self.max_grad_norm / (total + CLIP_EPS), max=1))
        states = [self._state(i) for i in indices]
        adam(
            [self.params[i] for i in indices],
            grads,
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [],
            [s["step"] for s in states],
            fused=True,
            amsgrad=False,
            beta1=self.betas[0],
            beta2=self.betas[1],
            lr=self.lr,
            weight_decay=0.0,
            eps=self.eps,
            maximize=False,
        )
        # the fused kernel writes the parameters without counting it in their version counters,
        # which in-place changes otherwise do (ConvInference tells changed weights by them)
        increment_version([self.params[i] for i in indices])

    def _state(self, index: int) -> dict[str, torch.Tensor]:
        state = self.state.get(index)
        if state is None:
            p = self.params[index]
            state = self.state[index] = {
                "step": torch.zeros((), dtype=torch.float32, device=p.device),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }
        return state

    def state_dict(self) -> dict[str, Any]:
        """The moments and hyper-parameters, in ``torch.optim.Adam``'s format (fused)."""
        group = {
            "lr": self.lr,
            "betas": self.betas,
            "eps": self.eps,
            "weight_decay": 0.0,
            "amsgrad": False,
            "maximize": False,
            "foreach": None,
            "capturable": False,
            "differentiable": False,
            "fused": True,
            "decoupled_weight_decay": False,
            "params": list(range(len(self.params))),
        }
        return {"state": dict(self.state), "param_groups": [group]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (or a ``torch.optim.Adam``'s, of one parameter group).

        Raises:
            ValueError: the saved parameters differ in number from these, their moments in shape
                (:func:`check_moments`), or the state names a parameter that its group lacks.
        """
        (group,) = state["param_groups"]
        if len(group["params"]) != len(self.params):
            raise ValueError(
                f"the saved optimizer has {len(group['params'])} parameters, this one"
                f" {len(self.params)}"
            )
        index_of = {position: index for index, position in enumerate(group["params"])}
        restored: dict[int, dict[str, torch.Tensor]] = {}
        for position, saved in state["state"].items():
            if position not in index_of:
                raise ValueError(f"state for parameter {position}, which the saved group lacks")
            index = index_of[position]
            p = self.params[index]
            check_moments(saved, p)
            restored[index] = {
                "step": torch.as_tensor(saved["step"], dtype=torch.float32).to(p.device).clone(),
                "exp_avg": saved["exp_avg"].to(p.device, p.dtype).clone(),
                "exp_avg_sq": saved["exp_avg_sq"].to(p.device, p.dtype).clone(),
            }
        self.lr, self.eps = float(group["lr"]), float(group["eps"])
        self.betas = (float(group["betas"][0]), float(group["betas"][1]))
        self.state = restored


def check_moments(saved: Mapping[str, Any], p: torch.Tensor) -> None:
    """Refuse a parameter's saved Adam state that does not fit ``p`` before anything is copied:
    its moments must be tensors of ``p``'s shape and its step one number (a saved tensor of
    another shape would be copied whole first).

    Raises:
        ValueError: naming the entry, its shape and the parameter's.
    """
    for key in ("exp_avg", "exp_avg_sq"):
        moment = saved[key]
        if not isinstance(moment, torch.Tensor):
            raise ValueError(
                f"saved optimizer {key} of type {type(moment).__name__}, not a tensor of shape"
                f" {tuple(p.shape)}"
            )
        if moment.shape != p.shape:
            raise ValueError(
                f"saved optimizer {key} of shape {tuple(moment.shape)} for a parameter of shape"
                f" {tuple(p.shape)}"
            )
    step = saved["step"]
    if isinstance(step, torch.Tensor) and step.numel() != 1:
        raise ValueError(f"saved optimizer step of shape {tuple(step.shape)}, not one number")
    if not (isinstance(step, torch.Tensor) or is_number(step)):
        raise ValueError(f"saved optimizer step of type {type(step).__name__}, not one number")


class Optimizers(dict[str, Adam]):
    """An agent's optimizers by name (e.g. ``actor``, ``critic``, ``alpha``), saved together."""

    def state_dict(self) -> dict[str, dict[str, Any]]:
        """Every optimizer's state, by name."""
        return {name: optimizer.state_dict() for name, optimizer in self.items()}

    def load_state_dict(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Restore :meth:`state_dict` (the same names), except that each optimizer keeps its own
        learning rate and epsilon: the agent's config wins over the saved ones (a resume with
        ``agent.lr=...`` trains with that lr), and a difference is logged.

        Raises:
            KeyError: the saved names differ from this agent's.
        """
        if set(state) != set(self):
            raise KeyError(f"optimizers {sorted(state)}, the agent has {sorted(self)}")
        for name, optimizer in self.items():
            configured = {"lr": optimizer.lr, "eps": optimizer.eps}
            optimizer.load_state_dict(state[name])
            for key, value in configured.items():
                saved = getattr(optimizer, key)
                if saved != value:
                    log.info("optimizer %s: %s %g -> %g (the config's)", name, key, saved, value)
                setattr(optimizer, key, value)
