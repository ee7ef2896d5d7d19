"""Hooks into a run: a :class:`Callback` hears the run start, each record of scalars, each
evaluation, each checkpoint written and the run's end, and may stop the run gracefully from an
evaluation (a tuner pruning a trial, early stopping of your own).

Give callbacks in the config, a top-level list of components built like any other (their
``_target_`` and keys)::

    callbacks:
      - _target_: my_pkg.callbacks.Notify
        url: https://example.org/hook

or from Python: ``train(cfg, callbacks=[Notify(url)])``. A saved run's callbacks are code it
names: resuming it imports them only when the trust rules allow (:mod:`border_py.runs.trust`).

They run in the learner's process, in order (the config's, then those given from Python), between
the learner's steps: a slow one slows training. An exception from one ends the run in one line
(:class:`CallbackError`, the exception itself its ``__cause__``), recorded as failed like any
failed run; one from :meth:`Callback.on_stop` comes after the run's outcome was recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from border_py.config import build
from border_py.errors import ConfigError, RunError, first_line

__all__ = ["Callback", "CallbackError", "Callbacks", "EvalFunction", "OnEval", "build_callbacks"]

EvalFunction = Callable[[int, int, float], bool]  # ``train(cfg, on_eval=...)``'s function


class Callback:
    """A callback: override the hooks you need (each does nothing here)."""

    def on_start(
        self, run_dir: Path, config: dict[str, Any], opt_steps: int, env_steps: int
    ) -> None:
        """The run starts training in ``run_dir`` with the resolved ``config`` (secrets redacted)
        at ``opt_steps``, ``env_steps`` (a resumed run's: its checkpoint's)."""

    def on_record(self, step: int, scalars: dict[str, float]) -> None:
        """The run recorded ``scalars`` at ``step`` (on ``trainer.log_step``'s axis): training
        scalars every ``trainer.record_interval`` opt steps, an evaluation's ``eval/`` ones."""

    def on_eval(self, opt_steps: int, env_steps: int, return_mean: float) -> bool:
        """An evaluation of the weights of ``opt_steps`` ended with ``return_mean``
        (``eval/return_mean``); return True to stop the run gracefully (its final checkpoint is
        written, the final evaluations skipped; its summary says ``stopped_by_callback``)."""
        return False

    def on_save(self, checkpoint: Path, opt_steps: int, env_steps: int) -> None:
        """A checkpoint of the weights of ``opt_steps`` is written, complete, at ``checkpoint``
        (a periodic or final one, or ``best``)."""

    def on_stop(self, summary: dict[str, Any]) -> None:
        """The run ended with ``summary`` (what :func:`~border_py.trainers.train.train` returns),
        completed or stopped by a signal, and its ``result.json`` is written. Not called when the
        run failed."""


class OnEval(Callback):
    """``train(cfg, on_eval=function)``: the function as a callback's :meth:`Callback.on_eval`."""

    def __init__(self, function: EvalFunction) -> None:
        self.function = function

    def on_eval(self, opt_steps: int, env_steps: int, return_mean: float) -> bool:
        """What the function returns."""
        return bool(self.function(opt_steps, env_steps, return_mean))


class CallbackError(RunError):
    """A callback raised: the run ends (the message names the callback and the hook)."""


def build_callbacks(specs: Any) -> list[Callback]:
    """The config's ``callbacks``: a list of component specs (None: none), each built
    (:func:`~border_py.config.build`) into a :class:`Callback`.

    Raises:
        ConfigError: one line naming ``callbacks[i]``: not a list, a bad spec, or not a Callback.
    """
    if specs is None:
        return []
    if not isinstance(specs, list):
        raise ConfigError(
            f"callbacks={specs!r}: must be a list of components, e.g."
            " [{_target_: my_pkg.MyCallback}]"
        )
    built = []
    for i, spec in enumerate(specs):
        key = f"callbacks[{i}]"
        if not isinstance(spec, dict):
            raise ConfigError(f"{key}={spec!r}: must be a component ({{_target_: ..., ...}})")
        callback = build(key, spec)
        if not isinstance(callback, Callback):
            raise ConfigError(
                f"{key}._target_={spec['_target_']}: not a callback (subclass"
                " border_py.callbacks.Callback)"
            )
        built.append(callback)
    return built


class Callbacks:
    """A run's callbacks, called in order; an exception from one becomes a
    :class:`CallbackError` (see the module docstring).

    Args:
        callbacks: the callbacks.
    """

    def __init__(self, callbacks: Sequence[Callback] = ()) -> None:
        for i, callback in enumerate(callbacks):
            if not isinstance(callback, Callback):
                raise ConfigError(
                    f"callbacks[{i}]: {type(callback).__name__} is not a callback (subclass"
                    " border_py.callbacks.Callback)"
                )
        self.callbacks = list(callbacks)

    def _each(self, hook: str, *args: Any) -> list[Any]:
        """Call ``hook`` of every callback with ``args``; return what each returned."""
        returned = []
        for i, callback in enumerate(self.callbacks):
            try:
                returned.append(getattr(callback, hook)(*args))
            except Exception as exc:
                raise CallbackError(
                    f"callbacks[{i}] ({type(callback).__name__}).{hook} raised"
                    f" {type(exc).__name__}: {first_line(exc)}"
                ) from exc
        return returned

    def on_start(
        self, run_dir: Path, config: dict[str, Any], opt_steps: int, env_steps: int
    ) -> None:
        """See :meth:`Callback.on_start`."""
        self._each("on_start", run_dir, config, opt_steps, env_steps)

    def on_record(self, step: int, scalars: dict[str, Any]) -> None:
        """See :meth:`Callback.on_record` (the scalars as floats: tensors are read here)."""
        if self.callbacks:
            self._each("on_record", step, {tag: float(value) for tag, value in scalars.items()})

    def on_eval(self, opt_steps: int, env_steps: int, return_mean: float) -> bool:
        """See :meth:`Callback.on_eval`: every callback hears it; True if any asks to stop."""
        return any(self._each("on_eval", opt_steps, env_steps, return_mean))

    def on_save(self, checkpoint: Path, opt_steps: int, env_steps: int) -> None:
        """See :meth:`Callback.on_save`."""
        self._each("on_save", checkpoint, opt_steps, env_steps)

    def on_stop(self, summary: dict[str, Any]) -> None:
        """See :meth:`Callback.on_stop`."""
        self._each("on_stop", summary)
