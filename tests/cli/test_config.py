"""Config groups: every option instantiates, every key is a real parameter, bad input is one line."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException

from border_py.agents.dqn import DQN
from border_py.cli.checks import check_overrides
from border_py.cli.errors import hydra_error_line
from border_py.config import OVERLAYS, build, config_dir, group_options, resolve_target
from border_py.envs.factory import GymEnvFactory
from border_py.errors import ConfigError
from border_py.shipped import option_keys
from border_py.trainers.train import prepare

from ..conftest import make_config

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
        for option in group_options(group_dir.name):  # each base with the options composing it
            yield group_dir.name, option


@pytest.mark.parametrize(("group", "option"), list(options()))
def test_every_key_is_a_parameter_and_every_option_instantiates(group, option):
    if group == "recorder":  # its options sit under names of their own: read as written
        spec = yaml.safe_load((config_dir() / group / f"{option}.yaml").read_text())
    else:  # as Hydra composes it: its base's keys, then its own
        spec = option_keys(group, option)
    if "_target_" not in spec:  # an option made of others (recorder=both): they are tested
        assert set(spec) == {"defaults"}
        return
    if spec["_target_"] == "???":  # agent=custom: the user names the class, nothing is inherited
        assert list(spec) == ["_target_"]
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
    if "lunarlander" in option:
        pytest.importorskip("Box2D", reason="the [box2d] extra (Box2D) is not installed")
    check_overrides([f"{group}={option}"])  # composes, builds every component, cross-checks


def test_the_composed_default_config_has_every_group(tmp_path):
    cfg = make_config(tmp_path)
    assert cfg.agent._target_.endswith("DQN") and cfg.env.id == "CartPole-v1"
    assert cfg.trainer._target_.endswith("AsyncSettings")
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
        (
            ["trainer.max_env_steps=500", "trainer.warmup_period=600"],
            "trainer.warmup_period=600: must be below trainer.max_env_steps=500, the run's budget"
            " in env steps: no opt step would run (lower trainer.warmup_period or raise"
            " trainer.max_env_steps)",
        ),
        (
            ["trainer=serial", "trainer.max_env_steps=500", "trainer.warmup_period=500"],
            "trainer.warmup_period=500: must be below trainer.max_env_steps=500",
        ),
        (["trainer.eval_interval=0"], "trainer.eval_interval=0: must be a positive int"),
        (["trainer.eval_interval=-1"], "trainer.eval_interval=-1: must be a positive int"),
        (
            ["agent=dqnn"],
            "agent=dqnn: unknown option of config group 'agent' (did you mean 'dqn'?); choose from: custom, dqn",
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


def test_the_suggestion_for_an_unknown_id_of_a_module_keeps_its_prefix_and_works():
    with pytest.raises(ConfigError) as err:
        check_overrides(["env=gym", "env.id=tests.crash_env:CrashAftr-v0"])
    message = str(err.value)  # a second suggestion may come from ids other tests registered
    assert message.startswith(
        "env.id='tests.crash_env:CrashAftr-v0': not a registered gymnasium id (did you mean"
        " 'tests.crash_env:CrashAfter-v0'"
    )
    suggested = message.split("did you mean ", 1)[1].rstrip("?)").split(" or ")
    assert all(s.startswith("'tests.crash_env:") for s in suggested), message
    check_overrides(["env=gym", "env.id=tests.crash_env:CrashAfter-v0"])  # what it suggested


@pytest.mark.parametrize("trainer", ["serial", "async"])
def test_a_warmup_below_the_env_step_budget_or_with_an_opt_step_budget_only_is_taken(trainer):
    budget = [f"trainer={trainer}", "trainer.max_env_steps=500"]
    check_overrides([*budget, "trainer.warmup_period=499"])
    check_overrides([f"trainer={trainer}", "trainer.max_opts=10", "trainer.warmup_period=5000"])


# -- your own agent: agent=custom, _target_ overrides, user configs on the search path ----------


class PlainAgent:
    """A user's class written from scratch: its signature is what the key checks look at; its
    methods exist (validation builds it) but never run here."""

    gamma, n_step = 0.99, 1

    def __init__(
        self,
        observation_space,
        action_space,
        device,
        seed,
        hidden: int = 32,
        lr: float = 1e-3,
        batch_size: int = 16,
    ) -> None:
        self.kwargs = {"hidden": hidden, "lr": lr, "batch_size": batch_size}
        self.batch_size = batch_size

    def act(self, obs, explore):
        raise NotImplementedError

    def update(self, batch):
        raise NotImplementedError

    def policy_state(self):
        raise NotImplementedError

    def load_policy_state(self, state):
        raise NotImplementedError

    def exploration_stats(self):
        raise NotImplementedError

    def state_dict(self):
        raise NotImplementedError

    def load_state_dict(self, state):
        raise NotImplementedError


class AnyKeyAgent:
    def __init__(self, observation_space, action_space, device, seed, **kwargs) -> None:
        self.kwargs = kwargs


class RuntimeOnlyAgent:
    def __init__(self, observation_space, action_space, device, seed) -> None:
        pass


class TunedDQN(DQN):
    """A subclass of DQN: it takes DQN's keys."""


