"""Ids, content hashes, token estimates and words, computed the same way by every backend.

Ids are derived from identity rather than drawn at random so that a retried append or
a re-run compaction lands on the same node (idempotence without a lookup table), and
hashes form a Merkle DAG so `doctor` can prove a summary still covers exactly the
bytes it was made from.

Every id hashes its fields JSON-encoded (``_id_hex``), so no two different inputs meet:
a name may hold any character, the old ``\x1f`` separator included. Stores written
before that hashed the fields joined by ``\x1f`` (``_hex``); their ids stay as they
are, and appends find a repeated message by (partition, thread, caller id), never by
recomputing its id, so both kinds of id live side by side. The ``*_id_matches`` checks
(import and ``doctor``) take either kind as derived, the old one only where no field
holds the separator.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence

_SEP = "\x1f"
_WORD = re.compile(r"\w+")

#: What ``json.dumps(..., ensure_ascii=False)`` builds on every call, built once: the
#: same bytes, without paying for a new encoder per message at ingest.
_JSON = json.JSONEncoder(ensure_ascii=False)


def _hex(*parts: str) -> str:
    """A hash of fields that cannot hold ``_SEP`` (hex digests, numbers): the Merkle digests."""
    return hashlib.sha256(_SEP.join(parts).encode("utf-8")).hexdigest()


def _id_hex(*parts: str | int) -> str:
    """A hash of fields that may hold any character: JSON keeps their boundaries."""
    return hashlib.sha256(_JSON.encode(parts).encode("utf-8")).hexdigest()


def message_id(partition: str, thread_id: str, source_id: str) -> str:
    """The stored id of a message, stable for one (partition, thread, caller id)."""
    return "msg_" + _id_hex("message", partition, thread_id, source_id)[:32]


def summary_id(partition: str, thread_id: str, level: int, child_ids: Iterable[str]) -> str:
    """The id of a summary, stable for one set of children: a re-run proposes the same id."""
    return "sum_" + _id_hex("summary", partition, thread_id, level, *child_ids)[:32]


def fact_id(partition: str, text: str, source_message_id: str) -> str:
    """The id of a fact, stable for one text from one message."""
    return "fact_" + _id_hex("fact", partition, text, source_message_id)[:32]


def _legacy_id_hex(*parts: str) -> str | None:
    """The id hash of stores written before ``_id_hex``; None where a field holds ``_SEP``.

    Joined by ``_SEP``, fields that hold it meet other fields' ids, so such an old id
    proves nothing and is not taken as derived.
    """
    if any(_SEP in part for part in parts):
        return None
    return _hex(*parts)


def _derived(prefix: str, stored: str, current: str, legacy: str | None) -> bool:
    return stored == prefix + current[:32] or (legacy is not None and stored == prefix + legacy[:32])


def message_id_matches(stored: str, partition: str, thread_id: str, source_id: str) -> bool:
    """Whether ``stored`` is the id of this (partition, thread, caller id), as made now or before JSON ids.

    What an import checks before it trusts an archive's id, and ``doctor`` a store's: an
    id that is not derived could be another partition's future message, planted.
    """
    return _derived(
        "msg_",
        stored,
        _id_hex("message", partition, thread_id, source_id),
        _legacy_id_hex("message", partition, thread_id, source_id),
    )


def summary_id_matches(stored: str, partition: str, thread_id: str, level: int, child_ids: Sequence[str]) -> bool:
    """Whether ``stored`` is the id `summary_id` gives (now or before JSON ids) for these children."""
    return _derived(
        "sum_",
        stored,
        _id_hex("summary", partition, thread_id, level, *child_ids),
        _legacy_id_hex("summary", partition, thread_id, str(level), *child_ids),
    )


def fact_id_matches(stored: str, partition: str, text: str, source_message_ids: Sequence[str]) -> bool:
    """Whether ``stored`` is the id `fact_id` gives (now or before JSON ids) for one of these sources.

    A fact's id is over the source first proposed, and a stored fact lists its sources
    in seq order, so any of them may be the one.
    """
    return any(
        _derived(
            "fact_", stored, _id_hex("fact", partition, text, source), _legacy_id_hex("fact", partition, text, source)
        )
        for source in source_message_ids
    )


def message_sha256(
    partition: str,
    thread_id: str,
    source_id: str,
    role: str,
    content: str,
    tool_call_id: str | None,
) -> str:
    """The hash of a message's content and identity (invariant 4 of docs/architecture.md).

    JSON-encoding the fields keeps the hash unambiguous whatever bytes the content
    holds (no separator can be forged from inside a field).
    """
    payload = _JSON.encode([partition, thread_id, source_id, role, content, tool_call_id])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def summary_digest(level: int, child_digests: Iterable[str]) -> str:
    """The Merkle digest of a summary: over its children's hashes, in order."""
    return _hex("digest", str(level), *child_digests)


def estimate_tokens(text: str) -> int:
    """A cheap, deterministic token estimate (about four characters a token).

    Deterministic on purpose: invariant 6 (a summary is shorter than its sources) is
    checked with it, so it must never change between the write and the check.
    """
    return (len(text) + 3) // 4


def words(text: str) -> list[str]:
    """The words of a text as every search sees them: runs of letters, digits and ``_``.

    The one tokenizer: both stores' full-text queries and hybrid ranking split text
    here, so a word means the same thing wherever it is matched. Case is kept; callers
    that compare words lower them.
    """
    return _WORD.findall(text)
