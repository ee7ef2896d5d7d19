"""Secrets in config values: never recorded, and never used from a record.

The running process uses the config as given; every copy border records (the checkpoint's
``config.json``, TensorBoard, MLflow, W&B, ``result.json``, the run's claim, ``train.log``,
Hydra's ``.hydra/`` files and ``multirun.yaml``) holds :data:`REDACTED` in place of:

- the value of a key that names a secret, and everything under such a key (:func:`secret_key`;
  words split at ``_``, ``-`` and camelCase, case does not matter): a key with ``password``,
  ``passwd``, ``passphrase``, ``secret``, ``credential``, ``api_key``/``apikey`` or
  ``private_key`` in it; with the word ``pat``, ``pwd``, ``cookie``/``cookies``, ``dsn`` or
  ``webhook``/``webhooks`` (``github_pat``, ``SENTRY_DSN``, ``slack_webhook_url``); whose last
  word is ``token``, ``auth``, ``authorization``, ``sig`` or ``signature`` (``HF_TOKEN``,
  ``accessToken``, ``basic_auth``; not ``max_tokens``, ``token_url``, ``RAY_AUTH_MODE``,
  ``author``); or whose last word, after another, is ``key`` (``access_key``, ``ssh_key``,
  ``AccountKey``; not ``key`` alone, ``keys``, ``key_or_group``, ``monkey``) unless the word
  before it names an entry of an observation or info dict (:data:`NAMING_KEYS`: gymnasium's
  ``obs_key``, ``render_key``, ``stats_key``, ``dict_time_key``);
- every value of an environment mapping (``env_vars``, as in Ray's ``runtime_env``; Hydra's
  ``env_set``): the variables' names stay;
- in any text (a value, an override, a log line), whatever has the shape of a credential
  (:data:`_TOKEN`): cloud and API keys (``AKIA...``/``ASIA...``, ``AIza...``), GitHub's and
  GitLab's tokens (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``,
  ``glpat-``), Hugging Face's (``hf_``), Slack's (``xoxb-``, ``xoxp-``, ...), ``sk-...`` keys
  (OpenAI, Anthropic: 20 characters or more, a digit and a capital among them), Stripe's
  (``sk_live_``, ``rk_test_``, ...) and JWTs (``eyJ...`` in three dot-separated parts); the
  path of a Slack or Discord webhook URL;
- the password of a URI (``scheme://user:pass@host`` becomes ``scheme://user:***@host``), the
  user of an ``http(s)`` URI (a Sentry DSN's key: ``https://***@host``) and of any URI when it
  is 20 characters or longer (a token), and ``name=value`` or ``name: value`` pairs inside text
  whose name is a secret (a URI's query parameter ``?token=...``, a connection string's
  ``AccountKey=...``, ``Password=...`` or ``SharedAccessSignature=...``, an override inside a
  string).

``None`` and booleans under a secret key stay as they are (``auth: false`` hides nothing). A
resumed run refuses a config that still holds the marker (:func:`refuse_redacted`): the secret has
to be given again.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from border_py.errors import ConfigError, printable

__all__ = [
    "REDACTED",
    "RedactingFormatter",
    "redact",
    "redact_override",
    "redact_text",
    "refuse_redacted",
    "secret_key",
]

REDACTED = "***"
ENV_MAPPINGS = ("env_vars", "env_set")  # mappings of environment variables: every value hidden

_SECRET_WORDS = re.compile(
    r"password|passwd|passphrase|secret|credential|api_?key|private_?key"
    r"|(?:^|_)(?:pat|pwd|cookies?|dsn|webhooks?)(?:_|$)"
    r"|(?:^|_)(?:token|auth|authorization|sig|signature)$",
    re.IGNORECASE,
)
# a key whose last word is "key" (after another) names a secret, but after these words: the key
# names an entry of an observation or an info dict (gymnasium's obs_key, render_key, stats_key)
NAMING_KEYS = frozenset(
    ("obs", "observation", "render", "stats", "time", "info", "state", "reward", "action", "sort")
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# scheme://user:password@ (the password may hold '/', '#', '?' or an unescaped '@': the last '@'
# before a space ends it); the colons may come escaped (``\:``), as Hydra writes a sweep's overrides
_URI_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*\\?://[^/?#\s:@\\]*)(\\?:)\S*@"
)
# scheme://<token>@: a long user name without a password is a token (GitHub's ghp_..., x-token)
_URI_TOKEN_USER = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*\\?://)[\w.~%-]{20,}@")
# the head of a pair: name=value (the name may be dotted: an override's key), 'name': value, or
# name: value (with a space, or after { or , as in Hydra's {name:value}; never module:attr or
# host:port); \= and \: too (Hydra's escapes in a sweep's overrides)
_PAIR_HEAD = re.compile(
    r"""(?<![\w.-])(?P<quote>["']?)(?P<name>[A-Za-z_][\w.-]*)(?P=quote)\s*\\?(?P<sep>[:=])(?P<space>\s*)"""
)
# a secret's value after its head: quoted, a flat {...} or [...], or up to a space, & or ;
# (commas included, as in Hydra's sweeps, but not a last one)
_VALUE = re.compile(r""""[^"]*"|'[^']*'|\{[^{}]*\}|\[[^\[\]]*\]|[^\s&;'"{}\[\]]*[^\s&;'"{}\[\],]""")
# the shapes of credentials, whatever their key (see the module docstring); none is preceded by a
# letter, digit, '_' or '-'
_TOKEN = re.compile(
    r"(?<![\w-])(?:"
    r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])|AIza[\w-]{35}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{30,}|glpat-[\w-]{20,}"
    r"|hf_[A-Za-z0-9]{30,}|xox[abeoprs]-[A-Za-z0-9-]{10,}"
    r"|sk-(?=[\w-]*[0-9])(?=[\w-]*[A-Z])[\w-]{20,}|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|eyJ[\w-]{10,}\.eyJ[\w-]{10,}\.[\w-]*"
    r")"
)
# a webhook URL's path is its secret: the scheme and host stay
_WEBHOOK = re.compile(
    r"(https?\\?://(?:hooks\.slack\.com|(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks))"
    r"/[^\s'\"]+"
)
# http(s)://user@ (no password): a Sentry-style DSN's key
_URI_HTTP_USER = re.compile(
    r"(?<![A-Za-z0-9+.-])((?:[A-Za-z][A-Za-z0-9.-]*\+)?https?\\?://)[^/?#\s:@\\]+@"
)
# a URI's user part ends at an '@', and none spans a space: the URI patterns run on the words
# holding one only (on a long word without one, their backtracking would be quadratic)
_WORD_WITH_AT = re.compile(r"(?<!\S)[^\s@]*@\S*")
_OVERRIDE = re.compile(r"(?P<key>[~+]{0,2}[A-Za-z_][\w./@-]*)=(?P<value>.*)", re.DOTALL)


