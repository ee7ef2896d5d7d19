"""Experience replay: the ``replay_buffer`` config group (uniform, prioritized, frames stored once)."""

__all__: list[str] = []
