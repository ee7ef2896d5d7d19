"""Your own agent through the ``border`` command: an agent written from scratch (no border_py
import) in a temporary package, trained with ``agent=custom`` and with a YAML of its own on
Hydra's search path, serial and async, then resumed and evaluated. The agent records the keyword
arguments it gets in every process that builds it (learner, actors, evaluator, ``border eval``):
no key of another agent may reach it."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from ..conftest import FEW_FRESH_EVALS, run_border, run_borders, selected_cases, two_at_a_time

AGENT = '''
"""LinearQ: a linear Q-function learned by semi-gradient TD, epsilon-greedy."""

import json
import os
import uuid

import numpy as np
import torch


class LinearQ:
    def __init__(self, observation_space, action_space, device, seed, **hyper):
        record = os.environ.get("LINEAR_Q_RECORD")
        if record:  # every process that builds the agent leaves the keys it was given
            with open(os.path.join(record, f"{os.getpid()}-{uuid.uuid4().hex}.json"), "w") as f:
                json.dump(hyper, f)
        self.lr = float(hyper.get("lr", 0.01))
        self.gamma = float(hyper.get("gamma", 0.9))
        self.n_step = int(hyper.get("n_step", 1))
        self.batch_size = int(hyper.get("batch_size", 32))
        self.epsilon = float(hyper.get("epsilon", 0.2))
        self.n_actions = int(action_space.n)
        self.weight = torch.zeros(self.n_actions, observation_space.shape[0])
        self.bias = torch.zeros(self.n_actions)
        self.rng = np.random.default_rng(seed)
        self.updates = 0

    def q(self, obs):
        return torch.as_tensor(obs, dtype=torch.float32) @ self.weight.T + self.bias

    def act(self, obs, explore):
        actions = self.q(obs).argmax(dim=1).numpy().astype(np.int64)
        if explore:
            random = self.rng.random(len(actions)) < self.epsilon
            actions[random] = self.rng.integers(0, self.n_actions, int(random.sum()))
        return actions

    def update(self, batch):
        obs = torch.as_tensor(batch.obs, dtype=torch.float32)
        action = torch.as_tensor(batch.action, dtype=torch.int64)
        reward, discount = torch.as_tensor(batch.reward), torch.as_tensor(batch.discount)
        target = reward + discount * self.q(batch.next_obs).max(dim=1).values
        error = target - self.q(obs).gather(1, action[:, None]).squeeze(1)
        for a in range(self.n_actions):
            rows = action == a
            if rows.any():
                self.weight[a] += self.lr * (error[rows, None] * obs[rows]).mean(0)
                self.bias[a] += self.lr * error[rows].mean()
        self.updates += 1
        return {"train/abs_td_error": float(error.abs().mean())}

    def exploration_stats(self):
        return {"train/epsilon": self.epsilon}

    def policy_state(self):
        return {"weight": self.weight.clone(), "bias": self.bias.clone()}

    def load_policy_state(self, state):
        self.weight, self.bias = state["weight"].clone(), state["bias"].clone()

    def state_dict(self):
        return {"policy": self.policy_state(), "updates": self.updates,
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        self.load_policy_state(state["policy"])
        self.updates = int(state["updates"])
        self.rng.bit_generator.state = state["rng"]


class BadActions(LinearQ):
    """LinearQ whose act breaks the protocol as its ``breaks`` key says."""

    def __init__(self, observation_space, action_space, device, seed, breaks="dtype", **hyper):
        super().__init__(observation_space, action_space, device, seed, **hyper)
        self.breaks = breaks

    def act(self, obs, explore):
        actions = super().act(obs, explore)
        if self.breaks == "dtype":
            return actions.astype(np.float64)
        return np.full_like(actions, self.n_actions)  # one past the last action
'''

YAML = """\
_target_: my_agents.LinearQ
lr: 0.002
batch_size: 16
"""

BUDGET = [
    "trainer.max_opts=120",
    "trainer.warmup_period=64",
    "trainer.eval_interval=60",
    "trainer.eval_episodes=2",
    "trainer.eval_max_steps=100",
    "trainer.record_interval=30",
    "trainer.save_interval=60",
    FEW_FRESH_EVALS,
    "progress=false",
]
TRAINERS = {
    "serial": ["trainer=serial"],
    "async": ["trainer=async", "actor_manager.n_actors=1", "actor_manager.n_buffer=16"],
}
WAYS = {  # how the agent is chosen, the keys it must get (and nothing else), a resume's change
    "agent=custom": (
        [
            "agent=custom",
            "agent._target_=my_agents.LinearQ",
            "+agent.lr=0.001",
            "+agent.epsilon=0.3",
        ],
        {"lr": 0.001, "epsilon": 0.3},
        {"epsilon": 0.1},  # a key DQN does not have: checked against the saved config
    ),
    "searchpath": (
        ["hydra.searchpath=[pkg://my_agents.conf]", "agent=linear_q"],
        {"lr": 0.002, "batch_size": 16},
        {"lr": 0.003},
    ),
}


def user_package(root: Path) -> Path:
    """``my_agents`` (the agent and its config group option) under ``root``; returns ``root``."""
    package = root / "my_agents"
    (package / "conf" / "agent").mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(AGENT))
    (package / "conf" / "__init__.py").write_text("")
    (package / "conf" / "agent" / "linear_q.yaml").write_text(YAML)
    return root


def on_path(folder: Path) -> str:
    """``PYTHONPATH`` for ``border``: ``folder``, then what the tests run with (a checkout's own
    ``src``, if it is there)."""
    return os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH", "")]))


def records(folder: Path) -> list[dict]:
    """The keyword arguments of every agent built since the last call (the records are removed)."""
    found = []
    for path in sorted(folder.glob("*.json")):
        found.append(json.loads(path.read_text()))
        path.unlink()
    return found


@pytest.fixture(scope="module")
def written_from_scratch(request, tmp_path_factory) -> dict[tuple[str, str], Exception | None]:
    """:func:`train_resume_eval` of every selected (way, trainer), two at a time: what each
    raised."""
    test = "test_an_agent_written_from_scratch_trains_resumes_and_evaluates"
    cases = [(case["way"], case["trainer"]) for case in selected_cases(request, test)]
    errors = two_at_a_time(
        lambda case: train_resume_eval(tmp_path_factory.mktemp("from_scratch"), *case), cases
    )
    return dict(zip(cases, errors, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(TRAINERS))
@pytest.mark.parametrize("way", list(WAYS))
def test_an_agent_written_from_scratch_trains_resumes_and_evaluates(
    written_from_scratch, way, trainer
):
    if (error := written_from_scratch[(way, trainer)]) is not None:
        raise error


def train_resume_eval(tmp_path: Path, way: str, trainer: str) -> None:
    """Train the user's agent chosen ``way`` in ``trainer``, resume it with a changed key, and
    evaluate it, in ``tmp_path``: each process builds it with exactly the keys it was given."""
    record = tmp_path / "records"
    record.mkdir()
    env = {"PYTHONPATH": on_path(user_package(tmp_path / "src")), "LINEAR_Q_RECORD": str(record)}
    choose, expected, change = WAYS[way]
    run_dir = tmp_path / "run"
    out = run_border(
        ["train", *choose, *TRAINERS[trainer], *BUDGET, f"hydra.run.dir={run_dir}"],
        tmp_path,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "completed" and result["summary"]["opt_steps"] == 120
    if trainer == "async":  # learner (checks and run), the actor and the evaluator process
        assert len({p.name.split("-")[0] for p in record.glob("*.json")}) >= 3
    built = records(record)
    assert built and all(kwargs == expected for kwargs in built), built  # no DQN key, ever

    changes = [f"agent.{key}={value}" for key, value in change.items()]
    out = run_border(
        ["train", f"resume={run_dir}", "trainer.max_opts=180", *changes, "trust=[my_agents]"],
        tmp_path,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "completed" and result["summary"]["opt_steps"] == 180
    built = records(record)
    assert built and all(kwargs == expected | change for kwargs in built), built

    out = run_border(
        ["eval", str(run_dir), "eval.n_episodes=3", "trust=[my_agents]"], tmp_path, env=env
    )
    assert out.returncode == 0, out.stderr
    (written,) = (run_dir / "checkpoints" / "best").glob("eval_*.json")
    assert len(json.loads(written.read_text())["episode_returns"]) == 3
    saved = json.loads((run_dir / "checkpoints" / "best" / "config.json").read_text())["agent"]
    evaluated = {k: v for k, v in saved.items() if k != "_target_"}  # the best one's settings
    assert evaluated in (expected, expected | change)
    assert records(record) == [evaluated]


@pytest.mark.slow
def test_a_target_override_of_dqn_fails_in_one_line_and_writes_nothing(tmp_path):
    env = {"PYTHONPATH": on_path(user_package(tmp_path / "src"))}
    out = run_border(["train", "agent._target_=my_agents.LinearQ"], tmp_path, env=env)
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(
        "border: error: agent._target_=my_agents.LinearQ: it would receive the keys of agent=dqn"
    )
    assert (
        "lr, adam_eps, gamma, n_step, batch_size" in line
        and "start from agent=custom instead" in line
    )
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_a_config_dir_is_validated_like_the_shipped_configs(tmp_path):
    conf = user_package(tmp_path / "src") / "my_agents" / "conf"
    env = {"PYTHONPATH": on_path(tmp_path / "src")}
    given = ["train", "--config-dir", str(conf)]
    out, shown = run_borders(
        [[*given, "agent=linear_qq"], [*given, "agent=linear_q", "--cfg", "job"]], tmp_path, env=env
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "border: error: agent=linear_qq: unknown option of config group 'agent' (did you mean"
        " 'linear_q'?); choose from: custom, dqn, iqn, linear_q, r2d2, sac"
    ]
    assert shown.returncode == 0 and "_target_: my_agents.LinearQ" in shown.stdout, shown.stderr


BROKEN = {  # how act breaks, the line that says so (the agent's class, what it returned, expected)
    "dtype": "returned shape (1,) dtype float64",
    "range": "returned action 2 (row 0) outside Discrete(2)",
}


@pytest.fixture(scope="module")
def broken_acts(request, tmp_path_factory) -> dict[tuple[str, str], Exception | None]:
    """:func:`train_a_broken_act` of every selected (trainer, breaks), two at a time: what each
    raised."""
    test = "test_an_act_that_breaks_the_protocol_fails_in_one_line_naming_the_agent"
    cases = [(case["trainer"], case["breaks"]) for case in selected_cases(request, test)]
    errors = two_at_a_time(
        lambda case: train_a_broken_act(tmp_path_factory.mktemp("broken"), *case), cases
    )
    return dict(zip(cases, errors, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(TRAINERS))
@pytest.mark.parametrize("breaks", list(BROKEN))
def test_an_act_that_breaks_the_protocol_fails_in_one_line_naming_the_agent(
    broken_acts, trainer, breaks
):
    if (error := broken_acts[(trainer, breaks)]) is not None:
        raise error


def train_a_broken_act(tmp_path: Path, trainer: str, breaks: str) -> None:
    """Train an agent whose act ``breaks`` the protocol in ``trainer``, in ``tmp_path``: the run
    fails in one line that names the agent and what it returned."""
    env = {"PYTHONPATH": on_path(user_package(tmp_path / "src"))}
    choose = ["agent=custom", "agent._target_=my_agents.BadActions", f"+agent.breaks={breaks}"]
    run_dir = tmp_path / "run"
    out = run_border(
        ["train", *choose, *TRAINERS[trainer], *BUDGET, f"hydra.run.dir={run_dir}"],
        tmp_path,
        env=env,
    )
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    problem = (
        f"my_agents.BadActions.act {BROKEN[breaks]} for a batch of 1 observation; expected"
        " shape (1,) integer actions in Discrete(2)"
    )
    if trainer == "serial":  # the learner's own sampler found it
        assert line == f"border: error: {problem}"
    else:  # actor 0 found it and reported it as actor errors travel: its one line
        assert line == (
            "border: error: actor 0 failed (exit code 1) before delivering anything:"
            f" AgentContractError: {problem} (a restart would fail the same way); see the log (or"
            " the output above) for why"
        )
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and problem in result["error"]["message"]
