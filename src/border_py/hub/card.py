"""The model card: the ``README.md`` of a pushed policy, with the Hub's metadata on top.

The YAML front matter says what the Hub indexes: the library (``border-py``), tags (reinforcement
learning, the env id, the algorithm) and a ``model-index`` whose one result is the env's
``mean_reward`` as ``mean +/- std``, the form Stable-Baselines3's cards use, so the Hub shows the
score beside other RL models of that env. The body says how the score was measured, what the
training cost, how to load the policy, and the run's resolved config (secrets redacted).

Everything on the card that comes from the run (the env id, the config's values) is data: the
front matter is written by a YAML dumper and the config sits in a fence longer than any run of
backticks inside it, so no saved value can end either early.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from border_py.hub.score import Score
from border_py.secrets import redact

LIBRARY = "border-py"


@dataclass(frozen=True)
class CardFacts:
    """What the card says about a pushed policy.

    Attributes:
        repo_id: the Hub repo (``owner/name``).
        env_id: the env's id.
        algorithm: the agent's class name (``DQN``, ``IQN``, ``SAC``, a user's own).
        score: the fresh evaluation.
        checkpoint: the pushed checkpoint's name and counters (``name``, ``opt_steps``,
            ``env_steps``).
        training: the run's budget from its ``result.json`` (``status``, ``env_steps``,
            ``opt_steps``, ``seconds``; None where unknown).
        config: the run's resolved config (redacted again here).
        files: the folder's files and dirs, each with what it is.
        versions: border-py's version that pushes and the one that trained.
        export: how to run the exported policy (markdown lines).
    """

    repo_id: str
    env_id: str
    algorithm: str
    score: Score
    checkpoint: dict[str, Any]
    training: dict[str, Any]
    config: dict[str, Any]
    files: dict[str, str]
    versions: dict[str, str]
    export: list[str] = field(default_factory=list)


def metadata(facts: CardFacts) -> dict[str, Any]:
    """The card's front matter: library, tags and the ``model-index`` with ``mean_reward``."""
    return {
        "library_name": LIBRARY,
        "tags": [
            "reinforcement-learning",
            "deep-reinforcement-learning",
            facts.env_id,
            facts.algorithm.lower(),
            LIBRARY,
        ],
        "model-index": [
            {
                "name": facts.algorithm,
                "results": [
                    {
                        "task": {
                            "type": "reinforcement-learning",
                            "name": "reinforcement-learning",
                        },
                        "dataset": {"type": facts.env_id, "name": facts.env_id},
                        "metrics": [
                            {
                                "type": "mean_reward",
                                "value": facts.score.text(),
                                "name": "mean_reward",
                                "verified": False,
                            }
                        ],
                    }
                ],
            }
        ],
    }


def fenced(text: str, lang: str) -> str:
    """``text`` in a code fence longer than any run of backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def _number(value: Any, unit: str = "") -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "unknown"
    return f"{value:,.0f}{unit}" if isinstance(value, int) or unit else f"{value:,}"


def _score_section(facts: CardFacts) -> list[str]:
    s = facts.score
    seeds = f"{s.seeds.start:,} to {s.seeds.stop - 1:,}"
    picked = (
        "the checkpoint, picked as the best of those evaluations, is scored on episodes it was"
        " not picked on."
        if facts.checkpoint["name"] == "best"
        else "the score is measured on episodes the run never evaluated on."
    )
    how = (
        "greedy actions"
        if s.epsilon == 0
        else f"greedy actions, random ones with probability {s.epsilon}"
    )
    return [
        "## Score",
        "",
        f"**mean return {s.text()}** over {s.episodes} episodes of a fresh evaluation ({how},"
        f" at most {s.max_steps:,} steps an episode; min {s.result.return_min:.2f}, max"
        f" {s.result.return_max:.2f}, mean length {s.result.length_mean:.1f} steps).",
        "",
        f"The episodes start from reset seeds {seeds}: none of the seeds the run's own evaluations"
        f" could use, so {picked} `results.json` holds every episode's return.",
    ]


def _training_section(facts: CardFacts) -> list[str]:
    t, c = facts.training, facts.checkpoint
    return [
        "## Training",
        "",
        "| run status | env steps | opt steps | wall time |",
        "| --- | --- | --- | --- |",
        f"| {t.get('status') or 'unknown'} | {_number(t.get('env_steps'))}"
        f" | {_number(t.get('opt_steps'))} | {_number(t.get('seconds'), ' s')} |",
        "",
        f"The pushed checkpoint is the run's `{c['name']}` one, saved after {_number(c.get('opt_steps'))}"
        f" opt steps and {_number(c.get('env_steps'))} env steps.",
    ]


def _use_section(facts: CardFacts) -> list[str]:
    load = (
        "from huggingface_hub import snapshot_download\n"
        "from border_py import load_policy\n\n"
        f'folder = snapshot_download("{facts.repo_id}", local_dir="{facts.repo_id.split("/")[1]}")\n'
        'policy = load_policy(f"{folder}/checkpoint")\n'
        "env = policy.make_env()\n"
        "obs, _ = env.reset(seed=0)\n"
        "action, _ = policy.predict(obs)"
    )
    return [
        "## Use it",
        "",
        f"With border-py (`pip install 'border-py[hub]'`), `border pull {facts.repo_id}` downloads"
        " this repo; in Python:",
        "",
        fenced(load, "python"),
        "",
        "The checkpoint's config is data: a config naming code of your own loads only with"
        ' `trust=[...]` (`load_policy(path, trust=["my_pkg"])`).',
        "",
        *facts.export,
    ]


def card(facts: CardFacts) -> str:
    """The model card's text: front matter, then the sections."""
    front = yaml.safe_dump(metadata(facts), sort_keys=False, allow_unicode=True)
    files = [f"- `{name}`: {what}" for name, what in facts.files.items()]
    config = yaml.safe_dump(redact(facts.config), sort_keys=False, allow_unicode=True)
    sections = [
        f"# {facts.algorithm} on {facts.env_id}",
        "",
        f"A {facts.algorithm} policy for `{facts.env_id}`, trained with {LIBRARY} (asynchronous"
        " multi-process off-policy deep RL, driven by Hydra configs).",
        "",
        *_score_section(facts),
        "",
        *_training_section(facts),
        "",
        *_use_section(facts),
        "",
        "## Files",
        "",
        *files,
        "",
        "## Hyper-parameters",
        "",
        "The run's resolved config (secrets redacted):",
        "",
        fenced(config, "yaml"),
        "",
        f"Pushed with border-py {facts.versions['pushed']}; trained with border-py"
        f" {facts.versions['trained']}.",
    ]
    return f"---\n{front}---\n\n" + "\n".join(sections) + "\n"
