"""Hybrid search for ``grep_memories``: full text and vectors fused, then re-ranked by context.

Neither index alone finds what a person meant. Words miss paraphrases; a small
embedding model misses the one rare word that matters. This module asks both, in
parallel, for a few hundred candidates and fuses them, with four refinements that each
paid off on the LoCoMo development split (``bench/recall.py`` measures them):

1. **Query cleanup for the text index.** Question and function words ("what", "did",
   "the") match almost every message and, OR-ed into a BM25 query, pull short chatty
   messages up. They are dropped from the text query (never from the vector query,
   whose model reads them as syntax).
2. **Score fusion.** Each list's scores are min-max normalised over its candidates and
   added with weights. RRF ignores how far ahead the first hit is; this does not, and it
   measured better than RRF at every ``k`` tried.
3. **Context.** Candidates are messages in threads, so ranking looks at what is known
   about them besides their words (their `MessageRef`): a message that a name the
   query uses (a speaker, an author, a tool) describes gains a fixed boost, whether the
   name sits in its metadata or opens its content as ``Speaker: text``
   (`written_speaker`), so the same history scores the same however it was written;
   and a message whose thread neighbour (seq ± 1) is itself a strong candidate gains
   part of that neighbour's score, since an answer often sits next to the turn that
   names its topic. Both come from stored messages only, so they work for any
   conversation, not one data set.
4. **Time.** When the question asks about time ("when", "what year", "how long ago") or
   names a period ("in March 2024"), a candidate whose text writes a time down
   ("yesterday", "last Friday", "in 2022") gains a fixed boost, and one whose
   ``created_at`` falls in the named period another (`palimpsest.server.retrieval.dates`).
   The text is read from the ``MessageRef``'s opening (a summary's or fact's snippet),
   so this costs no extra read. The first signal works whatever the layout; the second
   needs real timestamps, which a transcript pasted in without dates lacks.

5. **Coding sessions** (``bench/coding_recall.py``, issue 33). The text query also
   asks for the tools a job word implies and for adjacent words joined
   (`vocabulary`); the text index's first ``text_top_ranks`` hits gain ``text_top``,
   so a weak vector list cannot bury a strong word match; a thinking block's score
   counts ``thinking`` of an act's; and the fusion ranks a fixed pool (the first
   ``text_candidates`` and ``candidates`` of each list), then cuts, so the first hits
   do not depend on ``limit``. Chosen on the tuned set's ``tune`` half (hybrid @1 52 →
   60, @5 94 → 96); held-out sessions, only reported, went from 70.7 to 74.4 at @10
   (docs/benchmarks.md has every step).

Summaries and facts take part through the same fusion; they have no thread neighbours
or metadata, so steps 1, 2 and 4 apply to them.

Measured with ``bench/recall.py`` (evidence recall@10 %, all-MiniLM-L6-v2, LoCoMo
development split). The split is cut in two: every weight is chosen on the tuning half
(its first 3 conversations, 385 questions) and the checking half (the other 2, 377
questions) is only reported; a change that helps tuning and hurts checking is not
taken. Each conversation is stored in two layouts: ``metadata`` (the speaker in
metadata, session dates as ``created_at``) and ``content`` (``Speaker: text``, no names
in metadata, no dates). Tuning metadata / content, checking metadata / content, and the
gap between the layouts over both halves:

    SQLite
    plain BM25 (rank-bm25)        48.1 / 50.3    51.6 / 54.7
    text mode                     59.7 / 62.0    58.7 / 61.8   (stemmed, no question words)
    hybrid                        80.7 / 80.2    75.9 / 73.8   gap 1.3  (with time, below)
    hybrid without time signals   79.0 / 78.3    74.3 / 72.5   gap 1.2
    hybrid before time            78.9 / 77.7    73.2 / 71.4   gap 1.4  (neighbour 0.3, 200)
    hybrid, metadata names only   79.0 / 74.6    73.2 / 70.4   gap 3.5  (earlier still)
    Neo4j
    text mode                     60.2 / 63.0    58.3 / 61.6
    hybrid                        80.8 / 80.1    76.1 / 73.4   gap 1.7
    hybrid before time            78.2 / 76.8    72.6 / 71.0   gap 1.5

The time step and its weights were chosen on the tuning half, by replaying each
question's candidate lists offline (SQLite, tuning then checking, metadata / content):
the written-time boost at 0.2 / 0.3 / 0.4 gave 79.1 / 79.3 / 79.3 on tuning (0.3 taken,
the smaller of the tie); adding it after the neighbour step beat adding it before (79.3
vs 79.1 tuning, 72.7 vs 71.0 checking), and a boost for a neighbour that tells a time
changed nothing. The created_at boost rose on tuning with its weight (0.1: 79.3, 0.2:
79.7, 0.3: 79.8, 0.5: 79.9) and so did the layout gap, which only the metadata layout
can close (1.1, 1.9, 2.1, 2.4 on tuning): 0.2 is the largest that keeps the gap under
2 points. A week's slack after the named period tied with none on tuning, and is kept
because a message tells of an event after it. Reading the first 80 characters of a
message for written times gave 78.4 on tuning, 200 gave 79.8, the whole message 79.7:
refs carry 200.

With time in, a second grid on tuning moved the neighbour share from 0.3 (79.8) to 0.5
(80.3; 0.4: 79.9, 0.6: 80.1, 0.7: 79.3) and the vector candidates from 200 to 300
(80.4; 400: 80.6, within noise and a third more refs to read); 200 text candidates, and
(at neighbour 0.3) text weight 0.4 or 0.6 and a metadata boost of 0.6 or 1.0 were no
better; a neighbour share that leaves out the neighbour's name boost scored 80.2. The
whole bench with 200 vector candidates: SQLite 81.0 / 79.6, 75.6 / 73.0 (gap 2.0);
Neo4j 80.3 / 79.9, 75.8 / 71.6 (gap 2.2). The new weights (300 candidates, the time
step) cost about 13 ms more at the median than the old ones on a small Neo4j store (57
vs 44 ms, p95 93 vs 68, on a loaded machine). "Hybrid without time signals" in the
table is today's weights with the time step off (``bench/recall.py --ablations``).

Text mode went from 54 to 60 with two changes, each measured on both halves: dropping
question words from its query (+5) and stemming (+3 to +5).

Earlier, on the whole split in the metadata layout only: text mode 51,
semantic mode 30, RRF of the two 50, this fusion 75 (74.8 SQLite, 75.1 Neo4j). Without
query cleanup 72, without metadata names 64, without neighbours 71, without both context
steps 55, with 50 candidates from each index 71. Tried and left out because they did
not beat this: RRF at k = 10 and 60, z-score normalisation, normalising by the maximum
only, embedding each turn with its neighbours or with its speaker and date (a derived
text; the metadata boost above does better without changing what is embedded), a
longer stop list, and taking the names out of the text query.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from palimpsest.graph_schema import identity
from palimpsest.graph_schema.models import MessageRef, SearchHit, SearchKind, VectorCandidates
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import Embedder
from palimpsest.scheduler.embedding import query_vector
from palimpsest.server.retrieval import dates, vocabulary


@dataclass(frozen=True)
class FusionWeights:
    """The knobs of hybrid ranking; the defaults were chosen on the tuning half (see above)."""

    #: Candidates asked of the vector index. More finds more of what words missed.
    candidates: int = 300
    #: Candidates asked of the text index (fewer did as well there, and cost less).
    text_candidates: int = 100
    #: Weight of the normalised text score; the vector score weighs ``1 - text``.
    text: float = 0.5
    #: Added to a message whose metadata names something the query names.
    metadata: float = 0.8
    #: Share of the best thread neighbour's score added to a message.
    neighbour: float = 0.5
    #: Drop stop words from the text index's query (`text_query`).
    clean_query: bool = True
    #: Added, when the query asks about time, to a candidate whose text writes a time
    #: down ("yesterday", "last May", "in 2022"; `dates.tells_time`).
    written_time: float = 0.3
    #: Added, when the query names a period ("in March 2024"), to a candidate created in
    #: it (`dates.in_period`).
    created_in_period: float = 0.2
    #: Added to the text index's first ``text_top_ranks`` hits, so that a strong word
    #: match is not buried under what the vector list liked.
    text_top: float = 0.2
    #: How many of the text index's first hits get ``text_top``.
    text_top_ranks: int = 3
    #: What a thinking block's own score is multiplied by: it restates the act it precedes.
    thinking: float = 0.7
    #: Add tools' names and compounds to the text query (`vocabulary`).
    expand: bool = True


#: The weights ``grep_memories`` uses.
DEFAULT_WEIGHTS = FusionWeights()
#: Why hybrid mode cannot run, and how to make it. Hybrid refuses rather than silently
#: answering as text mode would: a caller that asked for meaning should know it got words.
NO_EMBEDDER = (
    "hybrid search needs an embedder (it fuses text and semantic search), and this server runs with "
    "PALIMPSEST_EMBEDDER=none: unset it (the built-in all-MiniLM-L6-v2 is the default) or set openai:MODEL "
    "and restart the server, or search with mode text"
)
#: A metadata value longer than this is a description, not a name: never matched.
METADATA_VALUE_MAX_CHARS = 64
#: A metadata value of more words than this is never matched either.
METADATA_VALUE_MAX_WORDS = 4
#: Words joined by punctuation inside one whitespace-separated chunk; not an apostrophe,
#: which Lucene's English analyzer strips ("Caroline's" is Caroline, counted once).
_JOINED = re.compile(r"\w[^\w\s'\u2019]+\w")
#: ``Speaker: text``: a name of one to four words, the first starting with a letter,
#: then a colon and a space at the very start of the content.
_SPEAKER = re.compile(r"\s*([^\W\d_][\w.'-]*(?: [\w.'-]+){0,3}):\s")


#: Words a question is made of that say nothing about its topic. Kept short on purpose:
#: a word that can carry meaning in a technical question ("not", "after", "before",
#: "new", "first") stays.
STOP_WORDS = frozenset(
    """
    a about am an and any are as at be been being but by can could did do does doing
    for from had has have having he her hers him his how i if in into is it its me my
    of on or our ours she should so than that the their theirs them they this those
    to us was we were what when where which who whom whose why will with would you
    your yours
    """.split()
)


def text_query(query: str, *, expand: bool = True) -> str:
    """The query the text index is asked: its words less stop words, then, with ``expand``, the tools'
    names and compounds they imply (`vocabulary.with_expansions`).

    A chunk that joins words with punctuation (``vault.hcl``, ``os.path``) is kept whole,
    since Lucene indexes it as one token; "Caroline's" gives its words, as any chunk. A
    query of stop words only ("what was it?") is kept whole, so it still finds something
    rather than nothing.
    """
    kept: list[str] = []
    for chunk in query.split():
        meaningful = [word for word in identity.words(chunk) if word.lower() not in STOP_WORDS]
        if meaningful:
            kept.append(chunk if _JOINED.search(chunk) else " ".join(meaningful))
    if not kept:
        return query
    cleaned = " ".join(kept)
    return vocabulary.with_expansions(cleaned) if expand else cleaned


def normalised(hits: Sequence[SearchHit]) -> dict[str, float]:
    """Each hit's score mapped to [0, 1] over the list (min-max); all 1.0 when they tie."""
    if not hits:
        return {}
    scores = [hit.score for hit in hits]
    low, high = min(scores), max(scores)
    if high <= low:
        return {hit.id: 1.0 for hit in hits}
    return {hit.id: (hit.score - low) / (high - low) for hit in hits}


