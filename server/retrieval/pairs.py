"""A tool call and its result as one hit: "what did we run" and "what happened" are one answer.

A coding session stores a tool call (an assistant message whose ``tool_call_id`` is
the call's id, ``Bash {"command": ...}``) and its result (a ``tool`` message with the
same ``tool_call_id``) as two messages. A search finds one or the other, by the
command's words or by the output's, and a caller who found the command still has to
look for what it printed, or the other way round. Here each message hit that is half
of such a pair gets the other half's id, caller id and a snippet of it
(``paired_id``, ``paired_source_id``, ``paired_snippet``), and the other half, if the
search found it too, is dropped from further down the list: one ranked hit, where the
better-ranked half stands.

The other half is looked for in the thread near the hit
(`palimpsest.scheduler.search_text.other_half`: a result follows its call within a few
messages, a turn's parallel calls coming before their results), so one bounded read of
the thread finds it, with no index of call ids in the store. A result is any ``tool``
message with a ``tool_call_id``; a call is an assistant message whose metadata says it
is one (`palimpsest.scheduler.search_text.is_call`), so that plain assistant turns, most
of a chat's hits, cost no read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, Self, TypeVar

from palimpsest.graph_schema.models import Message, MessageRef, Role, SearchKind
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.search_text import is_call, other_half

#: Characters of the other half kept at each end of its snippet: a result's first lines
#: say what ran, its last ones how it ended (a summary line, an exit status).
PAIRED_SNIPPET_END = 160


class Pairable(Protocol):
    """A ranked hit that can carry its other half (`palimpsest.server.retrieval.grep.GrepHit`)."""

    id: str
    kind: SearchKind
    partition: str
    role: Role | None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self: ...


Hit = TypeVar("Hit", bound=Pairable)


def paired_snippet(content: str) -> str:
    """The other half's head and tail, so a call's hit shows how its result ended."""
    if len(content) <= 2 * PAIRED_SNIPPET_END + 3:
        return content
    return f"{content[:PAIRED_SNIPPET_END]} … {content[-PAIRED_SNIPPET_END:]}"


async def partners(store: MemoryStore, hits: Sequence[Pairable]) -> dict[str, Message]:
    """The other half of each message hit that is a tool call or a tool result, by hit id.

    One `MemoryStore.message_refs` read for the hits that may be halves, then one
    bounded `MemoryStore.get_messages` read per call or result, concurrently.
    """
    maybe = [hit for hit in hits if hit.kind == "message" and hit.role in (Role.assistant, Role.tool)]
    if not maybe:
        return {}
    refs: list[MessageRef] = []
    for partition in sorted({hit.partition for hit in maybe}):
        refs += await store.message_refs(partition, [hit.id for hit in maybe if hit.partition == partition])
    halves = [ref for ref in refs if ref.role is Role.tool or is_call(ref)]
    found = await asyncio.gather(*(other_half(store, ref) for ref in halves))
    return {ref.id: other for ref, (_, other) in zip(halves, found, strict=True) if other is not None}


async def pair_hits(store: MemoryStore, hits: Sequence[Hit], limit: int) -> list[Hit]:
    """The hits with each call or result carrying its other half, each pair once, at most ``limit``.

    Ranked as given; a half whose partner already stands higher is dropped, so a search
    that found both returns one hit and fills the list from further down. Partners are
    read a ``limit`` of hits at a time, only as far down as the list is needed.
    """
    shown: set[str] = set()
    kept: list[Hit] = []
    start = 0
    while start < len(hits) and len(kept) < limit:
        chunk = hits[start : start + limit]
        start += limit
        other = await partners(store, chunk)
        for hit in chunk:
            if hit.id in shown:
                continue
            shown.add(hit.id)
            partner = other.get(hit.id)
            if partner is not None and partner.id not in shown:  # shown higher, unpaired: this one stays whole
                shown.add(partner.id)
                hit = hit.model_copy(
                    update={
                        "paired_id": partner.id,
                        "paired_source_id": partner.source_id,
                        "paired_snippet": paired_snippet(partner.content),
                    }
                )
            kept.append(hit)
            if len(kept) == limit:
                break
    return kept
