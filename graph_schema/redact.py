"""Credentials and private spans taken out of a message before it is stored.

Palimpsest keeps every message verbatim, with one exception, made here: agents paste
keys and tokens into conversations, and a memory that keeps them forever, searchable
and shared over HTTP or a team's Neo4j, would leak them to every reader it has. So
before a message is hashed and stored (``prepare.prepare_append``, which every write
passes through: the ``append_messages`` tool, ``ingest`` and every hook), its content
and every string of its metadata, keys included, however deep (``redact_json``: the
feeds keep whole records and blocks there, a Gemini ``display_content``, a Claude
``document``):

- a well-known credential becomes ``[secret:KIND:HASH8]``, where HASH8 is the first 8
  hex digits of the credential's SHA-256: two mentions of one key still read as the
  same key, and whoever holds the key can check which one it was, but the store cannot
  give it back. ``PALIMPSEST_REDACT=off`` stores credentials as they are.
- text between ``<private>`` (or ``<private reason="...">``) and ``</private>`` (tags
  included, any case) becomes ``[private]``, whatever ``PALIMPSEST_REDACT`` says: the
  writer asked for it. An opening tag without a closing one hides the rest of the text.

The patterns are the prefixes and shapes the issuers document, so ordinary prose does
not match them; where a shape alone is too loose (a bare ``sk-``, a header value, a
URL's password) a check on the value keeps placeholders (``Bearer YOUR_TOKEN``,
``user:$PASSWORD@``) and kebab-case words readable. A Stripe publishable key
(``pk_live_``) is left alone: it is made to be published in web pages. Tokens are found
in JSON-escaped text too (``\\"Authorization\\": \\"Bearer ...\\"`` in a recorded
``Write`` of an ``.mcp.json``, a key after an escaped ``\\n``), since agents' tool calls
are stored as JSON.

Why hand-written patterns rather than a detector library: redaction runs on every
message of every hook, and ``detect-secrets`` (the well-kept Python one) costs 165 ms to
import, took 0.56 s over 84 kB of plain prose, flagged 700 false positives in it (its
entropy plugins) and reports a GitHub token's value as ``ghp``, so it can neither run
per message nor say what to replace. Here most patterns begin with a literal prefix,
so one search jumps to candidates in C (a leading ``\\b`` made the engine try every
position, 60 times slower); the others (case-blind, or opening on a choice of common
letters) wait for a plain ``in`` on the lowercased text; only a text a search matched
is rewritten, and a token that must start a word is checked at the match: about 5 µs
for a short message, 1.3 ms for 100 kB of prose.

Redaction is a pure function of the text: the same input gives the same stored bytes,
so a re-ingest finds its messages already there.
"""

from __future__ import annotations

import binascii
import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from palimpsest.graph_schema.errors import InvalidInput

#: The variable that turns secret redaction off (``off``) or on (``on``, the default).
REDACT_VARIABLE = "PALIMPSEST_REDACT"

PRIVATE_MARK = "[private]"

_PRIVATE = re.compile(r"<private(?:\s[^<>]*)?(?<!/)>.*?(?:</private\s*>|\Z)", re.IGNORECASE | re.DOTALL)

#: Between a header or variable name and its value: quotes (JSON-escaped or not), a
#: closing bracket, blanks, then ``:``, ``=``, ``=>`` or blanks alone.
_SEP = r"""(?=[\\"'\]\s:=])[\\"'\]\s]*(?:=>|[:=])?[\\"'\s]*"""


def _has_digit_or_mixed_case(value: str) -> bool:
    """Whether a value looks generated rather than written: a digit, or both cases.

    Keeps ``Bearer YOUR_TOKEN_HERE`` and ``Bearer authentication`` as written, while a
    random alphanumeric token of 20 characters misses both once in about 17 million.
    """
    return any(c.isdigit() for c in value) or (any(c.isupper() for c in value) and any(c.islower() for c in value))


def _sk_key(value: str) -> bool:
    """Whether an ``sk-`` match is a key: a project, service or admin key, or a generated-looking one.

    A bare ``sk-`` key (OpenAI's older ones, OpenRouter's, LiteLLM's) has a part of 8
    characters or more mixing letters and digits; a kebab-case name after ``sk-``
    (``sk-learning-rate-experiments``) does not.
    """
    if value.startswith(("sk-proj-", "sk-svcacct-", "sk-admin-")):
        return True
    return any(
        len(part) >= 8 and any(c.isdigit() for c in part) and any(c.isalpha() for c in part)
        for part in re.split(r"[-_]", value[3:])
    )