def query_names(query: str) -> frozenset[str]:
    """The query's words, lower-cased, less stop words: what a metadata value may match."""
    return frozenset(word.lower() for word in identity.words(query) if word.lower() not in STOP_WORDS)


def names_metadata(metadata: Mapping[str, Any], names: frozenset[str]) -> bool:
    """Whether a top-level metadata value is a short name all of whose words the query uses.

    ``{"speaker": "Caroline"}`` matches "What did Caroline research?";
    ``{"tool": "pytest"}`` matches "pytest failures". Values that are not strings, or
    longer than ``METADATA_VALUE_MAX_CHARS`` or ``METADATA_VALUE_MAX_WORDS``, never match.
    """
    if not names:
        return False
    for value in metadata.values():
        if not isinstance(value, str) or len(value) > METADATA_VALUE_MAX_CHARS:
            continue
        words = [word.lower() for word in identity.words(value)]
        if 0 < len(words) <= METADATA_VALUE_MAX_WORDS and all(word in names for word in words):
            return True
    return False


def written_speaker(opening: str) -> str | None:
    """Who speaks in a message written as ``Speaker: text``: the words before the colon.

    At most ``METADATA_VALUE_MAX_WORDS`` words, starting with a letter, then a colon and
    a space: "Caroline: I went..." gives "Caroline", "Dr. Ada Byrne: yes" gives "Dr. Ada
    Byrne"; "see https://x" gives nothing.
    """
    found = _SPEAKER.match(opening)
    return found.group(1) if found else None