def secret_key(key: str) -> bool:
    """Whether ``key`` (one key, not a dotted path) names a secret (see the module docstring)."""
    words = _CAMEL.sub("_", str(key)).replace("-", "_")
    if _SECRET_WORDS.search(words):
        return True
    *before, last = [w for w in words.lower().split("_") if w] or [""]
    return last == "key" and bool(before) and before[-1] not in NAMING_KEYS


def _hidden(path: Sequence[str]) -> bool:
    """Whether the value at ``path`` (its keys from the top) is a secret: a key on the path names
    one, or it is (or sits in) an environment mapping."""
    return any(secret_key(k) or k in ENV_MAPPINGS for k in path)


def _redact(value: Any, path: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _redact(v, (*path, str(k))) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v, path) for v in value]
    if value is None or isinstance(value, bool):
        return value
    if _hidden(path):
        return REDACTED
    return redact_override(value) if isinstance(value, str) else value


def redact(config: Any, key: str = "") -> Any:
    """A copy of ``config`` (plain dicts, lists and scalars) with every secret replaced by
    :data:`REDACTED`; ``key``: where ``config`` sits (a dotted path, e.g. ``a.password``)."""
    return _redact(config, tuple(key.split(".")) if key else ())


def _pair(text: str, head: re.Match[str]) -> bool:
    """Whether ``head`` starts a pair (see :data:`_PAIR_HEAD`)."""
    if head["sep"] == "=" or head["quote"] or head["space"]:
        return True
    i = head.start() - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    return "." not in head["name"] and i >= 0 and text[i] in "{,"