def error_of(overrides, **kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        check_overrides(overrides, **kwargs)
    message = str(err.value)
    assert "\n" not in message
    return message


DQN_KEYS = [
    k for k in yaml.safe_load((config_dir() / "agent" / "dqn.yaml").read_text()) if k[0] != "_"
]


def test_a_target_override_refuses_to_hand_another_agents_keys_to_a_new_class():
    message = error_of(["agent._target_=tests.cli.test_config.PlainAgent"])
    assert message.startswith(
        "agent._target_=tests.cli.test_config.PlainAgent: it would receive the keys of agent=dqn,"
        " meant for border_py.agents.dqn.DQN: hidden_sizes, network,"
    )
    assert all(key in message for key in DQN_KEYS)  # all of them, lr and batch_size included
    assert "start from agent=custom instead (agent=custom" in message


def test_keys_set_or_removed_on_the_command_line_are_not_inherited():
    kept = [k for k in DQN_KEYS if k not in ("lr", "hidden_sizes")]
    message = error_of(
        ["agent._target_=tests.cli.test_config.PlainAgent", "agent.lr=0.01", "~agent.hidden_sizes"]
    )
    assert message.endswith(
        f"{', '.join(kept)}; start from agent=custom instead (agent=custom"
        " agent._target_=tests.cli.test_config.PlainAgent +agent.<key>=<value>"
        " ...), or set or remove (~agent.<key>) each"
    )


def test_a_subclass_of_the_options_class_keeps_its_keys():
    check_overrides(["agent._target_=tests.cli.test_config.TunedDQN", "trainer=serial"])


def test_agent_custom_takes_only_the_keys_given():
    overrides = [
        "agent=custom",
        "agent._target_=tests.cli.test_config.PlainAgent",
        "+agent.hidden=8",
        "trainer=serial",
    ]
    assert check_overrides(overrides) == overrides
    cfg = make_config(Path("unused"), *overrides)
    assert dict(cfg.agent) == {"_target_": "tests.cli.test_config.PlainAgent", "hidden": 8}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["agent.hidden=64"],
            "agent.hidden: not in the agent config, but tests.cli.test_config.PlainAgent takes it:"
            " add it with +agent.hidden=64",
        ),
        (
            ["agent.hiden=64"],
            "agent.hiden: unknown key 'hiden' in agent (did you mean 'hidden'?);"
            " tests.cli.test_config.PlainAgent takes: hidden, lr, batch_size",
        ),
        (
            ["+agent.hiden=64"],
            "agent.hiden is not a parameter of tests.cli.test_config.PlainAgent (did you mean"
            " 'hidden'?); tests.cli.test_config.PlainAgent takes: hidden, lr, batch_size",
        ),
        (
            ["+agent.hiden=64", "+agent.lrr=1"],
            "agent: hiden, lrr are not parameters of tests.cli.test_config.PlainAgent (remove them:"
            " ~agent.hiden ~agent.lrr); tests.cli.test_config.PlainAgent takes: hidden, lr, batch_size",
        ),
        (["+agent.seed=3"], "agent.seed: border passes seed itself; remove it (~agent.seed)"),
    ],
)
def test_keys_of_a_custom_agent_are_checked_against_its_class(overrides, expected):
    target = ["agent=custom", "agent._target_=tests.cli.test_config.PlainAgent", "trainer=serial"]
    assert error_of([*target, *overrides]) == expected


