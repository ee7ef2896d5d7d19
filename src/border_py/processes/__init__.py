"""Process lifecycle: the learner's stop signals, its children's start and hygiene, and their
supervision (:mod:`~border_py.processes.signals`, :mod:`~border_py.processes.children`,
:mod:`~border_py.processes.supervision`)."""

__all__: list[str] = []
