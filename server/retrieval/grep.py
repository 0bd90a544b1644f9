"""Searching a partition's memory by words, by pattern or by meaning, for ``grep_memories``.

Text mode is the store's full-text index, asked for the query's words less question
and function words ("what", "did", "the": `palimpsest.server.retrieval.hybrid.text_query`),
which match almost every message and pull short chatty ones up; keeping them measured
5 points below plain BM25 on LoCoMo. Semantic mode embeds the query with the
server's embedder and asks the store for the nearest vectors (`MemoryStore.vector_search`).
Regex mode is here because no index answers a regular expression: it matches messages
and summaries in process with the ``regex`` package, whose ``timeout=`` bounds every
match, so a catastrophic pattern such as ``(a|aa)+$`` ends in a clear error instead of a
hung server. When the pattern holds a whole word that every match must contain, the
full-text index narrows the candidates first; otherwise the partition is scanned page by
page up to a cap.

Without a mode, a search is hybrid when the server has an embedder and the searched
nodes have vectors of its model, and text otherwise, and every result says which mode
ran. A store still being embedded (a new install over an old store, a backfill under
way) answers by text until its first vectors arrive, and an embedder that fails (logged)
answers by text too: a search that asked for no mode never fails for want of meaning.

Every hit says which summaries cover it (``covered_by``, lowest level first), so an agent
can go from a phrase to the summary that folded it and expand it back. In every mode a
tool call and its result are one hit, carrying the other half's ids and snippet
(`palimpsest.server.retrieval.pairs`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import regex
from pydantic import BaseModel, Field

from palimpsest.graph_schema.errors import Conflict, InvalidInput
from palimpsest.graph_schema.models import Message, Role, SearchHit, SearchKind, Summary, UtcDatetime
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import Embedder, EmbeddingFailed
from palimpsest.scheduler.embedding import query_vector
from palimpsest.server.retrieval.hybrid import NO_EMBEDDER as HYBRID_NO_EMBEDDER
from palimpsest.server.retrieval.hybrid import hybrid_or_text, hybrid_search, text_query
from palimpsest.server.retrieval.pairs import pair_hits

GrepMode = Literal["text", "regex", "semantic", "hybrid"]

logger = logging.getLogger(__name__)

#: Hits asked of the index per hit returned: a call and its result found both count once
#: (`palimpsest.server.retrieval.pairs`), and the list is filled from further down.
PAIR_OVERFETCH = 2
#: Longest query or pattern accepted.
MAX_QUERY_CHARS = 2000
#: Seconds one regex may spend on one message or summary.
REGEX_MATCH_TIMEOUT = 0.5
#: Seconds one regex search may spend matching in all.
REGEX_TOTAL_BUDGET = 10.0
#: Messages and summaries a regex search reads at most when it has to scan.
REGEX_SCAN_CAP = 50_000
#: Messages read from the store at a time while scanning.
SCAN_PAGE = 500
#: Threads a scan visits at most.
SCAN_THREADS = 10_000
#: Candidates taken from the full-text index before giving up on the prefilter.
PREFILTER_CAP = 500
#: Characters of context kept on each side of a regex match in its snippet.
SNIPPET_CONTEXT = 60
#: Characters of the match itself kept in a snippet.
SNIPPET_MATCH = 200

#: Why semantic mode cannot run, and how to make it.
NO_EMBEDDER = (
    "semantic search needs an embedder, and this server runs with PALIMPSEST_EMBEDDER=none: unset it (the "
    "built-in all-MiniLM-L6-v2 is the default) or set openai:MODEL, and restart the server"
)

# Words full-text analyzers may drop as stop words: never used as a prefilter.
_STOP_WORDS = frozenset("and are but for into not such that the their then there these they this was will with".split())


class GrepHit(BaseModel):
    """One hit of ``grep_memories``: where it is, a snippet, and what covers it."""

    id: str = Field(description="Stored id (msg_..., sum_..., fact_...).")
    source_id: str | None = Field(None, description="The caller's message_id, for messages.")
    kind: SearchKind
    thread_id: str | None
    partition: str
    level: int | None = Field(None, description="Summary level, for summaries.")
    role: Role | None = Field(None, description="Who wrote it, for messages.")
    created_at: UtcDatetime
    snippet: str
    score: float = Field(
        description="Higher is better: BM25 (text), cosine similarity -1..1 (semantic), 1.0 for every regex hit."
    )
    covered_by: list[str] = Field(default_factory=list, description="Summaries above this node, lowest level first.")
    paired_id: str | None = Field(
        None, description="For a tool call, its result; for a tool result, its call (the pair is one hit)."
    )
    paired_source_id: str | None = Field(None, description="The caller's message_id of the other half.")
    paired_snippet: str | None = Field(None, description="The other half's head and tail.")


class GrepResult(BaseModel):
    """The hits of one search, best first (text) or in thread order (regex)."""

    mode: GrepMode = Field(description="The mode that ran: the one asked for, or, asked for none, hybrid or text.")
    hits: list[GrepHit]
    truncated: bool = Field(False, description="A regex scan stopped at its cap before reading the whole partition.")


async def grep_memories(
    store: MemoryStore,
    query: str,
    *,
    partition: str | None,
    mode: GrepMode | None = None,
    thread_id: str | None = None,
    kinds: Sequence[SearchKind] = ("message", "summary"),
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 20,
    embedder: Embedder | None = None,
) -> GrepResult:
    """Search one partition (``None``: all) by words, by regular expression or by meaning.

    Args:
        store: The store to search.
        query: Words (text mode) or a ``regex``-package pattern (regex mode).
        partition: The partition to search; ``None`` crosses partitions explicitly.
        mode: None: hybrid when vectors exist, else text (see the module docstring); ``text``
            for the full-text index, ``regex`` for a pattern, ``semantic``
            for the nodes nearest the query's meaning (needs ``embedder``), ``hybrid``
            for both fused and re-ranked by context (`palimpsest.server.retrieval.hybrid`; needs
            ``embedder`` too, and without one refuses with InvalidInput rather than
            answering as text mode would).
        thread_id: Only this thread.
        kinds: Which nodes to search; regex mode searches messages and summaries.
        since: Only nodes created at or after this time.
        until: Only nodes created at or before this time.
        limit: Most hits returned.
        embedder: Embeds the query in semantic mode (the server's, from
            ``PALIMPSEST_EMBEDDER``).

    Raises:
        InvalidInput: for an empty or over-long query, an invalid pattern, a pattern
            that takes too long, ``since`` after ``until``, or semantic mode without
            an embedder.
        EmbeddingFailed: if semantic mode's embedder cannot embed the query.
        NotFound: if ``thread_id`` names no thread of the partition.
    """
    if not query.strip():
        raise InvalidInput("query must not be empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query is longer than {MAX_QUERY_CHARS} characters")
    if limit < 1:
        raise InvalidInput("limit must be at least 1")
    if since is not None and until is not None and since > until:
        raise InvalidInput("since must not be after until")
    if thread_id is not None:
        await store.get_thread(partition, thread_id)
    fetch = limit * PAIR_OVERFETCH
    if mode == "regex":
        found = await _grep_regex(store, query, partition, thread_id, kinds, since, until, fetch)
        return await _finish(store, found.mode, found.hits, limit, truncated=found.truncated)
    if mode == "semantic":
        if embedder is None:
            raise InvalidInput(NO_EMBEDDER)
        vector = await query_vector(store, embedder, query)
        hits = await store.vector_search(
            vector, partition=partition, thread_id=thread_id, kinds=kinds, since=since, until=until, limit=fetch
        )
        return await _finish(store, "semantic", [_hit(hit) for hit in hits], limit)
    if mode is None and embedder is not None:
        try:
            hits, ran = await hybrid_or_text(
                store, embedder, query, partition=partition, thread_id=thread_id, kinds=kinds, since=since,
                until=until, limit=fetch,
            )  # fmt: skip
        except (EmbeddingFailed, Conflict) as exc:
            logger.warning("searching by text only: %s", exc)  # no meaning to be had: text answers
        else:
            return await _finish(store, ran, [_hit(hit) for hit in hits], limit)
    if mode == "hybrid":
        if embedder is None:
            raise InvalidInput(HYBRID_NO_EMBEDDER)
        hits = await hybrid_search(
            store, embedder, query, partition=partition, thread_id=thread_id, kinds=kinds, since=since,
            until=until, limit=fetch,
        )  # fmt: skip
        return await _finish(store, "hybrid", [_hit(hit) for hit in hits], limit)
    hits = await store.search_text(
        text_query(query), partition=partition, thread_id=thread_id, kinds=kinds, since=since, until=until,
        limit=fetch,
    )  # fmt: skip
    return await _finish(store, "text", [_hit(hit) for hit in hits], limit)


async def _finish(
    store: MemoryStore, mode: GrepMode, hits: list[GrepHit], limit: int, *, truncated: bool = False
) -> GrepResult:
    """The first ``limit`` hits, each tool call with its result as one (`pair_hits`), with their coverage."""
    paired = await pair_hits(store, hits, limit)
    return GrepResult(mode=mode, hits=await _with_coverage(store, paired), truncated=truncated)


def _hit(found: SearchHit) -> GrepHit:
    return GrepHit(**found.model_dump(), covered_by=[])


async def _with_coverage(store: MemoryStore, hits: list[GrepHit]) -> list[GrepHit]:
    """Fill ``covered_by``: the summaries above each message or summary hit, lowest level first.

    One store read for every hit: a grep under load waits once for the store, not once
    per summary level of every summary it found.
    """
    node_ids = [hit.id for hit in hits if hit.kind in ("message", "summary")]
    chains = await store.covered_by(node_ids) if node_ids else {}
    for hit in hits:
        if hit.kind in ("message", "summary"):
            hit.covered_by = list(chains.get(hit.id, []))
    return hits


# -- regex mode -------------------------------------------------------------------------


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """Compile a user pattern with the ``regex`` package.

    Raises:
        InvalidInput: naming what is wrong and where, for a pattern that does not compile.
    """
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise InvalidInput(f"invalid regex {pattern!r}: {exc}") from None
    except (ValueError, OverflowError) as exc:
        raise InvalidInput(f"invalid regex {pattern!r}: {exc}") from None


@dataclass
class _Candidate:
    node: Message | Summary
    text: str


async def _grep_regex(
    store: MemoryStore,
    pattern_text: str,
    partition: str | None,
    thread_id: str | None,
    kinds: Sequence[SearchKind],
    since: datetime | None,
    until: datetime | None,
    limit: int,
) -> GrepResult:
    pattern = compile_pattern(pattern_text)
    searched = tuple(kind for kind in kinds if kind in ("message", "summary"))
    if not searched:
        return GrepResult(mode="regex", hits=[])
    deadline = time.monotonic() + REGEX_TOTAL_BUDGET
    hits: list[GrepHit] = []
    read = 0
    truncated = False
    async for batch in _candidates(store, pattern_text, partition, thread_id, searched, since, until):
        if read + len(batch) > REGEX_SCAN_CAP:
            batch = batch[: REGEX_SCAN_CAP - read]
            truncated = True
        read += len(batch)
        spans = await asyncio.to_thread(_match_all, pattern, [c.text for c in batch], deadline)
        for candidate, span in zip(batch, spans, strict=True):
            if span is not None:
                hits.append(_regex_hit(candidate, span))
                if len(hits) >= limit:
                    return GrepResult(mode="regex", hits=hits, truncated=False)
        if truncated:
            break
    return GrepResult(mode="regex", hits=hits, truncated=truncated)


def _match_all(pattern: regex.Pattern[str], texts: list[str], deadline: float) -> list[tuple[int, int] | None]:
    """First match span of each text, each match time-limited; runs in a worker thread."""
    spans: list[tuple[int, int] | None] = []
    for text in texts:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise InvalidInput(
                f"regex took too long: the search ran past {REGEX_TOTAL_BUDGET:g} s; "
                "narrow it with thread_id, since/until or a simpler pattern"
            )
        try:
            match = pattern.search(text, timeout=min(REGEX_MATCH_TIMEOUT, remaining), concurrent=True)
        except TimeoutError:
            raise InvalidInput(
                f"regex took too long: over {REGEX_MATCH_TIMEOUT:g} s on one message; simplify the "
                "pattern (nested or overlapping repetitions such as (a|aa)+ backtrack without end)"
            ) from None
        spans.append(match.span() if match is not None else None)
    return spans


def _regex_hit(candidate: _Candidate, span: tuple[int, int]) -> GrepHit:
    node = candidate.node
    start, end = span
    text = candidate.text
    left = max(0, start - SNIPPET_CONTEXT)
    match_end = min(end, start + SNIPPET_MATCH)
    right = min(len(text), match_end + SNIPPET_CONTEXT)
    snippet = ("…" if left > 0 else "") + text[left:right] + ("…" if right < len(text) else "")
    if isinstance(node, Message):
        return GrepHit(
            id=node.id,
            source_id=node.source_id,
            kind="message",
            thread_id=node.thread_id,
            partition=node.partition,
            role=node.role,
            created_at=node.created_at,
            snippet=snippet,
            score=1.0,
        )
    return GrepHit(
        id=node.id,
        kind="summary",
        thread_id=node.thread_id,
        partition=node.partition,
        level=node.level,
        created_at=node.created_at,
        snippet=snippet,
        score=1.0,
    )


def _in_window(created_at: datetime, since: datetime | None, until: datetime | None) -> bool:
    return (since is None or created_at >= since) and (until is None or created_at <= until)


async def _candidates(
    store: MemoryStore,
    pattern_text: str,
    partition: str | None,
    thread_id: str | None,
    kinds: tuple[SearchKind, ...],
    since: datetime | None,
    until: datetime | None,
) -> AsyncIterator[list[_Candidate]]:
    """Batches of nodes the pattern must be tried on: index candidates, else a scan."""
    word = required_word(pattern_text)
    if word is not None:
        found = await store.search_text(
            word,
            partition=partition,
            thread_id=thread_id,
            kinds=kinds,
            since=since,
            until=until,
            limit=PREFILTER_CAP + 1,
        )
        if len(found) <= PREFILTER_CAP:
            batch: list[_Candidate] = []
            for hit in sorted(found, key=lambda h: (h.created_at, h.id)):
                if hit.kind == "message":
                    message = await store.get_message(hit.partition, hit.id)
                    batch.append(_Candidate(message, message.content))
                else:
                    summary = await store.get_summary(hit.partition, hit.id)
                    batch.append(_Candidate(summary, summary.text))
            yield batch
            return
    async for batch in _scan(store, partition, thread_id, kinds, since, until):
        yield batch


async def _scan(
    store: MemoryStore,
    partition: str | None,
    thread_id: str | None,
    kinds: tuple[SearchKind, ...],
    since: datetime | None,
    until: datetime | None,
) -> AsyncIterator[list[_Candidate]]:
    """Every message (oldest first) and summary of each thread, most recent thread first."""
    if thread_id is not None:
        threads = [await store.get_thread(partition, thread_id)]
    else:
        threads = await store.list_threads(partition, limit=SCAN_THREADS)
    for thread in threads:
        if "message" in kinds:
            first_seq = 0
            while True:
                page = await store.get_messages(thread.partition, thread.id, first_seq=first_seq, limit=SCAN_PAGE)
                if not page:
                    break
                yield [
                    _Candidate(message, message.content)
                    for message in page
                    if _in_window(message.created_at, since, until)
                ]
                if len(page) < SCAN_PAGE:
                    break
                first_seq = page[-1].seq + 1
        if "summary" in kinds:
            dag = await store.summary_dag(thread.partition, thread.id)
            yield [
                _Candidate(summary, summary.text)
                for summary in dag.nodes
                if _in_window(summary.created_at, since, until)
            ]


# -- prefilter --------------------------------------------------------------------------

_WS = "ws"
_LIT = "lit"
_OTHER = "other"
_QUANT = "quant"
_OPTIONAL_QUANTIFIERS = ("?", "*", "{")
_ESCAPE_WITH_ARGUMENT = "xuUNpPg0123456789"
_WHITESPACE_ESCAPES = "stnrfv"


def required_word(pattern: str) -> str | None:
    """A whole word every match of ``pattern`` contains, to narrow candidates by full text.

    Conservative on purpose, since a wrong answer would hide real matches: only an
    ASCII word of 3+ letters or digits at the top level of a pattern without
    alternation or inline flags, standing between two mandatory whitespace atoms
    (a literal space or ``\\s``), qualifies; so ``deploy key [0-9]+`` gives ``key``
    while ``colou?r`` or ``a|b`` give nothing. Whitespace on both sides makes it a
    whole token for every full-text analyzer, which ``\\b`` would not (``foo.bar``).
    Returns the longest such word, or ``None``.
    """
    if "(?" in pattern:
        return None
    atoms = _top_level_atoms(pattern)
    if atoms is None:
        return None
    best: str | None = None
    index = 0
    while index < len(atoms):
        if not _is_word_char(atoms[index]):
            index += 1
            continue
        start = index
        while index < len(atoms) and _is_word_char(atoms[index]):
            index += 1
        word = "".join(char for _, char in atoms[start:index])
        before = atoms[start - 1][0] if start > 0 else None
        after = atoms[index][0] if index < len(atoms) else None
        after_delimiter = atoms[index + 1] if index + 1 < len(atoms) else None
        delimiter_optional = (
            after_delimiter is not None
            and after_delimiter[0] == _QUANT
            and (after_delimiter[1] in _OPTIONAL_QUANTIFIERS)
        )
        if (
            before == _WS
            and after == _WS
            and not delimiter_optional
            and len(word) >= 3
            and word.lower() not in _STOP_WORDS
            and (best is None or len(word) > len(best))
        ):
            best = word
    return best


def _is_word_char(atom: tuple[str, str]) -> bool:
    kind, char = atom
    return kind == _LIT and char.isascii() and char.isalnum()


def _top_level_atoms(pattern: str) -> list[tuple[str, str]] | None:
    """The pattern's top-level atoms; groups and classes collapse to one ``other`` atom.

    ``None`` when the pattern alternates at the top level (no word is then required).
    A ``+`` after a whitespace atom is folded into it: one or more is still mandatory.
    """
    atoms: list[tuple[str, str]] = []
    depth = 0
    index = 0
    length = len(pattern)

    def emit(kind: str, char: str = "") -> None:
        if depth != 0:
            return
        if kind == _QUANT and char == "+" and atoms and atoms[-1][0] == _WS:
            return
        atoms.append((kind, char))

    while index < length:
        char = pattern[index]
        if char == "\\":
            escaped = pattern[index + 1] if index + 1 < length else ""
            index += 2
            if escaped in _WHITESPACE_ESCAPES and escaped != "":
                emit(_WS)
            elif escaped == " ":
                emit(_WS)
            elif escaped != "" and escaped in _ESCAPE_WITH_ARGUMENT:
                if index < length and pattern[index] == "{":
                    closing = pattern.find("}", index)
                    index = length if closing < 0 else closing + 1
                while index < length and pattern[index].isalnum():
                    index += 1
                emit(_OTHER)
            else:
                emit(_OTHER)
            continue
        if char == "[":
            index = _skip_class(pattern, index)
            emit(_OTHER)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
            emit(_OTHER)
        elif char == "|":
            if depth == 0:
                return None
        elif char in "?*+":
            emit(_QUANT, char)
        elif char == "{":
            closing = pattern.find("}", index)
            emit(_QUANT, "{")
            if closing > 0:
                index = closing
        elif char in " \t\n\r\f\v":
            emit(_WS)
        elif char in ".^$":
            emit(_OTHER)
        else:
            emit(_LIT, char)
        index += 1
    return atoms


def _skip_class(pattern: str, index: int) -> int:
    """The index just past the character class opening at ``index`` (nested sets included)."""
    depth = 0
    position = index
    length = len(pattern)
    while position < length:
        char = pattern[position]
        if char == "\\":
            position += 2
            continue
        if char == "[":
            depth += 1
            position += 1
            if position < length and pattern[position] == "^":
                position += 1
            if position < length and pattern[position] == "]":
                position += 1
            continue
        if char == "]":
            depth -= 1
            if depth == 0:
                return position + 1
        position += 1
    return length
