"""``border push`` and ``border pull`` on a real run (trained at the tiny budget): the dry-run
folder, the fresh evaluation behind its card, the upload through a recording API and a pull
through a local copy that ``load_policy`` acts from."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from huggingface_hub import ModelCard

from border_py import train
from border_py.cli.main import main
from border_py.deploy.load import load_policy
from border_py.errors import ConfigError, RunError
from border_py.evaluation.evaluator import Evaluator
from border_py.hub.folder import PushSettings
from border_py.hub.remote import pull, push
from border_py.seeding import derive_seed

from ..conftest import TINY, make_config

pytestmark = pytest.mark.slow
REPO = "me/cartpole-tiny"
EPISODES = 7


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A tiny serial DQN run on CartPole-v1 (2 evaluations of 2 episodes, a best checkpoint)."""
    root = tmp_path_factory.mktemp("hub")
    train(make_config(root, *TINY, "trainer=serial", "progress=false"))
    return root / "run"


@pytest.fixture(scope="module")
def folder(run, tmp_path_factory) -> Path:
    """``border push <run> --dry-run <dir> --episodes 7``'s folder."""
    out = tmp_path_factory.mktemp("dry") / "card"
    argv = ["push", str(run), "--repo", REPO, "--dry-run", str(out), "--episodes", str(EPISODES)]
    assert main(argv) == 0
    return out


