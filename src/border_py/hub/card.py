"""The model card: the ``README.md`` of a pushed policy, with the Hub's metadata on top.

The YAML front matter says what the Hub indexes: the library (``border-py``), tags (reinforcement
learning, the env id, the algorithm) and a ``model-index`` whose one result is the env's
``mean_reward`` as ``mean +/- std``, the form Stable-Baselines3's cards use, so the Hub shows the
score beside other RL models of that env. The body says how the score was measured, what the
training cost, how to load the policy, and the run's resolved config (secrets redacted).

Everything on the card that comes from the run's files (the env id, the checkpoint's name, the
versions, the budget, the config's values) is data, and stays text on the card: the front matter
is written by a YAML dumper; the config sits in a fence longer than any run of backticks inside
it; a name is one inline code span (:func:`code`), whose text is never markup; a version is one
only if it reads as one (:func:`version`), numbers are written by the card, a run's status is one
of three words. No value from a file can open a section, a link, an image or a code block.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from border_py.config import is_number
from border_py.errors import printable
from border_py.hub.contents import pull_dir
from border_py.hub.score import Score
from border_py.secrets import redact

__all__ = ["CardFacts", "card", "fenced", "version"]

LIBRARY = "border-py"
VERSION = re.compile(r"\d{1,6}\.\d{1,6}(\.\d{1,6})?[a-z0-9.+-]{0,40}")
STATUSES = ("completed", "interrupted", "failed")
EXPORT_IS_CODE = (
    "An export is code (numpy: the Python file `export/policy.py`; TorchScript: TorchScript"
    " programs; ONNX: a graph its runtime executes): trust a downloaded one as you would any"
    " downloaded code."
)


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
        recurrent: the policy carries a state through each episode (its ``predict`` takes it).
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
    recurrent: bool = False


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


def code(text: str) -> str:
    """``text`` as one inline code span, whose content markdown never reads as markup: its line
    breaks and control characters escaped (a span cannot hold a new line or a section), in
    backticks longer than any run of them inside."""
    plain = printable(text).replace("\n", "\\n").replace("\t", " ")
    longest = max((len(run) for run in re.findall(r"`+", plain)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {plain} {fence}" if longest else f"{fence}{plain}{fence}"


def _word(text: str) -> str:
    """A class name as it is (an identifier is never markup), anything else as :func:`code`."""
    return text if text.isidentifier() and text.isascii() else code(text)


def version(value: Any) -> str:
    """``value`` if it reads as a version (``0.2.0``, ``0.3.0.dev1+g1a2b3c``), else
    ``unknown``: a ``meta.json`` holds what its writer put there."""
    return value if isinstance(value, str) and VERSION.fullmatch(value) else "unknown"


def _number(value: Any, unit: str = "") -> str:
    if not is_number(value):
        return "unknown"
    if abs(value) >= 10**18 or not math.isfinite(value):  # ints beyond floats too
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
    status = t.get("status") if t.get("status") in STATUSES else "unknown"
    return [
        "## Training",
        "",
        "| run status | env steps | opt steps | wall time |",
        "| --- | --- | --- | --- |",
        f"| {status} | {_number(t.get('env_steps'))}"
        f" | {_number(t.get('opt_steps'))} | {_number(t.get('seconds'), ' s')} |",
        "",
        f"The pushed checkpoint is the run's {code(str(c['name']))} one, saved after"
        f" {_number(c.get('opt_steps'))} opt steps and {_number(c.get('env_steps'))} env steps.",
    ]


def _use_section(facts: CardFacts) -> list[str]:
    folder = pull_dir(facts.repo_id)
    load = (
        "from border_py import load_policy\n\n"
        f'policy = load_policy("{folder}/checkpoint")\n'
        "env = policy.make_env()\n"
        "obs, _ = env.reset(seed=0)\n"
        + (
            "action, state = policy.predict(obs, None, np.ones(1, bool), deterministic=True)\n"
            "# then pass back state, and episode_start True where an episode begins"
            if facts.recurrent
            else "action, _ = policy.predict(obs, deterministic=True)"
        )
    )
    lines = [
        "## Use it",
        "",
        "With border-py (`pip install 'border-py[hub]'`), download this repo with `border pull`"
        f" (into `{folder}/`: it keeps only the files `border push` writes, the export's"
        " `policy.py` only as border-py writes it), then load the policy in Python:",
        "",
        fenced(f"border pull {facts.repo_id}", "bash"),
        "",
        fenced(load, "python"),
        "",
        "The checkpoint's config is data: a config naming code of your own loads only with"
        ' `trust=[...]` (`load_policy(path, trust=["my_pkg"])`).',
    ]
    if facts.export:
        lines += ["", *facts.export, "", EXPORT_IS_CODE]
    return lines


def card(facts: CardFacts) -> str:
    """The model card's text: front matter, then the sections."""
    front = yaml.safe_dump(metadata(facts), sort_keys=False, allow_unicode=True)
    files = [f"- `{name}`: {what}" for name, what in facts.files.items()]
    config = yaml.safe_dump(redact(facts.config), sort_keys=False, allow_unicode=True)
    sections = [
        f"# {_word(facts.algorithm)} on {code(facts.env_id)}",
        "",
        f"A {_word(facts.algorithm)} policy for {code(facts.env_id)}, trained with {LIBRARY}"
        " (asynchronous multi-process off-policy deep RL, driven by Hydra configs).",
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
        f"Pushed with border-py {version(facts.versions.get('pushed'))}; trained with border-py"
        f" {version(facts.versions.get('trained'))}.",
    ]
    return f"---\n{front}---\n\n" + "\n".join(sections) + "\n"
