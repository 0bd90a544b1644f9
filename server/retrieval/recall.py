"""Recall: what memory holds about a query, facts, summaries and messages ranked together.

``grep_memories`` answers "where does this text occur"; ``recall`` answers "what do we
know about this", across every thread of a partition (optionally one project). It
searches each kind of node apart (their scores are not comparable: each kind has its
own index statistics), then fuses the three rankings by weighted reciprocal rank, so
the best fact, the best message and the best summary all come near the top and a kind
never drowns the others. Facts weigh most (they are what extraction judged worth
keeping), messages next (verbatim evidence), summaries last (context around it).

A tool call and its result come as one message, carrying the other half's ids
(`palimpsest.server.retrieval.pairs`, through `grep_memories`).

Superseded facts are left out unless asked for; then every current fact ranks above
every superseded one. The search itself is one injectable function (`Search`):
by default `grep_memories` without a mode, which is hybrid when the caller passes an
embedder and vectors exist, else text; the result says which (``mode``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import Fact, Role, SearchKind, UtcDatetime
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import Embedder
from palimpsest.server.retrieval.grep import MAX_QUERY_CHARS, GrepHit, GrepMode, grep_memories

#: Most items one recall returns, all three lists together.
MAX_RECALL = 100
#: Candidates searched per kind, as a multiple of ``limit`` (filters drop some).
OVERFETCH = 3
#: With a project filter more candidates are dropped, so more are searched.
PROJECT_OVERFETCH = 6
#: Threads of a partition looked at to find a project's.
PROJECT_THREADS = 100_000
#: Reciprocal-rank constant: small, so the first few of each kind dominate.
RRF_K = 5.0
#: How much the n-th hit of each kind is worth relative to the n-th of another.
KIND_WEIGHTS: dict[SearchKind, float] = {"fact": 1.2, "message": 1.0, "summary": 0.9}
#: A superseded fact, when asked for, counts this much of a current one.
SUPERSEDED_WEIGHT = 0.5

#: How recall searched: hybrid (words and meaning) for any kind, else text; custom for a caller's search.
RecallMode = Literal["hybrid", "text", "custom"]

#: ``(query, kind, limit) -> hits``, best first: how recall searches one kind of node.
Search = Callable[[str, SearchKind, int], Awaitable[list[GrepHit]]]


class RecalledFact(BaseModel):
    """A fact with its provenance: the messages it was extracted from."""

    id: str
    text: str
    kind: str
    subject: str | None
    project: str | None
    thread_id: str | None
    created_at: UtcDatetime
    valid_until: UtcDatetime | None = Field(None, description="Set when a newer fact superseded it.")
    superseded_by: str | None = None
    source_message_ids: list[str]
    rank: int = Field(description="Position among everything recalled, 1 = most relevant.")
    score: float


class RecalledSummary(BaseModel):
    """A summary hit: expand_summary(id) gives back what it covers."""

    id: str
    thread_id: str | None
    level: int | None
    snippet: str
    created_at: UtcDatetime
    covered_by: list[str] = Field(description="Higher summaries above it, lowest level first.")
    rank: int
    score: float


class RecalledMessage(BaseModel):
    """A message hit, with the caller's id and the summaries that fold it."""

    id: str
    source_id: str | None
    thread_id: str | None
    role: Role | None
    snippet: str
    created_at: UtcDatetime
    covered_by: list[str] = Field(description="Summaries above it, lowest level first.")
    paired_id: str | None = Field(None, description="For a tool call, its result; for a tool result, its call.")
    paired_source_id: str | None = Field(None, description="The caller's message_id of the other half.")
    paired_snippet: str | None = Field(None, description="The other half's head and tail.")
    rank: int
    score: float


class RecallResult(BaseModel):
    """Facts, summaries and messages about a query; ``rank`` orders them all together."""

    query: str
    partition: str
    project: str | None
    mode: RecallMode = Field(
        description="How it searched: hybrid (words and meaning) if any kind was searched so, else text; "
        "custom for a caller's own search."
    )
    facts: list[RecalledFact]
    summaries: list[RecalledSummary]
    messages: list[RecalledMessage]


def text_search(store: MemoryStore, partition: str) -> Search:
    """Ranked full text, one kind at a time, in one partition: recall without an embedder."""
    return default_search(store, partition, None, set())


def default_search(store: MemoryStore, partition: str, embedder: Embedder | None, ran: set[GrepMode]) -> Search:
    """The default search of recall: `grep_memories` without a mode, one kind at a time, in one partition.

    With an embedder that is hybrid where the kind has vectors, else text; each mode
    that ran is added to ``ran``.
    """

    async def search(query: str, kind: SearchKind, limit: int) -> list[GrepHit]:
        mode: GrepMode | None = None if embedder is not None else "text"
        result = await grep_memories(
            store, query, partition=partition, mode=mode, kinds=(kind,), limit=limit, embedder=embedder
        )
        ran.add(result.mode)
        return result.hits

    return search