def test_the_dry_run_folder_holds_exactly_what_a_push_uploads(folder):
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "checkpoint/config.json",
        "checkpoint/meta.json",
        "checkpoint/policy.pt",
        "export/README.txt",
        "export/env.py",
        "export/network.json",
        "export/policy.py",
        "export/preprocessing.json",
        "export/weights.npz",
        "learning_curve.png",
        "replay.mp4",
        "results.json",
    ]  # no optimizer state, target networks or replay buffer; no temporary dir left beside
    assert [p.name for p in folder.parent.iterdir()] == ["card"]
    assert (folder / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (folder / "replay.mp4").read_bytes()[4:8] == b"ftyp"  # an MP4 container


def test_the_card_holds_the_fresh_evaluations_score(folder, run):
    results = json.loads((folder / "results.json").read_text())
    evaluation = results["evaluation"]
    returns = evaluation["episode_returns"]
    assert evaluation["n_episodes"] == len(returns) == EPISODES
    assert evaluation["mean_reward"] == pytest.approx(np.mean(returns))
    assert evaluation["std_reward"] == pytest.approx(np.std(returns))
    card = ModelCard.load(folder / "README.md")
    assert card.data.library_name == "border-py"
    assert {"reinforcement-learning", "deep-reinforcement-learning", "CartPole-v1", "dqn"} <= set(
        card.data.tags
    )
    (result,) = card.data.eval_results
    assert (result.dataset_name, result.metric_type) == ("CartPole-v1", "mean_reward")
    assert result.metric_value == f"{np.mean(returns):.2f} +/- {np.std(returns):.2f}"
    summary = json.loads((run / "result.json").read_text())["summary"]
    training = results["training"]
    assert training["status"] == "completed"
    for key in ("env_steps", "opt_steps", "seconds"):
        assert training[key] == summary[key]
    assert f"| completed | {summary['env_steps']:,} | {summary['opt_steps']:,} |" in card.text
    assert "api_key" not in card.text and "seed: 0" in card.text  # the resolved config


def test_the_fresh_episodes_are_the_seeds_said_and_none_the_run_evaluated_on(folder, run):
    evaluation = json.loads((folder / "results.json").read_text())["evaluation"]
    fresh = range(*evaluation["reset_seeds"])
    assert len(fresh) == EPISODES
    config = json.loads((run / "checkpoints" / "best" / "config.json").read_text())
    first = derive_seed(config["seed"], "eval")
    played = range(first, first + config["trainer"]["eval_episodes"])
    # the run's own evaluations played these: the best checkpoint's mean return on them is the
    # run's best return (the serial trainer evaluates in process, exactly)
    best = json.loads((run / "result.json").read_text())["summary"]["best_return"]
    assert np.mean(_returns(load_policy(run), played, config)) == pytest.approx(best)
    assert not set(fresh) & set(range(*evaluation["run_eval_reset_seeds"]))
    assert set(played) <= set(range(*evaluation["run_eval_reset_seeds"]))
    # replaying the fresh seeds with the pulled-to-be checkpoint gives the card's returns
    assert (
        _returns(load_policy(folder / "checkpoint"), fresh, config) == evaluation["episode_returns"]
    )


def _returns(policy, seeds: range, config: dict) -> list[float]:
    evaluator = Evaluator(
        policy.env_factory, len(seeds), seeds.start, config["trainer"]["eval_max_steps"]
    )
    try:
        return evaluator.evaluate(policy.agent).episode_returns
    finally:
        evaluator.close()


def exported_policy(export: Path) -> Any:
    """The export's ``policy.py`` (numpy only), loaded by its path as the card shows."""
    spec = importlib.util.spec_from_file_location("border_policy", export / "policy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_numpy_export_in_the_folder_acts_as_the_checkpoint(folder, run):
    net = exported_policy(folder / "export").load(folder / "export")
    loaded = load_policy(folder / "checkpoint")
    obs = np.stack([loaded.observation_space.sample() for _ in range(200)])
    np.testing.assert_array_equal(
        net.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0]
    )
    action, _ = net.predict(loaded.make_env().reset(seed=1)[0], deterministic=True)
    assert loaded.action_space.contains(int(action))


class RecordingApi:
    """The Hub API's two calls a push makes, recorded (what the folder held at the upload)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.files: list[str] = []
        self.card = ""

    def create_repo(self, **kwargs):
        self.calls.append(("create_repo", kwargs))

    def upload_folder(self, **kwargs):
        self.calls.append(("upload_folder", kwargs))
        root = Path(kwargs["folder_path"])
        self.files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        self.card = (root / "README.md").read_text()


def test_a_push_uploads_the_folder_to_the_repo_through_the_api(run):
    api = RecordingApi()
    facts, url = push(run, PushSettings(REPO, episodes=3), api=api)
    (create, created), (upload, uploaded) = api.calls
    assert (create, created) == (
        "create_repo",
        {"repo_id": REPO, "repo_type": "model", "exist_ok": True},
    )
    assert upload == "upload_folder"
    assert uploaded["repo_id"] == REPO and uploaded["repo_type"] == "model"
    assert uploaded["commit_message"] == (
        f"border push: DQN on CartPole-v1, mean return {facts.score.text()} over 3 fresh episodes"
    )
    assert {"README.md", "checkpoint/policy.pt", "export/policy.py", "results.json"} <= set(
        api.files
    )
    assert f"value: {facts.score.text()}" in api.card
    assert not Path(uploaded["folder_path"]).exists()  # the staging dir is removed after
    assert url == f"https://huggingface.co/{REPO}"  # the recording API returns no commit


def test_a_failed_upload_is_one_line(run):
    class Offline(RecordingApi):
        def create_repo(self, **kwargs):
            raise OSError("Name or service not known\n(details)")

    with pytest.raises(RunError, match=rf"^push to {REPO} failed: Name or service not known$"):
        push(run, PushSettings(REPO, episodes=1), api=Offline())


def test_a_pull_gives_a_dir_load_policy_acts_from(folder, tmp_path, capsys):
    def from_folder(repo_id, revision, local_dir):  # the Hub replaced by the dry-run folder
        assert (repo_id, revision) == (REPO, "v1")
        shutil.copytree(folder, local_dir, dirs_exist_ok=True)

    out = tmp_path / "pulled"
    checkpoint = pull(REPO, out, "v1", fetch=from_folder)
    assert checkpoint == out / "checkpoint"
    policy = load_policy(checkpoint)
    env = policy.make_env()
    obs, _ = env.reset(seed=0)
    action, state = policy.predict(obs, deterministic=True)
    assert state is None and env.action_space.contains(int(action))
    obs, *_ = env.step(action)
    env.close()
    original = load_policy(folder / "checkpoint")
    batch = np.stack([policy.observation_space.sample() for _ in range(100)])
    np.testing.assert_array_equal(
        policy.predict(batch, deterministic=True)[0], original.predict(batch, deterministic=True)[0]
    )
    with pytest.raises(ConfigError, match=r"^-o .*pulled: exists and is not an empty dir"):
        pull(REPO, out, fetch=from_folder)


def test_a_pull_of_something_else_keeps_nothing(tmp_path):
    def not_a_policy(repo_id, revision, local_dir):
        (local_dir / "README.md").write_text("# a model of another library\n")

    with pytest.raises(ConfigError, match=r"^me/other: not a policy border push shared"):
        pull("me/other", tmp_path / "other", fetch=not_a_policy)

    def offline(repo_id, revision, local_dir):
        raise OSError("Network is unreachable")

    with pytest.raises(RunError, match=r"^pull of me/other failed: Network is unreachable$"):
        pull("me/other", tmp_path / "other", fetch=offline)
    assert list(tmp_path.iterdir()) == []  # no dir, no temporary dir


def test_an_untrusted_config_is_refused_before_anything_is_written(run, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    config_file = copy / "checkpoints" / "best" / "config.json"
    config = json.loads(config_file.read_text())
    config["agent"]["_target_"] = "my_pkg.agent.MyAgent"
    config_file.write_text(json.dumps(config))
    out = tmp_path / "card"
    assert main(["push", str(copy), "--repo", REPO, "--dry-run", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("border: error: agent._target_=my_pkg.agent.MyAgent in ")
    assert line.endswith("add trust=[my_pkg.agent.MyAgent]")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.mark.parametrize(
    ("fmt", "model"), [("torchscript", "policy.torchscript.pt"), ("onnx", "policy.onnx")]
)
def test_another_format_puts_that_export_in_the_folder(fmt, model, run, tmp_path):
    out = tmp_path / "card"
    argv = ["push", str(run), "--repo", REPO, "--dry-run", str(out), "--episodes", "1"]
    assert main([*argv, "--format", fmt]) == 0
    assert sorted(p.name for p in (out / "export").iterdir()) == sorted(
        [model, f"{model}.preprocessing.json", f"{model}.env.py"]
    )
    policy = load_policy(out / "checkpoint")
    obs = np.stack([policy.observation_space.sample() for _ in range(50)]).astype(np.float32)
    if fmt == "torchscript":
        import torch

        actions, _ = torch.jit.load(out / "export" / model)(torch.as_tensor(obs))
        actions = actions.numpy()
    else:
        import onnxruntime

        session = onnxruntime.InferenceSession(out / "export" / model)
        actions, _ = session.run(["action", "values"], {"obs": obs})
    np.testing.assert_array_equal(actions, policy.predict(obs, deterministic=True)[0])
    card = (out / "README.md").read_text()  # the card shows how to run it
    assert f'"cartpole-tiny-policy/export/{model}"' in card
    assert f"`export/{model}.preprocessing.json` says how" in card


def test_no_video_when_the_env_cannot_render_or_moviepy_is_missing(
    run, tmp_path, caplog, monkeypatch
):
    import dataclasses

    from border_py.envs.factory import GymEnvFactory
    from border_py.hub.media import record_replay
    from border_py.hub.score import Score

    from .. import frame_env  # noqa: F401 (registers FramePattern-v0, which cannot render)

    policy = load_policy(run)
    score = Score(None, range(5, 6), 0.0, 50)  # no episode is played: the check comes first
    blind = dataclasses.replace(policy, env_factory=GymEnvFactory("FramePattern-v0"))
    assert not record_replay(blind, score, tmp_path / "replay.mp4")
    monkeypatch.setitem(sys.modules, "moviepy", None)  # as if the video extra were not installed
    assert not record_replay(policy, score, tmp_path / "replay.mp4")
    blind_line, missing_line = (r.getMessage() for r in caplog.records)
    assert blind_line.startswith(
        "replay video skipped: FramePattern-v0 cannot be made with render_mode='rgb_array' ("
    )
    assert missing_line == (
        "replay video skipped: cannot record (import of moviepy halted; None in sys.modules);"
        " pip install 'border-py[video]'"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_pull_says_when_loading_takes_trust(folder, tmp_path, caplog):
    def with_own_agent(repo_id, revision, local_dir):
        shutil.copytree(folder, local_dir, dirs_exist_ok=True)
        config_file = local_dir / "checkpoint" / "config.json"
        config = json.loads(config_file.read_text())
        config["agent"]["_target_"] = "my_pkg.agent.MyAgent"
        config_file.write_text(json.dumps(config))

    checkpoint = pull(REPO, tmp_path / "pulled", fetch=with_own_agent)
    (record,) = caplog.records
    assert record.getMessage().endswith("add trust=[my_pkg.agent.MyAgent]")
    with pytest.raises(ConfigError, match=r"add trust=\[my_pkg.agent.MyAgent\]$"):
        load_policy(checkpoint)  # nothing of the download was imported, nor is it unless trusted


def test_a_sac_run_pushes_with_its_continuous_actions(tmp_path):
    root = tmp_path / "sac"
    train(make_config(root, *TINY, "agent=sac", "env=pendulum", "trainer=serial", "progress=false"))
    out = tmp_path / "card"
    argv = ["push", str(root / "run"), "--repo", "me/pendulum-sac", "--dry-run", str(out)]
    assert main([*argv, "--episodes", "2"]) == 0
    card = ModelCard.load(out / "README.md")
    assert {"Pendulum-v1", "sac"} <= set(card.data.tags)
    evaluation = json.loads((out / "results.json").read_text())["evaluation"]
    (result,) = card.data.eval_results
    assert (
        result.metric_value == f"{evaluation['mean_reward']:.2f} +/- {evaluation['std_reward']:.2f}"
    )
    assert len(evaluation["episode_returns"]) == 2
    loaded = load_policy(out / "checkpoint")
    obs = np.stack([loaded.observation_space.sample() for _ in range(100)])
    actions = (
        exported_policy(out / "export").load(out / "export").predict(obs, deterministic=True)[0]
    )
    np.testing.assert_allclose(
        actions, loaded.predict(obs, deterministic=True)[0], rtol=1e-4, atol=1e-5
    )
    assert all(loaded.action_space.contains(a.astype(np.float32)) for a in actions)
