"""Config groups: every option instantiates, every key is a real parameter, bad input is one line."""

from __future__ import annotations

import inspect

import pytest
import yaml

from border_py.cli.train import check_overrides
from border_py.config import OVERLAYS, build, config_dir, group_options, resolve_target
from border_py.envs.factory import GymEnvFactory
from border_py.errors import ConfigError

from .conftest import make_config

AGENT_ENV = {"sac": "Pendulum-v1"}  # agents that need another action space than CartPole's
RUNTIME = {  # keyword arguments the trainers pass at build time, per group
    "agent": lambda option: (
        dict(
            zip(
                ("observation_space", "action_space"),
                GymEnvFactory(AGENT_ENV.get(option, "CartPole-v1")).spaces(),
                strict=True,
            )
        )
        | {"device": "cpu", "seed": 0}
    ),
}
FILL = {("env", "gym"): {"id": "CartPole-v1"}, ("replay_buffer", "uniform"): {"seed": 1}}


def options():
    for group_dir in sorted(p for p in config_dir().iterdir() if p.is_dir()):
        if group_dir.name in (*OVERLAYS, "tune"):  # tune/: border tune's search spaces
            continue
        for yml in sorted(group_dir.glob("*.yaml")):
            yield group_dir.name, yml.stem


@pytest.mark.parametrize(("group", "option"), list(options()))
def test_every_key_is_a_parameter_and_every_option_instantiates(group, option):
    spec = yaml.safe_load((config_dir() / group / f"{option}.yaml").read_text())
    if "_target_" not in spec:  # an option made of others (recorder=both): they are tested
        assert set(spec) == {"defaults"}
        return
    target = resolve_target(spec["_target_"])
    params = inspect.signature(target).parameters
    for key in spec:
        assert key.startswith("_") or key in params, (
            f"{group}/{option}.yaml: {key} is not a parameter"
        )
    spec |= FILL.get((group, option), {})
    runtime = RUNTIME.get(group, lambda _: {})(option)
    assert build(group, spec, **runtime) is not None


@pytest.mark.parametrize(("group", "option"), [(g, o) for g in OVERLAYS for o in group_options(g)])
def test_every_overlay_composes_and_validates(group, option):
    if option == "sac_halfcheetah":
        pytest.importorskip("mujoco", reason="the [mujoco] extra (mujoco) is not installed")
    check_overrides([f"{group}={option}"])  # composes, builds every component, cross-checks


