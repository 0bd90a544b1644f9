"""Credentials and private spans taken out of a message before it is stored.

Palimpsest keeps every message verbatim, with one exception, made here: agents paste
keys and tokens into conversations, and a memory that keeps them forever, searchable
and shared over HTTP or a team's Neo4j, would leak them to every reader it has. So
before a message is hashed and stored (``prepare.prepare_append``, which every write
passes through: the ``append_messages`` tool, ``ingest`` and every hook):

- a well-known credential becomes ``[secret:KIND:HASH8]``, where HASH8 is the first 8
  hex digits of the credential's SHA-256: two mentions of one key still read as the
  same key, and whoever holds the key can check which one it was, but the store cannot
  give it back. ``PALIMPSEST_REDACT=off`` stores credentials as they are.
- text between ``<private>`` and ``</private>`` (tags included, any case) becomes
  ``[private]``, whatever ``PALIMPSEST_REDACT`` says: the writer asked for it. An
  opening tag without a closing one hides the rest of the message.

The patterns are the prefixes and shapes the issuers document (AWS key ids, GitHub
and GitLab tokens, OpenAI and Anthropic keys, PEM private key blocks, bearer tokens in
an Authorization header), so ordinary prose does not match them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass

from palimpsest.graph_schema.errors import InvalidInput

#: The variable that turns secret redaction off (``off``) or on (``on``, the default).
REDACT_VARIABLE = "PALIMPSEST_REDACT"

PRIVATE_MARK = "[private]"

_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)

#: KIND -> the strings one of which a credential of that kind holds (lowercase for the
#: case-blind bearer header), and its pattern; a ``secret`` group, where present, is
#: the part replaced (the header name before a bearer token stays readable). The
#: strings are looked for first: a plain ``in`` costs microseconds where a pattern
#: starting with ``\b`` scans the text at Python speed, which made ingest 8 times slower.
_SECRETS: dict[str, tuple[tuple[str, ...], re.Pattern[str]]] = {
    "private-key": (
        ("PRIVATE KEY",),
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r".*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    "aws-access-key": (("AKIA", "ASIA", "ABIA", "ACCA"), re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b")),
    "github-token": (
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ),
    "gitlab-token": (
        ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glsoat-"),
        re.compile(r"\bgl(?:pat|dt|rt|ptt|cbt|soat)-[A-Za-z0-9_\-]{20,255}"),
    ),
    "anthropic-key": (("sk-ant-",), re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,255}")),
    "openai-key": (("sk-",), re.compile(r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,255}")),
    "bearer-token": (
        ("bearer",),
        re.compile(
            r"\bauthorization[\"']?\s*[:=]\s*[\"']?\s*bearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{8,}=*)", re.IGNORECASE
        ),
    ),
}
_CASE_BLIND = {"bearer-token"}


@dataclass(frozen=True)
class Redacted:
    """A message's text as stored, and how many credentials and private spans left it."""

    text: str
    secrets: int
    private_spans: int


def redaction_on() -> bool:
    """Whether credentials are replaced: ``PALIMPSEST_REDACT`` is ``on`` (default) or ``off``.

    :raises InvalidInput: for any other value, so a typo never stores secrets silently.
    """
    value = os.environ.get(REDACT_VARIABLE, "on").strip().lower()
    if value not in ("on", "off"):
        raise InvalidInput(f"{REDACT_VARIABLE} must be 'on' or 'off', got {value!r}")
    return value == "on"


def secret_mark(kind: str, secret: str) -> str:
    """What a credential becomes: its kind and the first 8 hex digits of its SHA-256."""
    return f"[secret:{kind}:{hashlib.sha256(secret.encode('utf-8')).hexdigest()[:8]}]"


def redact(text: str, *, secrets: bool = True) -> Redacted:
    """``text`` with its private spans, and its credentials when ``secrets``, replaced."""
    private_spans = 0
    if "<private>" in text.lower():
        text, private_spans = _PRIVATE.subn(PRIVATE_MARK, text)
    found = 0
    if secrets:
        lowered = text.lower()
        for kind, (needles, pattern) in _SECRETS.items():
            haystack = lowered if kind in _CASE_BLIND else text
            if any(needle in haystack for needle in needles):
                text, count = pattern.subn(functools.partial(_replace, kind), text)
                found += count
    return Redacted(text=text, secrets=found, private_spans=private_spans)


def _replace(kind: str, match: re.Match[str]) -> str:
    if "secret" not in match.re.groupindex:
        return secret_mark(kind, match.group(0))
    start, end = match.span("secret")
    whole = match.group(0)
    offset = match.start()
    return whole[: start - offset] + secret_mark(kind, match.group("secret")) + whole[end - offset :]