def _uri_users_redacted(word: re.Match[str]) -> str:
    """A whitespace-free ``word`` holding an '@' with the passwords, tokens and http(s) users of
    its URIs redacted."""
    text = _URI_PASSWORD.sub(rf"\1\2{REDACTED}@", word[0])
    text = _URI_TOKEN_USER.sub(rf"\1{REDACTED}@", text)
    return _URI_HTTP_USER.sub(rf"\1{REDACTED}@", text)


def redact_text(text: str) -> str:
    """``text`` with credentials (by their shape), URI passwords, tokens and http(s) users and
    the values of ``name=value``/``name: value`` pairs whose name is a secret replaced by
    :data:`REDACTED` (for free text: log lines, error messages)."""
    text = _TOKEN.sub(REDACTED, text)
    text = _WEBHOOK.sub(rf"\1/{REDACTED}", text)
    text = _WORD_WITH_AT.sub(_uri_users_redacted, text)
    out, pos = [], 0
    while (head := _PAIR_HEAD.search(text, pos)) is not None:
        out.append(text[pos : head.end()])
        pos = head.end()
        if _pair(text, head) and _hidden(head["name"].split(".")):
            value = _VALUE.match(text, pos)
            if value is not None:
                out.append(REDACTED)
                pos = value.end()
    return "".join(out) + text[pos:]


def redact_override(override: str) -> str:
    """A Hydra ``key=value`` override with its value redacted when the key is a secret (or an
    environment mapping), else with :func:`redact_text` applied to the value; other text:
    :func:`redact_text`."""
    match = _OVERRIDE.fullmatch(override)
    if match is None:
        return redact_text(override)
    path = match["key"].lstrip("~+").split(".")
    if _hidden(path):
        return f"{match['key']}={REDACTED}"
    return f"{match['key']}={redact_text(match['value'])}"


def _marked(value: Any, path: str) -> list[str]:
    if isinstance(value, dict):
        return [k for key, v in value.items() for k in _marked(v, f"{path}.{key}".lstrip("."))]
    if isinstance(value, (list, tuple)):
        return [k for i, v in enumerate(value) for k in _marked(v, f"{path}.{i}")]
    return [path] if isinstance(value, str) and REDACTED in value else []


def refuse_redacted(config: dict[str, Any]) -> None:
    """Raise a one-line :class:`ConfigError` naming the keys whose value holds :data:`REDACTED`
    (a saved config's secret, which a resumed run must be given again)."""
    keys = _marked(config, "")
    if keys:
        raise ConfigError(
            f"{', '.join(keys)} (saved as {REDACTED}: secrets are never recorded): give"
            f" {'them' if len(keys) > 1 else 'it'} again on the command line, or a value that"
            ' takes the secret from an environment variable (see README, "Credentials")'
        )


class RedactingFormatter(logging.Formatter):
    """A log formatter whose lines (tracebacks included) go through :func:`redact_text`, then
    :func:`~border_py.errors.printable`: plain text whatever a call site passes (a record's
    newlines and tabs stay), as :class:`~border_py.errors.TextFormatter` gives."""

    def format(self, record: logging.LogRecord) -> str:
        """The formatted record, redacted and escaped."""
        return printable(redact_text(super().format(record)))
