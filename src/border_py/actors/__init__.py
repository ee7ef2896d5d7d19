"""Actors: the ``actor_manager`` config group; samplers that turn a policy and envs into transitions, run in processes."""

__all__: list[str] = []