def names_message(ref: MessageRef, names: frozenset[str]) -> bool:
    """Whether the query names the message's metadata or its written speaker, alike.

    A name counts the same wherever the history put it: ``{"speaker": "Caroline"}`` or
    content that opens with ``Caroline:``.
    """
    speaker = written_speaker(ref.opening)
    return names_metadata(ref.metadata, names) or (speaker is not None and names_metadata({"speaker": speaker}, names))


def fuse(
    text_hits: Sequence[SearchHit],
    vector_hits: Sequence[SearchHit],
    refs: Sequence[MessageRef],
    query: str,
    weights: FusionWeights = DEFAULT_WEIGHTS,
    *,
    limit: int | None = None,
) -> list[SearchHit]:
    """Rank the union of both candidate lists, best first (pure: no store, no model).

    Args:
        text_hits: The text index's candidates, best first.
        vector_hits: The vector index's candidates, best first.
        refs: Thread position and metadata of the message candidates (any subset).
        query: The user's query, for metadata names and whether it asks about time.
        weights: The fusion's knobs.
        limit: Most hits returned; ``None`` returns every candidate. Only those
            returned are copied with their fused score (a search ranks some 400
            candidates to keep 20).

    Returns:
        The best candidates once each, with ``score`` set to its fused score; a text
        hit's snippet (around the matched words) is kept over a vector hit's.
    """
    text_scores = normalised(text_hits)
    vector_scores = normalised(vector_hits)
    candidates: dict[str, SearchHit] = {}
    for hit in [*text_hits, *vector_hits]:
        candidates.setdefault(hit.id, hit)
    names = query_names(query)
    by_id = {ref.id: ref for ref in refs}
    text_rank = {hit.id: rank for rank, hit in enumerate(text_hits)}
    base: dict[str, float] = {}
    for node_id in candidates:
        score = weights.text * text_scores.get(node_id, 0.0) + (1 - weights.text) * vector_scores.get(node_id, 0.0)
        if text_rank.get(node_id, weights.text_top_ranks) < weights.text_top_ranks:
            score += weights.text_top
        ref = by_id.get(node_id)
        if ref is not None and names_message(ref, names):
            score += weights.metadata
        if ref is not None and ref.metadata.get("kind") == "thinking":
            score *= weights.thinking
        base[node_id] = score
    at_position = {(ref.thread_id, ref.seq): base[ref.id] for ref in refs if ref.id in base}
    fused: dict[str, float] = {}
    for node_id, score in base.items():
        ref = by_id.get(node_id)
        if ref is not None:
            neighbours = [
                at_position[key]
                for key in ((ref.thread_id, ref.seq - 1), (ref.thread_id, ref.seq + 1))
                if key in at_position
            ]
            if neighbours:
                score += weights.neighbour * max(neighbours)
        fused[node_id] = score
    if dates.asks_about_time(query):
        periods = dates.named_periods(query)
        for node_id, hit in candidates.items():
            ref = by_id.get(node_id)
            if dates.tells_time(ref.opening if ref is not None else hit.snippet):
                fused[node_id] += weights.written_time
            if dates.in_period(hit.created_at, periods):
                fused[node_id] += weights.created_in_period
    ranked = sorted(candidates, key=lambda node_id: (-fused[node_id], node_id))[:limit]
    return [candidates[node_id].model_copy(update={"score": fused[node_id]}) for node_id in ranked]