async def recall(
    store: MemoryStore,
    query: str,
    *,
    partition: str,
    project: str | None = None,
    limit: int = 10,
    include_superseded: bool = False,
    search: Search | None = None,
    embedder: Embedder | None = None,
) -> RecallResult:
    """Facts, summaries and messages relevant to ``query`` in every thread of a partition.

    Args:
        store: The store to read.
        query: What to recall, in words.
        partition: The partition searched (all its threads).
        project: Only facts of this project and nodes of its threads.
        limit: Most items returned, all three lists together.
        include_superseded: Also return superseded facts, after every current one.
        search: How one kind is searched; default `default_search` with ``embedder``.
        embedder: Makes the default search hybrid where vectors exist (None: text).

    Raises:
        InvalidInput: for an empty or over-long query or a limit outside 1..``MAX_RECALL``.
    """
    if not query.strip():
        raise InvalidInput("query must not be empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query is longer than {MAX_QUERY_CHARS} characters")
    if not 1 <= limit <= MAX_RECALL:
        raise InvalidInput(f"limit must be between 1 and {MAX_RECALL}, got {limit}")
    ran: set[GrepMode] = set()
    find = search or default_search(store, partition, embedder, ran)
    threads: set[str] | None = None
    if project is not None:
        threads = {t.id for t in await store.list_threads(partition, limit=PROJECT_THREADS) if t.project == project}
    fetch = limit * (OVERFETCH if project is None else PROJECT_OVERFETCH)

    def in_scope(hit: GrepHit) -> bool:
        return threads is None or hit.thread_id in threads

    messages = [hit for hit in await find(query, "message", fetch) if in_scope(hit)]
    summaries = [hit for hit in await find(query, "summary", fetch) if in_scope(hit)]
    fact_hits = await find(query, "fact", fetch)
    stored = {fact.id: fact for fact in await store.get_facts(partition, [hit.id for hit in fact_hits])}
    facts = [
        (hit, stored[hit.id])
        for hit in fact_hits
        if hit.id in stored
        and (project is None or stored[hit.id].project == project)
        and (include_superseded or stored[hit.id].valid_until is None)
    ]
    facts.sort(key=lambda pair: pair[1].valid_until is not None)  # stable: current first, each in search order

    ranked = [
        _Ranked(score=_fact_weight(fact) / (RRF_K + position), hit=hit, fact=fact)
        for position, (hit, fact) in enumerate(facts, start=1)
    ]
    others: tuple[tuple[SearchKind, list[GrepHit]], ...] = (("message", messages), ("summary", summaries))
    for kind, hits in others:
        ranked += [
            _Ranked(score=KIND_WEIGHTS[kind] / (RRF_K + position), hit=hit)
            for position, hit in enumerate(hits, start=1)
        ]
    ranked.sort(key=lambda item: (-item.score, _KIND_ORDER[item.hit.kind], item.hit.id))
    mode: RecallMode = "custom" if search else "hybrid" if "hybrid" in ran else "text"
    return _split(query, partition, project, mode, ranked[:limit])


_KIND_ORDER: dict[SearchKind, int] = {"fact": 0, "message": 1, "summary": 2}


def _fact_weight(fact: Fact) -> float:
    """A fact's kind weight, halved (``SUPERSEDED_WEIGHT``) once a newer fact replaced it."""
    return KIND_WEIGHTS["fact"] * (SUPERSEDED_WEIGHT if fact.valid_until is not None else 1.0)


@dataclass(frozen=True)
class _Ranked:
    """One candidate of the fused ranking: its fused score, its hit, and the fact behind a fact hit."""

    score: float
    hit: GrepHit
    fact: Fact | None = None


def _split(
    query: str, partition: str, project: str | None, mode: RecallMode, ranked: Sequence[_Ranked]
) -> RecallResult:
    """The fused ranking cut into the three lists, each item keeping its overall rank."""
    result = RecallResult(
        query=query, partition=partition, project=project, mode=mode, facts=[], summaries=[], messages=[]
    )
    for rank, item in enumerate(ranked, start=1):
        hit = item.hit
        if item.fact is not None:
            fields = item.fact.model_dump(include=set(RecalledFact.model_fields) - {"rank", "score"})
            result.facts.append(RecalledFact(**fields, rank=rank, score=item.score))
        elif hit.kind == "summary":
            result.summaries.append(
                RecalledSummary(
                    id=hit.id, thread_id=hit.thread_id, level=hit.level, snippet=hit.snippet,
                    created_at=hit.created_at, covered_by=hit.covered_by, rank=rank, score=item.score,
                )
            )  # fmt: skip
        else:
            result.messages.append(
                RecalledMessage(
                    id=hit.id, source_id=hit.source_id, thread_id=hit.thread_id, role=hit.role,
                    snippet=hit.snippet, created_at=hit.created_at, covered_by=hit.covered_by,
                    paired_id=hit.paired_id, paired_source_id=hit.paired_source_id,
                    paired_snippet=hit.paired_snippet, rank=rank, score=item.score,
                )
            )  # fmt: skip
    return result
