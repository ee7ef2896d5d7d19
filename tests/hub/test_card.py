"""hub/card.py: the model card's Hub metadata parses with huggingface_hub's ModelCard and holds
the fresh evaluation's score; nothing from the run's config ends its front matter or fences."""

from __future__ import annotations

from huggingface_hub import ModelCard

from border_py.evaluation.evaluator import EvalResult
from border_py.hub.card import CardFacts, card, fenced
from border_py.hub.score import Score


def facts(config: dict | None = None) -> CardFacts:
    result = EvalResult(12.5, 1.25, 10.0, 15.0, 12.5, [10.0, 12.5, 15.0])
    return CardFacts(
        repo_id="me/cartpole-dqn",
        env_id="CartPole-v1",
        algorithm="DQN",
        score=Score(result, range(2000, 2003), 0.0, 500),
        checkpoint={"name": "best", "opt_steps": 300, "env_steps": 500},
        training={"status": "completed", "env_steps": 600, "opt_steps": 300, "seconds": 4.2},
        config=config or {"seed": 0, "env": {"id": "CartPole-v1"}, "agent": {"lr": 1e-3}},
        files={"README.md": "this card"},
        versions={"pushed": "0.2.0", "trained": "0.2.0"},
    )


def test_the_metadata_parses_as_the_hubs_model_card(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(card(facts()))
    data = ModelCard.load(path).data
    assert data.library_name == "border-py"
    assert {"reinforcement-learning", "deep-reinforcement-learning", "CartPole-v1", "dqn"} <= set(
        data.tags
    )
    (result,) = data.eval_results
    assert data.model_name == "DQN"
    assert (result.task_type, result.dataset_type, result.dataset_name) == (
        "reinforcement-learning",
        "CartPole-v1",
        "CartPole-v1",
    )
    assert (result.metric_type, result.metric_value) == ("mean_reward", "12.50 +/- 1.25")


def test_the_body_says_the_seeds_the_budget_and_the_versions():
    text = card(facts())
    assert "over 3 episodes of a fresh evaluation" in text
    assert "reset seeds 2,000 to 2,002" in text
    assert "| completed | 600 | 300 | 4 s |" in text
    assert "`best` one, saved after 300 opt steps and 500 env steps" in text
    assert "Pushed with border-py 0.2.0; trained with border-py 0.2.0." in text


def test_the_config_is_redacted_and_cannot_close_its_fence(tmp_path):
    config = {
        "seed": 0,
        "env": {"id": "CartPole-v1"},
        "recorder": {"api_key": "hunter2", "note": "```\n---\nlibrary_name: evil\n````"},
    }
    path = tmp_path / "README.md"
    path.write_text(card(facts(config)))
    text = path.read_text()
    assert "hunter2" not in text and "api_key: '***'" in text
    assert "`````yaml" in text  # longer than the config's longest run of backticks (4)
    assert ModelCard.load(path).data.library_name == "border-py"


def test_fenced_picks_a_fence_longer_than_the_text_holds():
    assert fenced("a: 1", "yaml") == "```yaml\na: 1\n```"
    assert fenced("x ```` y", "") == "`````\nx ```` y\n`````"