async def hybrid_search(
    store: MemoryStore,
    embedder: Embedder,
    query: str,
    *,
    partition: str | None,
    thread_id: str | None = None,
    kinds: Sequence[SearchKind] = ("message", "summary"),
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 20,
    weights: FusionWeights = DEFAULT_WEIGHTS,
) -> list[SearchHit]:
    """Search by words and by meaning at once and fuse the two (see the module docstring).

    The text index and its hits' refs are read while the query is being embedded (the
    model and the store each work in a worker thread), then the vector index with its
    hits' refs (`MemoryStore.vector_candidates`, one round trip on a server), so a
    search costs the slower of the two paths, and the slower is embedding + vector
    search.

    Args:
        store: The store to search.
        embedder: Embeds the query; the store's vectors must come from the same model.
        query: The user's words.
        partition: The partition to search; ``None`` crosses partitions explicitly.
        thread_id: Only this thread.
        kinds: Which nodes to search.
        since: Only nodes created at or after this time.
        until: Only nodes created at or before this time.
        limit: Most hits returned.
        weights: The fusion's knobs.

    Raises:
        InvalidInput: as `MemoryStore.search_text` and `MemoryStore.vector_search` do
            (an unknown kind).
        EmbeddingFailed: if the embedder cannot embed the query.
        Conflict: if the store holds vectors of another size than the embedder's.
    """
    hits, _ = await _search(store, embedder, query, partition, thread_id, kinds, since, until, limit, weights)
    return hits


