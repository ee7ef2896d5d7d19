"""Components whose constructor raises an exception without a message (``ValueError()``)."""

from __future__ import annotations

from typing import Any


class BareValueError:
    """An agent that refuses every setting with a bare ``ValueError()``."""

    def __init__(self, **kwargs: Any) -> None:
        raise ValueError()