def test_valid_keys_are_never_an_empty_list():
    custom = ["agent=custom", "trainer=serial"]
    assert error_of(
        [*custom, "agent._target_=tests.cli.test_config.RuntimeOnlyAgent", "agent.x=1"]
    ) == (
        "agent.x: unknown key 'x' in agent; tests.cli.test_config.RuntimeOnlyAgent takes no keys"
        " besides observation_space, action_space, device, seed, which border passes"
    )
    assert error_of([*custom, "agent._target_=tests.cli.test_config.AnyKeyAgent", "agent.x=1"]) == (
        "agent.x: not in the agent config, but tests.cli.test_config.AnyKeyAgent takes it: add it"
        " with +agent.x=1"
    )
    assert error_of(["env.kwargs.render_fps=30"]) == (
        "env.kwargs.render_fps: env.kwargs is empty; to add a key use +env.kwargs.render_fps=30"
    )
    assert error_of(["agent.hidden_sizes.x=1"]) == (
        "agent.hidden_sizes.x: agent.hidden_sizes is a list of 2 items (indexes 0..1)"
    )


def test_agent_custom_without_a_target_says_what_to_set():
    assert "agent._target_ must be set" in error_of(["agent=custom"])


def test_a_null_key_can_be_deleted():
    """Hydra 1.3 reads a null value as a missing key (facebookresearch/hydra#2829)."""
    checked = check_overrides(["~agent.tau", "trainer=serial"])
    assert checked == ["agent.tau=0", "~agent.tau", "trainer=serial"]
    assert "tau" not in make_config(Path("unused"), *checked).agent
    assert error_of(["~agent.tauu"]) == "~agent.tauu: agent has no key 'tauu' (did you mean 'tau'?)"


def test_hydras_hints_that_say_what_to_type_are_kept():
    assert error_of(["+agent.lr=3"]) == (
        "Could not append to config. An item is already at 'agent.lr' (either remove + prefix:"
        " 'agent.lr=3'; or add a second + to add or override 'agent.lr': '++agent.lr=3')"
    )
    assert error_of(
        ["trainer=serial,async", "trainer.replay_ratio=null", "trainer.opt_interval=2"]
    ) == (
        "with trainer=async: Could not override 'trainer.opt_interval' (to append to your config"
        " use +trainer.opt_interval=2)"
    )


def test_integral_floats_are_accepted_for_counts(tmp_path):
    overrides = ["trainer=serial", "trainer.max_opts=1e4", "agent.hidden_sizes=[3.2e1]"]
    check_overrides(overrides)
    plan = prepare(make_config(tmp_path, *overrides))
    assert plan.trainer.settings.max_opts == 10000 and type(plan.trainer.settings.max_opts) is int
    assert error_of(["trainer.max_opts=1.5"]) == "trainer.max_opts=1.5: must be a positive int"