def _basic_credentials(value: str) -> bool:
    """Whether a ``Basic`` header value decodes as ``user:password``, as the scheme defines it."""
    try:
        decoded = binascii.a2b_base64(value + "=" * (-len(value) % 4), strict_mode=True)
    except binascii.Error:
        return False
    return b":" in decoded


@dataclass(frozen=True)
class _Rule:
    """One kind of credential: how it is looked for, and which matches are one.

    ``needles``: where given, strings one of which the lowercased text must hold before
    the pattern runs, for a pattern whose start the engine cannot jump to (a case-blind
    one, or one starting with a choice of common letters); the others begin with a
    literal the engine finds as fast as ``in`` would. A ``secret`` group, where the
    pattern has one, is the part replaced (the header name before a token stays
    readable). ``word_start``: the match must begin a word, or follow an escape such as
    ``\\n``. ``valid``: a check the secret (the whole match without a ``secret`` group)
    must pass. ``key`` and ``value``, for a credential known by the name before it: in
    metadata the name is a dict key and the value its string (``{"Authorization":
    "Bearer ..."}``), which no pattern over one string would see together.
    """

    pattern: re.Pattern[str]
    needles: tuple[str, ...] = ()
    word_start: bool = False
    valid: Callable[[str], bool] | None = None
    key: re.Pattern[str] | None = None
    value: re.Pattern[str] | None = None


def _named(name: str, value: str, needles: tuple[str, ...], valid: Callable[[str], bool]) -> _Rule:
    """A credential known by its name: ``NAME: VALUE`` in text, VALUE under a key holding NAME in metadata."""
    return _Rule(
        re.compile(name + _SEP + value, re.IGNORECASE),
        needles,
        valid=valid,
        key=re.compile(name, re.IGNORECASE),
        value=re.compile(r"""[\\"'\s]*""" + value, re.IGNORECASE),
    )


#: KIND -> its rule, tried in this order: an issuer's own shape before the generic
#: header and URL forms, so a GitHub token in a clone URL reads as a GitHub token.
_RULES: dict[str, _Rule] = {
    "private-key": _Rule(
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r".*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    "aws-access-key": _Rule(re.compile(r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"), word_start=True),
    "aws-secret-key": _named(
        r"(?:secret[_\-.]?access[_\-.]?key|aws[_\-.]?secret(?:[_\-.]?key)?)",
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        ("secret_access", "secretaccess", "secret-access", "secret.access", "aws_secret", "aws-secret", "awssecret"),
        _has_digit_or_mixed_case,
    ),
    "github-token": _Rule(
        re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
        word_start=True,
    ),
    "gitlab-token": _Rule(
        re.compile(r"gl(?:pat|dt|rt|ptt|cbt|soat)-[A-Za-z0-9_\-]{20,255}"),
        word_start=True,
    ),
    "anthropic-key": _Rule(re.compile(r"sk-ant-[A-Za-z0-9_\-]{20,255}"), word_start=True),
    "openai-key": _Rule(
        re.compile(r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,255}"),
        word_start=True,
        valid=_sk_key,
    ),
    "slack-token": _Rule(
        re.compile(r"(?:xox[abposre](?:\.xox[bp])?|xapp)-\d+-[A-Za-z0-9\-]{8,255}"),
        word_start=True,
    ),
    "slack-webhook": _Rule(
        re.compile(r"hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9+/_\-]{20,})"),
    ),
    "stripe-key": _Rule(
        re.compile(r"[sr]k_(?:live|test)_[A-Za-z0-9]{10,247}\b"), ("k_live_", "k_test_"), word_start=True
    ),
    "google-api-key": _Rule(re.compile(r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), word_start=True),
    "npm-token": _Rule(re.compile(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), word_start=True),
    "jwt": _Rule(re.compile(r"eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"), word_start=True),
    "bearer-token": _named(
        "authorization", r"bearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{8,}=*)", ("authorization",), _has_digit_or_mixed_case
    ),
    "basic-auth": _named(
        "authorization",
        r"basic\s+(?P<secret>[A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])",
        ("authorization",),
        _basic_credentials,
    ),
    # scheme://user:password@host; a placeholder ($VAR, ${VAR}, <pw>, {pw}, ***) or a
    # mark already made is no password.
    "url-password": _Rule(
        re.compile(r"://[^\s/:@\"'\\<>\[\]]*:(?P<secret>(?![$<{\[*])[^\s/@\"'\\<>]+)@(?=[^\s/@\"'\\<>])")
    ),
}


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
    lowered = text.lower()
    private_spans = 0
    if "<private" in lowered:
        text, private_spans = _PRIVATE.subn(PRIVATE_MARK, text)
        if private_spans:
            lowered = text.lower()
    found = 0
    if secrets:
        for kind, rule in _RULES.items():
            if _candidate(rule, text, lowered):
                text, count = _apply(kind, rule, text)
                if count:
                    found += count
                    lowered = text.lower()
    return Redacted(text=text, secrets=found, private_spans=private_spans)