async def hybrid_or_text(
    store: MemoryStore,
    embedder: Embedder,
    query: str,
    *,
    partition: str | None,
    thread_id: str | None = None,
    kinds: Sequence[SearchKind] = ("message", "summary"),
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 20,
) -> tuple[list[SearchHit], Literal["hybrid", "text"]]:
    """`hybrid_search` when the vector index finds anything in scope, else the text index's ranking.

    What a search without a mode runs: a store whose nodes have no vector of this model
    yet (a backfill not started or under way) gets text mode's ranking, never a fusion
    of the text list with nothing, and the caller is told which ran. Arguments and
    errors are `hybrid_search`'s.
    """
    return await _search(store, embedder, query, partition, thread_id, kinds, since, until, limit, DEFAULT_WEIGHTS)


async def _search(
    store: MemoryStore,
    embedder: Embedder,
    query: str,
    partition: str | None,
    thread_id: str | None,
    kinds: Sequence[SearchKind],
    since: datetime | None,
    until: datetime | None,
    limit: int,
    weights: FusionWeights,
) -> tuple[list[SearchHit], Literal["hybrid", "text"]]:
    filters: dict[str, Any] = {
        "partition": partition,
        "thread_id": thread_id,
        "kinds": kinds,
        "since": since,
        "until": until,
    }

    asked = text_query(query, expand=weights.expand) if weights.clean_query else query

    async def words() -> tuple[list[SearchHit], list[MessageRef]]:
        hits = await store.search_text(asked, limit=max(limit, weights.text_candidates), snippets=False, **filters)
        return hits, await store.message_refs(partition, [hit.id for hit in hits if hit.kind == "message"])

    async def meaning() -> VectorCandidates:
        vector = await query_vector(store, embedder, query)
        return await store.vector_candidates(vector, limit=max(limit, weights.candidates), **filters)

    (text_hits, text_refs), (vector_hits, vector_refs) = await asyncio.gather(words(), meaning())
    if not vector_hits:
        return await _with_snippets(store, asked, text_hits[:limit], text_hits), "text"
    refs = [*text_refs, *vector_refs]
    pool_text, pool_vector = text_hits[: weights.text_candidates], vector_hits[: weights.candidates]
    ranked = fuse(pool_text, pool_vector, refs, query, weights, limit=limit)
    if len(ranked) < limit and (len(pool_text) < len(text_hits) or len(pool_vector) < len(vector_hits)):
        seen = {hit.id for hit in ranked}
        further = fuse(text_hits, vector_hits, refs, query, weights)
        ranked += [hit for hit in further if hit.id not in seen][: limit - len(ranked)]
    return await _with_snippets(store, asked, ranked, text_hits), "hybrid"


async def _with_snippets(
    store: MemoryStore, asked: str, ranked: Sequence[SearchHit], text_hits: Sequence[SearchHit]
) -> list[SearchHit]:
    """The kept hits, those the text index found with their window around the matched words.

    The text candidates came without it (``snippets=False``): of some 100, ten are kept,
    and on SQLite building the windows of all was a third of the text path.
    """
    found = {hit.id for hit in text_hits}
    built = {hit.id: hit for hit in await store.text_snippets(asked, [hit for hit in ranked if hit.id in found])}
    return [built.get(hit.id, hit) for hit in ranked]