def test_the_composed_default_config_has_every_group(tmp_path):
    cfg = make_config(tmp_path)
    assert cfg.agent._target_.endswith("DQN") and cfg.env.id == "CartPole-v1"
    assert cfg.trainer._target_.endswith("AsyncTrainer")
    assert cfg.seed == 0 and cfg.device == "cpu"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["env=gym", "env.id=CartPol-v1"],
            "env.id='CartPol-v1': not a registered gymnasium id (did you mean 'CartPole-v1'",
        ),
        (["env=gym", "env.id=no_such_module:Foo-v0"], "env.id='no_such_module:Foo-v0'"),
        (["env=gym"], "env.id must be set"),
        (["agent.lr=-1"], "agent.lr=-1: must be a positive float"),
        (["agent.lr=0"], "agent.lr=0: must be a positive float"),
        (["agent.batch_size=-5"], "agent.batch_size=-5: must be a positive int"),
        (["trainer.max_opts=0"], "trainer.max_opts=0: must be a positive int"),
        (["trainer.max_opts=-3"], "trainer.max_opts=-3: must be a positive int"),
        (
            ["replay_buffer.capacity=32", "agent.batch_size=64"],
            "agent.batch_size=64: must be <= replay_buffer.capacity=32",
        ),
        (
            ["trainer.warmup_period=200000"],
            "trainer.warmup_period=200000: must be <= replay_buffer.capacity=100000",
        ),
        (["trainer.eval_interval=0"], "trainer.eval_interval=0: must be a positive int"),
        (["trainer.eval_interval=-1"], "trainer.eval_interval=-1: must be a positive int"),
        (
            ["agent=dqnn"],
            "agent=dqnn: unknown option of config group 'agent' (did you mean 'dqn'?); choose from: dqn",
        ),
        (["-m", "env=cartpole,pong"], None),  # not an override list: parsed below
        (["agent.lrr=1"], "agent.lrr: unknown key 'lrr' in agent (did you mean 'lr'?)"),
        (["agent.loss=l1"], "agent.loss='l1': must be 'huber' or 'mse'"),
        (["device=cuda"], "device='cuda': CUDA is not available"),
        (["seed=abc"], "seed='abc': must be a non-negative int"),
        (["seed=-1"], "seed=-1: must be a non-negative int"),
        (["device=gpu"], "device='gpu': must be cpu, cuda or cuda:<index>"),
        (["+env.kwargs.foo=1"], "env: cannot make 'CartPole-v1'"),
        (["env=gym", "env.id=123"], "env.id=123: must be a gymnasium id string"),
        (["trainer.target_return=abc"], "trainer.target_return='abc': must be null or a number"),
        (
            ["trainer.save_replay_buffer=abc"],
            "trainer.save_replay_buffer='abc': must be true or false",
        ),
        (["objective=top"], "objective='top': must be one of best, final, mean"),
        (["agent.double_dqn=maybe"], "agent.double_dqn='maybe': must be true or false"),
        (["agent.hidden_sizes=5"], "agent.hidden_sizes=5: must be a list of positive ints"),
        (["agent.hidden_sizes=[a]"], "agent.hidden_sizes=['a']: must be a list of positive ints"),
        (["replay_buffer.seed=-1"], "replay_buffer.seed=-1: must be a non-negative int"),
        (["env.kwargs=abc"], "env.kwargs='abc': must be a mapping (or null)"),
        (["progress=maybe"], "progress='maybe': must be true or false"),
        (["progress_interval=0"], "progress_interval=0: must be a positive float"),
        (
            ["recorder=mlfow"],
            "recorder=mlfow: unknown option of config group 'recorder' (did you mean 'mlflow'?)",
        ),
        (
            ["recorder.tensorboard.flush_secs=0"],
            "recorder.tensorboard.flush_secs=0: must be a positive int",
        ),
        (
            ["recorder.tensorboard.flush_sec=5"],
            "recorder.tensorboard.flush_sec: unknown key 'flush_sec' in recorder.tensorboard (did"
            " you mean 'flush_secs'?)",
        ),
        (
            ["recorder=mlflow", "recorder.mlflow.experiment_name="],
            "recorder.mlflow.experiment_name='': must be a non-empty string",
        ),
        (["-m", "agent.lr=1e-3,-1"], "agent.lr=-1: must be a positive float"),  # every sweep value
        (
            ["-m", "trainer=serial,async", "trainer.replay_ratio=null", "trainer.opt_interval=2"],
            "with trainer=async: Could not override 'trainer.opt_interval'",
        ),
        (
            ["-m", "seed=0,1", "trainer.warmup_period=100,500000"],
            "trainer.warmup_period=500000: must be <= replay_buffer.capacity=100000",
        ),
        (["experiment=sac_pendulm"], "experiment=sac_pendulm: unknown option of config group"),
        (
            ["recorder=both", "recorder.tensorboard.flush_secs=0"],
            "recorder.tensorboard.flush_secs=0: must be a positive int",
        ),
        (
            ["recorder=mlflow", "recorder.mlflow.tracking_uri=5"],
            "recorder.mlflow.tracking_uri=5: must be null or a tracking URI string",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_key(overrides, expected):
    if expected is None:
        overrides, expected = (
            ["env=cartpole,pong"],
            "env=pong: unknown option of config group 'env'",
        )
    overrides = [o for o in overrides if o != "-m"]  # the CLI strips Hydra's flags
    with pytest.raises(ConfigError) as err:
        check_overrides(overrides)
    message = str(err.value)
    assert expected in message
    assert "\n" not in message