def redact_json(value: Any, *, secrets: bool = True) -> tuple[Any, int]:
    """``value`` (a message's metadata) with every string in it redacted, and the credentials found.

    Dict keys are strings like any other (a hook once kept file paths as keys), and a
    key that names a credential (``Authorization``, ``AWS_SECRET_ACCESS_KEY``) has its
    string value read as what follows that name. All its
    strings are looked through at once first, joined: a feed's metadata is a dozen
    short strings, and one look costs what one string's does, where redacting each
    would cost a dozen. What holds nothing to redact is returned as the same object;
    values that are not JSON are left for the store's encoding to refuse.

    :raises RecursionError: if it is nested past Python's recursion limit (or holds itself).
    """
    joined = "\x00".join(_strings(value))
    lowered = joined.lower()
    suspect = any(
        (rule.key is not None and _has_needle(rule, lowered)) or _candidate(rule, joined, lowered)
        for rule in _RULES.values()
    )
    if "<private" not in lowered and not (secrets and suspect):
        return value, 0
    found = [0]
    return _walk(value, secrets, found), found[0]


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value, dict keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _walk(value: Any, secrets: bool, found: list[int]) -> Any:
    """``value`` with each of its strings redacted, and the same object where nothing changed."""
    if isinstance(value, str):
        redacted = redact(value, secrets=secrets)
        if not (redacted.secrets or redacted.private_spans):
            return value
        found[0] += redacted.secrets
        return redacted.text
    if isinstance(value, dict):
        pairs = []
        for key, item in value.items():
            new = _walk(item, secrets, found)
            if secrets and isinstance(key, str) and isinstance(new, str):
                new = _redact_named(key, new, found)
            pairs.append((_walk(key, secrets, found), new))
        if all(
            new_key is key and new is item for (new_key, new), (key, item) in zip(pairs, value.items(), strict=True)
        ):
            return value
        return dict(pairs)
    if isinstance(value, list | tuple):
        items = [_walk(item, secrets, found) for item in value]
        return value if all(new is item for new, item in zip(items, value, strict=True)) else items
    return value


def _redact_named(key: str, value: str, found: list[int]) -> str:
    """A metadata string redacted as what its key names it (``{"AWS_SECRET_ACCESS_KEY": "..."}``)."""
    lowered = key.lower()
    for kind, rule in _RULES.items():
        if rule.key is None or rule.value is None or not _has_needle(rule, lowered) or not rule.key.search(key):
            continue
        match = rule.value.match(value)
        if match is not None and (rule.valid is None or rule.valid(match.group("secret"))):
            found[0] += 1
            value = _marked(kind, match) + value[match.end() :]
    return value


def _has_needle(rule: _Rule, lowered: str) -> bool:
    return any(needle in lowered for needle in rule.needles)


def _candidate(rule: _Rule, text: str, lowered: str) -> bool:
    """Whether ``rule``'s pattern matches somewhere in ``text``: a search, cheaper than a replacement.

    Also true of several strings joined by ``\\x00`` when it is true of any one: no
    pattern's end depends on what follows the end of a string but as a non-word
    character would.
    """
    if rule.needles and not _has_needle(rule, lowered):
        return False
    return rule.pattern.search(text) is not None


def _starts_word(text: str, start: int) -> bool:
    """Whether a token at ``start`` begins a word: nothing before it, a non-word character, or an escape (``\\n``)."""
    if start == 0:
        return True
    before = text[start - 1]
    if not (before.isalnum() or before == "_"):
        return True
    return start >= 2 and text[start - 2] == "\\" and before in "nrt"


def _apply(kind: str, rule: _Rule, text: str) -> tuple[str, int]:
    """``text`` with each match of ``rule`` that is a credential replaced, and how many were."""
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        whole = match.group(0)
        if rule.word_start and not _starts_word(match.string, match.start()):
            return whole
        secret = match.group("secret") if "secret" in match.re.groupindex else whole
        if rule.valid is not None and not rule.valid(secret):
            return whole
        count += 1
        return _marked(kind, match)

    return rule.pattern.sub(replace, text), count


def _marked(kind: str, match: re.Match[str]) -> str:
    """What ``match`` becomes: its credential (its ``secret`` group, or all of it) a mark, the rest as it was."""
    group: str | int = "secret" if "secret" in match.re.groupindex else 0
    start, end = match.span(group)
    text = match.string
    return text[match.start() : start] + secret_mark(kind, text[start:end]) + text[end : match.end()]
