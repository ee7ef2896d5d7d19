"""The code blocks of README.md and docs/, and what the docs test makes of them.

Every fenced block carries a marker, an HTML comment on the line before it (invisible on the
rendered page; docs/08-development/index.md documents them):

- ``<!-- test: run -->``: bash blocks run each ``border`` line at a tiny budget; python blocks run
  as a script with the same budget added to ``compose("train", ...)``; ``<!-- test: run
  continues -->``: the block runs after the page's run block before it, in the same directory
  (a walkthrough whose steps use what the earlier ones made);
- ``<!-- test: check -->``: ``border train`` lines are composed and checked (``--cfg job``);
- ``<!-- test: transcript -->``: each ``$ border ...`` line runs; the lines after it are the end
  of its stderr;
- ``<!-- test: excerpt PATH -->``: the block is a part of the file ``PATH``;
- ``<!-- test: skip REASON -->``: not run, for the reason given.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODES = ("run", "check", "transcript", "excerpt", "skip")
MARKER = re.compile(r"^<!-- test: (\w+)(?: (.*?))? -->$")
FENCE = re.compile(r"^(\s*)```(\S*)")

# The tiny budget every run-mode `border train` gets (appended, so it wins over the line's own).
TINY = [
    "progress=false",
    "trainer.max_opts=20",
    "trainer.warmup_period=300",
    "trainer.eval_interval=10",
    "trainer.eval_env_interval=null",
    "trainer.eval_episodes=1",
    "trainer.eval_max_steps=50",
    "trainer.final_eval_episodes=1",  # the final weights' fresh evaluation (default: 100 episodes)
    "trainer.save_interval=10",
    "trainer.save_env_interval=null",
    "replay_buffer.capacity=5000",
]
TINY_RESUME = [*TINY, "trainer.max_opts=40"]  # a resume raises the budget of the run it continues
TINY_EVAL = ["eval.n_episodes=1", "eval.max_steps=50"]
TINY_TUNE = ["--n-trials", "1", "--n-jobs", "1", *TINY]  # one trial (serial, unless the line says)
CONTINUES = "continues"  # a run block's argument: it runs after the page's run block before it
INSPECT = {"--help", "-h", "--cfg", "-c", "--info", "-i", "--hydra-help"}

# Lines of tools border does not run, and why the test does not run them either.
NOT_RUN = {
    ("pip", "install"): "the dev extra holds every extra",
    ("tensorboard",): "a server that runs until stopped",
    ("mlflow", "ui"): "a server that runs until stopped",
    ("optuna-dashboard",): "a server that runs until stopped",
    ("wandb", "sync"): "an upload to W&B",
}


@dataclass
class Block:
    """One fenced code block: where it is, its language, its marker and its text."""

    path: Path
    line: int
    lang: str
    mode: str | None
    arg: str
    text: str

    @property
    def name(self) -> str:
        """``docs/02-guide/sweeps.md:12``, the block's id in test names and messages."""
        path = self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path
        return f"{path}:{self.line}"


