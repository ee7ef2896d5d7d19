"""``border tune``'s shipped search space for R2D2 (conf/tune/r2d2_popgym_repeatpreviouseasy.yaml)
loads and composes a valid trial config around the recipe (``border tune`` checks every corner
itself before its first trial)."""

from __future__ import annotations

from border_py.trainers.train import prepare
from border_py.tuning.space import compose_train, corners, load_space, override

NAME = "r2d2_popgym_repeatpreviouseasy"


def test_the_r2d2_search_space_composes_a_trial_around_its_recipe():
    space = load_space(NAME, [])
    assert space.study_name == NAME
    assert set(space.params) >= {"agent.lr", "agent.burn_in", "agent.length", "agent.core"}
    last = [override(k, corners(spec)[-1]) for k, spec in space.params.items()]
    config = compose_train([*space.overrides, *last], [])
    prepare(config, overrides=[])  # the bad-config one-liners pass at these values
    assert config.agent._target_ == "border_py.agents.r2d2.R2D2"
    assert config.agent.core == "gru" and config.agent.length == 32 and config.agent.burn_in == 8
    assert config.env.id == "popgym-RepeatPreviousEasy-v0"