def test_build_coerces_by_the_targets_annotations():
    spec = {"_target_": "border_py.replay.uniform.UniformReplayBuffer", "capacity": 1e3}
    buffer = build("replay_buffer", spec | {"seed": 2.0, "frame_stack": None})
    assert buffer.capacity == 1000 and type(buffer.capacity) is int
    agent = build(
        "agent",
        {"_target_": "tests.cli.test_config.PlainAgent", "hidden": 64.0, "lr": 1.0},
        observation_space=None,
        action_space=None,
        device="cpu",
        seed=0,
    )
    assert agent.kwargs == {"hidden": 64, "lr": 1.0, "batch_size": 16}
    assert type(agent.kwargs["hidden"]) is int and type(agent.kwargs["lr"]) is float


def user_configs(root: Path, agent_yaml: str) -> Path:
    (root / "agent").mkdir(parents=True)
    (root / "agent" / "plain.yaml").write_text(agent_yaml)
    return root


@pytest.mark.parametrize("how", ["searchpath", "config_dir"])
def test_user_configs_are_validated_like_shipped_ones(tmp_path, how):
    conf = user_configs(
        tmp_path / "conf", "_target_: tests.cli.test_config.PlainAgent\nhidden: 8\nhiden: 3\n"
    )
    extra = {"config_dir": str(conf)} if how == "config_dir" else {}
    search = [f"hydra.searchpath=[file://{conf}]"] if how == "searchpath" else []
    assert error_of([*search, "agent=plainn"], **extra) == (
        "agent=plainn: unknown option of config group 'agent' (did you mean 'plain'?);"
        " choose from: custom, dqn, iqn, plain, r2d2, sac"
    )
    assert error_of([*search, "agent=plain", "trainer=serial"], **extra) == (
        "agent.hiden is not a parameter of tests.cli.test_config.PlainAgent (did you mean 'hidden'?);"
        " tests.cli.test_config.PlainAgent takes: hidden, lr, batch_size"
    )
    (conf / "agent" / "plain.yaml").write_text(
        "_target_: tests.cli.test_config.PlainAgent\nhidden: 8\n"
    )
    check_overrides([*search, "agent=plain", "trainer=serial"], **extra)


def test_unusable_search_paths_fail_in_one_line(tmp_path):
    assert error_of(["hydra.searchpath=[pkg://no_such_pkg.conf]"]) == (
        "hydra.searchpath: pkg://no_such_pkg.conf is not an importable package with an"
        " __init__.py (install it, or put its parent dir on PYTHONPATH)"
    )
    assert error_of([f"hydra.searchpath=[file://{tmp_path}/nope]"]) == (
        f"hydra.searchpath: file://{tmp_path}/nope is not a directory"
    )
    assert error_of([], config_dir=str(tmp_path / "nope")) == (
        f"--config-dir {tmp_path / 'nope'}: not a directory"
    )


def test_without_build_only_the_composition_is_checked():
    broken_env = ["+env.kwargs.no_such_kwarg=1"]  # CartPole refuses it when the env is made
    check_overrides(broken_env, build=False)
    assert error_of(broken_env).startswith("env: cannot make 'CartPole-v1'")
    assert error_of(["agent.lrr=1"], build=False).startswith("agent.lrr: unknown key 'lrr'")


def test_hydras_list_of_options_is_folded_into_the_line():
    with (
        initialize_config_dir(version_base="1.3", config_dir=str(config_dir())),
        pytest.raises(HydraException) as err,
    ):
        compose("train", overrides=["hydra/sweeper=nope"])
    assert hydra_error_line(err.value) == (
        "In 'hydra/config': Could not find 'hydra/sweeper/nope' (available options in"
        " 'hydra/sweeper': basic)"
    )


def test_a_target_that_cannot_be_imported_is_named():
    assert error_of(["agent._target_=tests.cli.test_config.Nope"]) == (
        "agent._target_=tests.cli.test_config.Nope: cannot be imported (module 'tests.cli.test_config'"
        " has no attribute 'Nope')"
    )
    assert error_of(["agent=custom", "agent._target_=no_such_pkg.Agent", "trainer=serial"]) == (
        "agent._target_=no_such_pkg.Agent: cannot be imported (No module named 'no_such_pkg')"
    )