def doc_files() -> list[Path]:
    """README.md, examples/README.md and every page of the site."""
    pages = sorted((REPO / "docs").rglob("*.md"))
    return [REPO / "README.md", REPO / "examples" / "README.md", *pages]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one markdown file, each with the marker on the line before it."""
    found, lines, i = [], path.read_text().splitlines(), 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        marker = MARKER.match(lines[i - 1].strip()) if i else None
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        mode, arg = (marker.group(1), marker.group(2) or "") if marker else (None, "")
        text = "\n".join(line[len(fence.group(1)) :] for line in lines[i + 1 : end])
        found.append(Block(path, i + 1, fence.group(2), mode, arg, text))
        i = end + 1
    return found


def all_blocks(mode: str | None = None) -> list[Block]:
    """Every block of the docs, or those of one mode."""
    every = [block for path in doc_files() for block in blocks(path)]
    return [block for block in every if mode is None or block.mode == mode]


def run_chains(found: list[Block]) -> list[list[Block]]:
    """The run blocks of ``found`` as the test runs them: each block that does not continue
    starts a chain, and every ``run continues`` block joins the chain before it on its page.

    Raises:
        ValueError: a ``run continues`` block with no run block before it on its page.
    """
    chains: list[list[Block]] = []
    for block in found:
        if block.mode != "run":
            continue
        if block.arg != CONTINUES:
            chains.append([block])
        elif chains and chains[-1][0].path == block.path:
            chains[-1].append(block)
        else:
            raise ValueError(f"{block.name}: `run {CONTINUES}` with no run block before it")
    return chains


def problems(block: Block) -> list[str]:
    """What is wrong with a block's marker (nothing, for a block the test can take)."""
    if block.mode not in MODES:
        return [f"{block.name}: no `<!-- test: {'|'.join(MODES)} ... -->` on the line before it"]
    if block.mode == "skip" and not block.arg.strip():
        return [f"{block.name}: `test: skip` needs its reason"]
    if block.mode == "excerpt" and not (REPO / block.arg).is_file():
        return [f"{block.name}: excerpt of {block.arg}, which is not a file"]
    if block.mode == "run" and block.arg not in ("", CONTINUES):
        return [f"{block.name}: `test: run` takes nothing or `{CONTINUES}`, not {block.arg!r}"]
    if block.mode in ("run", "check") and block.lang not in ("bash", "python"):
        return [f"{block.name}: only bash and python blocks run, not {block.lang or 'text'}"]
    if block.mode == "check" and block.lang != "bash":
        return [f"{block.name}: `test: check` is for bash blocks"]
    if block.mode == "transcript" and not block.text.startswith("$ "):
        return [f"{block.name}: a transcript starts with a `$ ` command line"]
    if block.mode in ("run", "check") and block.lang == "bash":
        errors = (line_problem(command, block.mode) for command in commands(block))
        return [f"{block.name}: {error}" for error in errors if error]
    return []


@dataclass
class Command:
    """One shell command of a block: its environment prefix and its words."""

    env: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    export: bool = False  # an ``export VAR=value`` line: the environment of the lines after it


def commands(block: Block) -> list[Command]:
    """A bash block's commands: continuation lines joined, comments dropped, env prefixes split."""
    joined = re.sub(r"\\\n\s*", " ", block.text)
    found = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        export = words[0] == "export"
        words = words[1:] if export else words
        env = {}
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            key, value = words.pop(0).split("=", 1)
            env[key] = value
        found.append(Command(env, words, export))
    return found


def line_problem(command: Command, mode: str) -> str | None:
    """Why a run or check block cannot take this command (None: it can)."""
    border = command.argv[:1] == ["border"]
    if mode == "check" and border and command.argv[1:2] not in (["train"], ["--help"]):
        return f"`{shlex.join(command.argv)}`: a check block composes border train lines only"
    if command.export or not command.argv or border:
        return None
    if not_run_reason(command) is not None:
        return None
    return f"`{shlex.join(command.argv)}` is not a border command: mark the block skip, with why"


def not_run_reason(command: Command) -> str | None:
    """The reason a tool's line is not run, or None for a line that runs."""
    for prefix, reason in NOT_RUN.items():
        if tuple(command.argv[: len(prefix)]) == prefix:
            return reason
    return None


def as_run(argv: list[str]) -> list[str]:
    """``border ...`` words with the tiny budget of their subcommand appended."""
    sub = argv[1] if len(argv) > 1 else ""
    if INSPECT & set(argv) or sub not in ("train", "eval", "tune"):
        return argv
    if sub == "eval":
        return [*argv, *TINY_EVAL]
    if sub == "tune":
        serial = [] if any(w.startswith("trainer=") for w in argv) else ["trainer=serial"]
        return [*argv, *TINY_TUNE, *serial]
    resumes = any(w.startswith("resume=") and w != "resume=auto" for w in argv)
    return [*argv, *(TINY_RESUME if resumes else TINY)]


