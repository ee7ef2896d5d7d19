"""``border push`` of a recurrent run (R2D2): the folder a push uploads (through a recording API,
as tests/hub/test_push.py does), its card showing the state a caller carries, its numpy export
acting with that state, and a pull that ``load_policy`` predicts from."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from border_py.deploy.load import load_policy
from border_py.hub.folder import PushSettings
from border_py.hub.remote import pull, push

REPO = "me/repeatprevious-r2d2"


class RecordingApi:
    """The Hub API's two calls a push makes; the uploaded folder is copied to ``keep``."""

    def __init__(self, keep: Path) -> None:
        self.keep = keep
        self.calls: list[str] = []

    def create_repo(self, **kwargs):
        self.calls.append("create_repo")

    def upload_folder(self, **kwargs):
        self.calls.append("upload_folder")
        shutil.copytree(kwargs["folder_path"], self.keep)


@pytest.fixture
def pushed(trained, tmp_path) -> tuple[Path, object]:
    """The folder a push of the LSTM run uploaded (3 fresh episodes), and the card's facts."""
    api = RecordingApi(tmp_path / "uploaded")
    facts, _ = push(trained("r2d2"), PushSettings(REPO, episodes=3), api=api)
    assert api.calls == ["create_repo", "upload_folder"]  # main refused a recurrent agent here
    return tmp_path / "uploaded", facts


def test_a_push_of_a_recurrent_run_uploads_its_card_export_and_checkpoint(pushed, tmp_path):
    folder, facts = pushed
    files = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert {"README.md", "results.json", "checkpoint/policy.pt", "export/policy.py"} <= files
    assert facts.algorithm == "R2D2" and facts.env_id == "popgym-RepeatPreviousEasy-v0"
    assert facts.recurrent and len(facts.score.result.episode_returns) == 3
    card = (folder / "README.md").read_text()
    assert "action, state = policy.predict(obs, None, np.ones(1, bool), deterministic=True)" in card
    assert "action, state = net.predict(obs, state, start, deterministic=True)" in card
    assert (
        "The policy is recurrent and the model holds no state: its inputs are `obs`, `h`, `c`"
        in card
    )
    described = json.loads((folder / "export" / "preprocessing.json").read_text())
    assert described["state"]["inputs"] == ["obs", "h", "c", "prev_action"]

    # the export, with numpy alone, plays the card's fresh episodes' first as the checkpoint
    spec = importlib.util.spec_from_file_location("border_policy", folder / "export" / "policy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net = module.load(folder / "export")
    checkpoint = load_policy(folder / "checkpoint")
    env = checkpoint.make_env()
    obs, _ = env.reset(seed=facts.score.seeds.start)
    state, want, start, total, done = None, None, np.ones(1, bool), 0.0, False
    while not done:
        action, state = net.predict(obs, state, start, deterministic=True)
        expected, want = checkpoint.predict(obs, want, start, deterministic=True)
        assert action == expected
        obs, reward, terminated, truncated, _ = env.step(action)
        total, start, done = total + reward, np.zeros(1, bool), terminated or truncated
    env.close()
    assert total == pytest.approx(facts.score.result.episode_returns[0])

    def from_folder(repo_id, revision, local_dir):  # the Hub replaced by the uploaded folder
        shutil.copytree(folder, local_dir, dirs_exist_ok=True)

    pulled = pull(REPO, tmp_path / "pulled", fetch=from_folder)
    obs = np.stack([checkpoint.observation_space.sample() for _ in range(5)])
    np.testing.assert_array_equal(
        load_policy(pulled).predict(obs, deterministic=True)[0],
        checkpoint.predict(obs, deterministic=True)[0],
    )