def as_check(argv: list[str]) -> list[str]:
    """``border train ...`` words composed and checked only: ``--cfg job``, a sweep at its first
    value of each swept key (Hydra takes ``--cfg`` in a single run only) and without
    ``resume=auto``, which each job of a sweep settles in its own dir."""
    if INSPECT & set(argv):
        return argv
    if not {"-m", "--multirun"} & set(argv):
        return [*argv, "--cfg", "job"]
    sweep = ("-m", "--multirun", "resume=auto")
    return [*(first_value(w) for w in argv if w not in sweep), "--cfg", "job"]


def first_value(word: str) -> str:
    """``key=a,b`` as ``key=a``; commas inside brackets, braces or quotes are not a sweep's."""
    if "=" not in word:
        return word
    key, value = word.split("=", 1)
    depth, quote = 0, ""
    for i, char in enumerate(value):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
        elif char == "," and depth == 0:
            return f"{key}={value[:i]}"
    return word


def transcript(block: Block) -> list[tuple[list[str], list[str]]]:
    """A transcript's commands (``border`` words) and the stderr lines each must end with."""
    steps: list[tuple[list[str], list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            steps.append((shlex.split(line[2:], comments=True), []))
        elif line.strip():
            steps[-1][1].append(line)
    return steps


def with_examples(words: list[str], cwd: Path) -> list[str]:
    """The words with the paths the pages use as examples turned into the block's own:
    ``/scratch/`` and ``/abs/path/`` under its dir, dated run dirs its newest runs."""
    text = shlex.join(words).replace("/scratch/", f"{cwd}/scratch/")
    text = text.replace("/abs/path/", f"{cwd}/")
    text = re.sub(
        r"outputs/multirun/(<date>/<time>|\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d)",
        lambda _: str(newest(cwd / "outputs" / "multirun")),
        text,
    )
    text = re.sub(
        r"outputs/(<date>/<time>|\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d|\.\.\.)",
        lambda _: str(newest(cwd / "outputs")),
        text,
    )
    text = re.sub(r"(/\S*?)/checkpoints/\d{9}", lambda m: oldest_checkpoint(Path(m.group(1))), text)
    return shlex.split(text)


def newest(base: Path) -> Path:
    """The newest ``<date>/<time>`` dir under ``base`` (``multirun`` and ``tune`` excluded)."""
    runs = [p for p in base.glob("*/*") if p.is_dir() and p.parent.name not in ("multirun", "tune")]
    if not runs:
        raise AssertionError(f"no run under {base} for the example path to stand for")
    return max(runs, key=lambda p: p.stat().st_mtime)


def oldest_checkpoint(run: Path) -> str:
    """The run's oldest periodic checkpoint, where the page names one by its step."""
    steps = sorted(p for p in (run / "checkpoints").glob("[0-9]" * 9))
    if not steps:
        raise AssertionError(f"no periodic checkpoint in {run} for the example path to stand for")
    return str(steps[0])


def base_env(cwd: Path) -> dict[str, str]:
    """The environment of a block's commands: its own dir (``my_pkg``) and examples/ importable."""
    paths = [str(cwd), str(REPO / "examples"), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in paths if p), "PYTHONUNBUFFERED": "1"}


def command_env(env: dict[str, str], prefix: dict[str, str]) -> dict[str, str]:
    """``env`` with a line's ``VAR=value`` prefix; a ``PYTHONPATH`` prefix is put in front (its
    relative entries are the repo's: ``PYTHONPATH=examples``)."""
    merged = {**env, **prefix}
    if "PYTHONPATH" in prefix:
        entries = [str(REPO / p) for p in prefix["PYTHONPATH"].split(os.pathsep)]
        merged["PYTHONPATH"] = os.pathsep.join([*entries, env.get("PYTHONPATH", "")])
    return merged
