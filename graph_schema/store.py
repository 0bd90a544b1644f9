"""The one seam between Palimpsest and a database: the `MemoryStore` protocol.

Its docstrings are the contract both backends (`sqlite/`, `neo4j/`) implement and
the contract suite (`tests/graph_schema/test_store_contract.py`) checks. The verbs are domain verbs;
no query string ever crosses this line.

Partitions: every read that takes ``partition`` only sees that partition. ``None``
means "every partition" and is only passed where crossing partitions is explicit (the
CLI's ``--all-partitions``, ``doctor``, ``migrate``). An id that exists in another
partition than the one asked is reported as unknown, so partitions never leak. A
thread is identified by (partition, thread id): two partitions may each have a thread
``x``; a read by thread id with ``None`` that finds several refuses to guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from palimpsest.graph_schema.models import (
    AppendResult,
    ArchivedRange,
    ContextFrontier,
    EmbeddingTodo,
    ExpandPage,
    Fact,
    FactLayerState,
    FactStats,
    FrontierItem,
    MaintenanceCycle,
    Message,
    MessageRef,
    NewFact,
    NewMessage,
    NewSummary,
    ReadPosition,
    SearchHit,
    SearchKind,
    SessionReadingRecord,
    StoredVector,
    StoreStats,
    Summary,
    SummaryDag,
    Thread,
    ThreadBacklog,
    ThreadSnapshot,
    VectorCandidates,
)


@runtime_checkable
class MemoryStore(Protocol):
    """Where threads, messages and the summary DAG live."""

    #: ``"sqlite"`` or ``"neo4j"``; shown by ``stats``.
    kind: str

    async def initialize(self) -> None:
        """Connect and create the schema (tables or constraints and indexes) idempotently.

        Called once, explicitly, from the server's lifespan or a CLI command; never
        from ``__init__``.

        :raises StoreUnavailable: if the database cannot be reached.
        """
        ...

    async def close(self) -> None:
        """Release connections; the store is unusable afterwards. Safe to call twice."""
        ...

    # -- threads and messages -------------------------------------------------------

    async def append_messages(
        self,
        partition: str,
        thread_id: str,
        messages: Sequence[NewMessage],
        *,
        project: str | None = None,
    ) -> AppendResult:
        """Append messages to the end of a thread in one transaction, creating the thread.

        Each new message gets the next ``seq`` (0-based, no gap even under concurrent
        writers), a NEXT link from its predecessor, a ``sha256`` and a token estimate.
        A message whose ``message_id`` the thread already holds (or that repeats one
        earlier in the same call) is a duplicate: it is counted, its existing id
        returned, and nothing is written for it. A message without ``message_id`` gets
        a fresh random source id. The thread is (partition, thread_id): another
        partition's thread of the same id is another thread, never touched or reported.
        Credentials and ``<private>`` spans are replaced before storage
        (``graph_schema/redact.py``).

        :raises InvalidInput: if the batch is over ``MAX_BATCH``, a content is over
            ``MAX_MESSAGE_BYTES`` or not valid UTF-8 (lone surrogates), or a name is
            empty or too long; nothing is written.
        """
        ...

    async def get_thread(self, partition: str | None, thread_id: str) -> Thread:
        """One thread with its message count.

        :raises NotFound: if the thread does not exist in the partition.
        :raises InvalidInput: if ``partition`` is None and several partitions have a
            thread of that id.
        """
        ...

    async def list_threads(self, partition: str | None, *, limit: int = 100) -> list[Thread]:
        """Threads, most recently updated first."""
        ...

    async def get_messages(
        self,
        partition: str | None,
        thread_id: str,
        *,
        first_seq: int = 0,
        last_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """Messages of a thread with ``first_seq <= seq <= last_seq``, in seq order.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def get_message(self, partition: str | None, message_id: str) -> Message:
        """One message by its stored id (``msg_...``).

        :raises NotFound: if no such message exists in the partition.
        """
        ...

    async def search_text(
        self,
        query: str,
        *,
        partition: str | None,
        thread_id: str | None = None,
        kinds: Sequence[SearchKind] = ("message", "summary"),
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
        snippets: bool = True,
    ) -> list[SearchHit]:
        """Ranked full-text search (BM25-like), best first.

        Any user string is safe: query-language syntax (quotes, ``*``, ``:``, ``AND``,
        unbalanced brackets) is treated as plain words, never an error. A query with no
        word characters returns no hits.

        ``snippets=False`` lets the store give each hit its text's opening instead of
        the window around the matched words, for a caller that keeps only a few of many
        candidates (hybrid search asks for 100 and keeps 10) and then asks
        `text_snippets` for those: on SQLite the windows of 100 hits are a third of a
        text search at 150k messages. A store whose snippets cost nothing may build them
        anyway.

        :raises InvalidInput: if a kind is not message, summary or fact, or limit is
            out of bounds.
        """
        ...

    async def text_snippets(self, query: str, hits: Sequence[SearchHit]) -> list[SearchHit]:
        """``hits`` of ``search_text(query, snippets=False)``, each with the snippet that search would have built.

        The same window around the query's words as ``search_text`` gives by default; a
        hit whose node is gone keeps the snippet it has.
        """
        ...

    async def stats(self, partition: str | None) -> StoreStats:
        """Counts of threads, messages, summaries by level and facts."""
        ...

    async def partitions(self) -> dict[str, int]:
        """Every partition holding a thread, with its thread count, by name.

        Why: a read scoped to one partition (``stats`` without ``--partition`` reads the
        home one) should say which others exist rather than look empty.
        """
        ...

    # -- the summary DAG ------------------------------------------------------------

    async def count_uncovered(self, partition: str, thread_id: str) -> int:
        """How many messages of the thread no summary covers yet.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def uncovered_messages(self, partition: str, thread_id: str, *, limit: int | None = None) -> list[Message]:
        """Messages no summary covers, oldest first.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def uncovered_summaries(self, partition: str, thread_id: str, level: int) -> list[Summary]:
        """Summaries of one level no higher summary covers, in thread order."""
        ...

    async def persist_summary(self, summary: NewSummary) -> Summary:
        """Write a summary, its SUMMARIZES edges and its digest in one transaction.

        Level 1 summarizes messages, level n summarizes summaries of level n-1. The
        store derives seq range, time range, message count, source tokens and the
        Merkle digest from the children. Either all of it is written or nothing.

        :raises NotFound: if a child does not exist in the summary's thread and partition.
        :raises Conflict: if a child is already covered by another summary (which also
            refuses a second run of the same compaction).
        :raises InvalidInput: if the children are of the wrong level, repeat, are not a
            contiguous run in thread order, or the summary is not shorter in tokens
            than its children together.
        """
        ...

    async def persist_summaries(self, summaries: Sequence[NewSummary]) -> list[Summary]:
        """Write several summaries of one level of one thread in one transaction, all or none.

        Each is checked and derived as `persist_summary` does, against what is stored
        before the call (a summary of the batch cannot cover another of it). Why: on a
        server store each transaction costs a commit and an index refresh, so the
        compaction engine writes its summaries in batches; a crash still leaves whole
        summaries or none. Returns them in the order given.

        :raises InvalidInput: if the batch is empty, mixes levels, threads or
            partitions, or covers one child twice; and as `persist_summary`.
        :raises NotFound: as `persist_summary`.
        :raises Conflict: as `persist_summary`.
        """
        ...

    async def get_summary(self, partition: str | None, summary_id: str) -> Summary:
        """One summary with its ordered ``child_ids`` and its ``parent_id``.

        :raises NotFound: if no such summary exists in the partition.
        """
        ...

    async def expand(
        self,
        partition: str | None,
        summary_id: str,
        *,
        depth: int | None = None,
        limit: int = 200,
        cursor: str | None = None,
    ) -> ExpandPage:
        """What a summary covers, in thread order, a page at a time.

        ``depth=None`` gives the original messages, verbatim; ``depth=1`` the direct
        children; ``depth=d`` the descendants ``d`` levels down (messages once level 0
        is reached). ``cursor`` is the ``next_cursor`` of the previous page.

        :raises NotFound: if no such summary exists in the partition.
        :raises InvalidInput: if the cursor is not one this store handed out, or depth < 1.
        """
        ...

    async def covered_by(self, message_ids: Sequence[str]) -> dict[str, list[str]]:
        """For each message or summary id, the chain of summaries above it, lowest level first.

        Unknown or uncovered ids (a top summary) map to an empty list. One read for
        many ids, so a search fills every hit's ``covered_by`` at once.
        """
        ...

    async def frontier(self, partition: str, thread_id: str) -> list[FrontierItem]:
        """The top summaries and uncovered messages, which together partition the thread.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def context_frontier(
        self, partition: str, thread_id: str, *, budget_tokens: int, limit: int
    ) -> ContextFrontier:
        """The frontier, its summaries whole and its newest messages within a budget, in one read.

        ``newest`` holds the messages `graph_schema.prepare.newest_page` picks from the
        frontier with ``budget_tokens`` and ``limit``: what context assembly shows first.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def summary_dag(self, partition: str, thread_id: str) -> SummaryDag:
        """Every summary of a thread, the edges between summaries, and the frontier.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def compaction_candidates(
        self, partition: str | None, *, min_uncovered: int, limit: int
    ) -> list[ThreadBacklog]:
        """Threads with at least ``min_uncovered`` uncovered messages, most first."""
        ...

    async def snapshot(self, partition: str | None, thread_id: str) -> ThreadSnapshot:
        """A whole thread, messages and summaries with their children, for ``doctor``.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    # -- maintenance: leases and cycle records ----------------------------------------

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float, *, now: datetime | None = None) -> bool:
        """Take or renew the lease ``name`` for ``holder`` until ``now + ttl_seconds``.

        One transaction: the lease is taken when nobody holds it, when its expiry is at
        or before ``now`` (its holder died or gave up), or when ``holder`` already holds
        it (a renewal, which pushes the expiry out). Of any number of processes asking
        at once, exactly one gets True. ``now`` defaults to the current UTC time; tests
        pass their own clock.

        :returns: True when ``holder`` holds the lease afterwards, False when another
            holder's unexpired lease stands (nothing is changed then).
        :raises InvalidInput: if the name or holder is empty or too long, or the TTL is
            not positive or longer than a day.
        """
        ...

    async def release_lease(self, name: str, holder: str) -> None:
        """Give the lease back if ``holder`` holds it; anyone else's release changes nothing."""
        ...

    async def record_cycle(self, cycle: MaintenanceCycle) -> None:
        """Keep one maintenance cycle's record; recording an id again changes nothing."""
        ...

    async def recent_cycles(self, limit: int) -> list[MaintenanceCycle]:
        """The last ``limit`` cycles recorded by any process, latest start first.

        :raises InvalidInput: if limit is below 1.
        """
        ...

    # -- the fact layer: facts with provenance, supersession, per-thread state ----------

    async def add_facts(self, facts: Sequence[NewFact]) -> list[Fact]:
        """Write facts and their EXTRACTED_FROM edges in one transaction.

        Idempotent on the fact id (``identity.fact_id(partition, text, first source)``):
        a fact already stored is left exactly as it is (its ``valid_until`` too) and
        returned as stored. Thread, project and time come from the source messages
        (the time is the latest source's); see ``prepare.derive_facts``.

        :returns: The stored facts, one per distinct id, in the order first proposed.
        :raises NotFound: if a source message does not exist in the fact's partition;
            nothing is written.
        :raises InvalidInput: if the batch is over ``MAX_BATCH``, a text is blank or not
            valid UTF-8, or a fact's sources repeat or span several threads.
        """
        ...

    async def get_facts(self, partition: str | None, fact_ids: Sequence[str]) -> list[Fact]:
        """The facts with these ids, in the order asked; unknown ones are left out.

        An id of another partition than the one asked counts as unknown.
        """
        ...

    async def supersede_fact(self, partition: str, old_id: str, new_id: str, *, at: datetime) -> Fact:
        """Mark ``old_id`` replaced by ``new_id`` from ``at`` on: ``valid_until`` and SUPERSEDES.

        A fact is superseded at most once; doing the same supersession again changes
        nothing.

        :returns: The old fact as stored afterwards.
        :raises NotFound: if either fact does not exist in the partition.
        :raises InvalidInput: if the ids are equal or ``at`` is before the old fact's
            ``created_at``.
        :raises Conflict: if another fact already superseded ``old_id``.
        """
        ...

    async def list_facts(
        self,
        partition: str | None,
        *,
        project: str | None = None,
        subject: str | None = None,
        thread_id: str | None = None,
        current_only: bool = True,
        limit: int = 100,
    ) -> list[Fact]:
        """Facts matching every filter given, newest ``created_at`` first.

        ``current_only`` leaves out superseded facts (those with a ``valid_until``).

        :raises InvalidInput: if limit is below 1.
        """
        ...

    async def fact_stats(self, partition: str | None, *, thread_id: str | None = None) -> FactStats:
        """Facts counted by topic (subject) and kind, current and superseded apart."""
        ...

    async def clear_facts(self, partition: str, thread_id: str | None = None) -> int:
        """Delete the partition's facts (or one thread's) with their edges, in one transaction.

        Facts that survive but were superseded by a deleted one become current again,
        and the extraction cursor of the cleared threads goes back to the start (a
        thread whose layer stays on is extracted afresh). The on/off state is kept.

        :returns: How many facts were deleted.
        :raises NotFound: if ``thread_id`` names no thread of the partition.
        """
        ...

    async def fact_layer(self, partition: str | None, thread_id: str) -> FactLayerState:
        """Whether the thread's fact layer is on (on by default: ``kg off`` turns it off) and its extraction cursor.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def set_fact_layer(self, partition: str, thread_id: str, enabled: bool) -> FactLayerState:
        """Turn the thread's fact layer on or off; its facts and cursor are kept.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def advance_fact_cursor(self, partition: str, thread_id: str, seq: int) -> FactLayerState:
        """Record that extraction has read the thread up to ``seq``; never moves back.

        :raises NotFound: if the thread does not exist in the partition.
        :raises InvalidInput: if ``seq`` is below -1 or past the thread's last message.
        """
        ...

    async def fact_layer_threads(self, partition: str | None, *, limit: int = 10_000) -> list[FactLayerState]:
        """Threads whose fact layer is on, most recently updated first (evolution's work list).

        :raises InvalidInput: if limit is below 1.
        """
        ...

    # -- semantic search: embeddings and the vector index -----------------------------
    #
    # A vector is derived data about a node, kept apart from it (an ``embeddings`` row,
    # an ``(:Embedding)-[:EMBEDS]->(node)`` node): the message itself never changes
    # (invariant 1), and reading messages never carries vectors along.

    async def ensure_vector_index(self, dimensions: int, model: str) -> None:
        """Make the store ready to hold and search vectors of ``dimensions`` made by ``model``.

        Creates the vector index on first use (idempotent, and cheap when called again
        with the same arguments) and makes ``model`` the one this store object writes,
        lists as missing and searches: a node whose vector came from another model
        counts as missing, and vectors of two models are never compared. Every other
        verb of this section needs it called first.

        :raises InvalidInput: if ``dimensions`` is below 1 or ``model`` is empty.
        An index of another size that holds no vector yet is rebuilt to this size.

        :raises Conflict: if the store already holds vectors of another size (a model
            of another size needs a fresh store); nothing is changed.
        """
        ...

    async def set_embeddings(self, items: Sequence[tuple[str, Sequence[float]]], model: str) -> int:
        """Store each node's vectors by node id (message, summary or fact), in one transaction.

        The vectors given for one id are its pieces, in order: one per window of a long
        text (``scheduler/pieces.py``), else one. They replace every vector the node had.
        Vectors are normalised on write, so search scores are cosine similarities. Ids
        that name no stored node are skipped (a fact may be cleared between reading its
        text and writing its vector).

        Returns:
            How many nodes got their vectors.

        :raises InvalidInput: if `ensure_vector_index` was not called, ``model`` is not
            the model it was called with, a vector is not of the index's size, holds a
            non-finite number or is all zeros, or a node is given more than
            ``MAX_EMBED_PIECES``; nothing is written.
        """
        ...

    async def missing_embeddings(
        self,
        partition: str | None,
        kinds: Sequence[SearchKind] = ("message", "summary", "fact"),
        limit: int = 256,
        *,
        ids: Sequence[str] | None = None,
        after: str | None = None,
    ) -> list[EmbeddingTodo]:
        """Nodes without a vector of the current model, ordered by id, with the text to embed.

        A node whose text is longer than ``EMBED_PIECE_CHARS`` and whose one vector was
        written before texts were embedded in pieces (of its head only) counts as
        missing too, until it is embedded again. ``ids`` keeps only those nodes
        (embedding what was just appended); ``after`` keeps only ids greater than it, a
        cursor that lets a backfill walk a large store once instead of rescanning what
        it already did. Texts are cut at ``MAX_EMBED_CHARS``.

        :raises InvalidInput: if `ensure_vector_index` was not called, ``limit`` is
            below 1 or a kind is unknown.
        """
        ...

    async def vector_search(
        self,
        vector: Sequence[float],
        *,
        partition: str | None,
        thread_id: str | None = None,
        kinds: Sequence[SearchKind] = ("message", "summary"),
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        """Nodes whose vector is nearest to ``vector``, best first; score = cosine similarity.

        A node with several vectors (pieces) is found by any of them, once, with its
        best one's score. The same filters as `search_text`; only vectors of the
        current model are searched, and nodes without one are never found. A backend may find
        candidates with an approximate index, but every score is exact.

        :raises InvalidInput: if `ensure_vector_index` was not called, ``vector`` is
            not of the index's size, holds a non-finite number or is all zeros,
            ``limit`` is below 1 or a kind is unknown.
        """
        ...

    async def maintain_vectors(self) -> int:
        """Vector upkeep, run by maintenance under its lease: never by a search.

        Lays the store's vector data out for fast searches and drops what deleted
        vectors left behind, with a swap that searches in flight never wait on. A store
        whose vector index the database server keeps (Neo4j) has nothing to do. Needs no
        `ensure_vector_index`: it keeps up every model's vectors the store holds.

        Returns:
            How many vectors it wrote (0 when nothing was due).
        """
        ...

    # -- hybrid search: candidate positions and metadata -------------------------------

    async def vector_candidates(
        self,
        vector: Sequence[float],
        *,
        partition: str | None,
        thread_id: str | None = None,
        kinds: Sequence[SearchKind] = ("message", "summary"),
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
    ) -> VectorCandidates:
        """`vector_search`'s hits, with the `message_refs` of the messages among them.

        The same arguments, errors and hits as `vector_search`; ``refs`` holds one ref
        per message hit, in any order. A server reads both in one round trip: hybrid
        search waits for them after embedding its query.
        """
        ...

    async def message_refs(self, partition: str | None, message_ids: Sequence[str]) -> list[MessageRef]:
        """Thread, seq, role and metadata of each message id, in one read, without content.

        What hybrid ranking needs about its candidates (which are neighbours, whose
        metadata the query names). Ids that name no message of the partition are
        skipped; the rest come back in the order asked, each once.

        :raises InvalidInput: if more than ``MAX_BATCH`` ids are asked at once.
        """
        ...

    # -- derived search text of tool messages -------------------------------------------
    #
    # A tool call or result is found by what it is about (scheduler/search_text.py): that
    # text is written once beside the content, which never changes, and indexed for text
    # search with it.

    async def missing_search_texts(
        self, partition: str | None, limit: int = 256, *, after: str | None = None
    ) -> list[Message]:
        """Tool messages whose search text is not written yet, whole, ordered by id.

        A tool message is a result (role ``tool``) or a call (an assistant message with
        a ``tool_call_id``). ``after`` keeps only ids greater than it: a cursor, so the
        ``search_text`` maintenance step walks a large store once.

        :raises InvalidInput: if ``limit`` is below 1 or above ``MAX_BATCH``.
        """
        ...

    async def set_search_texts(self, items: Sequence[tuple[str, str]]) -> int:
        """Write each ``(message id, text)``'s search text, in one transaction, where none is yet.

        The text is indexed for text search beside the content; ``''`` says there is
        nothing to add. Written once: a message that has one keeps it, and an id that
        names no message is skipped. A message's vector made before its text existed
        was made from its raw content, so it is deleted with the write, for the
        embedding backfill to make again from the new text; a vector made after (the
        embedder writes the text first) is never touched.

        Returns:
            How many messages got their text.

        :raises InvalidInput: if more than ``MAX_BATCH`` items are given, or a text is
            longer than ``MAX_EMBED_CHARS`` or not valid UTF-8; nothing is written.
        """
        ...

    # -- transfer: writing records exactly as another store held them ------------------
    #
    # Export, import and migrate copy a memory between stores; these verbs write what
    # another store's reads returned (ids, seqs, hashes, timestamps, edges) as it is,
    # and skip what is already there by id, so a copy run again adds only what is
    # missing. They do not compare a stored record with the one given: an import checks
    # the whole archive against the store first (``scheduler/portability/checking.py``)
    # and refuses a known id with other content before anything is written.

    async def restore_thread(self, thread: Thread, messages: Sequence[Message]) -> int:
        """Create the thread as given if it is missing, then write its messages exactly as given.

        One transaction. Messages whose id the store already holds are skipped; the
        rest must continue the thread in seq order with no gap (their first seq is the
        thread's message count). The thread keeps its ``created_at``; its
        ``updated_at`` becomes the later of the stored and the given one.

        :returns: How many messages were written.
        :raises InvalidInput: if a message belongs to another thread or partition than
            ``thread``, or the new messages do not continue the thread; nothing is written.
        :raises Conflict: if the thread exists in another partition.
        """
        ...

    async def restore_summaries(self, summaries: Sequence[Summary]) -> int:
        """Write summaries exactly as given (id, fields, ``created_at``, ordered children).

        One transaction; lower levels first (a summary's children are stored, or come
        earlier in the batch). Summaries whose id the store holds are skipped.

        :returns: How many summaries were written.
        :raises NotFound: if a thread or child does not exist in the summary's partition.
        :raises Conflict: if a child is already covered by another summary.
        """
        ...

    async def restore_facts(self, facts: Sequence[Fact]) -> int:
        """Write facts exactly as given: id, ``created_at``, ``valid_until``, sources, supersession.

        One transaction. Facts whose id the store holds are skipped. A SUPERSEDES edge
        is written for each ``superseded_by`` whose fact is stored or in the batch
        (supersession may reach a fact of a thread not copied; its ``valid_until`` is
        kept either way).

        :returns: How many facts were written.
        :raises NotFound: if a source message does not exist in the fact's partition.
        """
        ...

    async def restore_records(
        self, threads: Sequence[ThreadSnapshot], layers: Sequence[FactLayerState], facts: Sequence[Fact]
    ) -> tuple[int, int, int]:
        """Write a whole archive: each thread's messages and summaries, then the fact layers, then the facts.

        As `restore_thread`, `restore_summaries`, `restore_facts`, `set_fact_layer` (off
        only) and `advance_fact_cursor` would, in that order. SQLite writes it all in
        one transaction, so a failure leaves the store as it was; a Neo4j server writes
        batches of a thousand records a transaction (its transaction state lives in its
        heap), so a failure part-way leaves the batches before it, which the same call
        made again completes. Either way nothing in the records themselves may fail:
        check them against the store before calling (the import does).

        :returns: How many messages, summaries and facts were written.
        :raises InvalidInput: as `restore_thread` does, or for a fact layer's cursor outside its thread.
        :raises NotFound: as `restore_summaries` and `restore_facts` do.
        :raises Conflict: if a child is already covered by another summary.
        """
        ...

    async def read_embeddings(self, node_ids: Sequence[str]) -> list[StoredVector]:
        """The stored vectors of these nodes, of any model, in the order asked; missing ones left out.

        A node's pieces come one after another, in order. Vectors come back as stored
        (unit length), so writing them elsewhere, a node's all in one call, with
        `set_embeddings` (after `ensure_vector_index` with their size and model) gives
        the same search scores.
        """
        ...

    # -- archiving: old messages moved to files beside the store, and back -------------

    async def archive_messages(self, archived: ArchivedRange) -> ArchivedRange:
        """Move a run of a thread's messages out of the live store, keeping a record of the run.

        One transaction. The caller has written them to ``archived.path`` and checked the
        file first. The messages leave the store with their text index entries and
        vectors; summaries over them, their edges and the thread's counters stay
        (seqs are never reused). Reads skip them; expanding a summary over them raises
        `Archived`; `snapshot` lists the record.

        :returns: The record as stored.
        :raises NotFound: if the thread does not exist in the partition.
        :raises InvalidInput: if a message of the run is not in the live store or not
            covered by a summary; nothing is changed.
        """
        ...

    async def archived_ranges(self, partition: str | None, thread_id: str | None = None) -> list[ArchivedRange]:
        """The archived runs (of one thread, or all), in thread and seq order."""
        ...

    async def unarchive_messages(self, runs: Sequence[tuple[ArchivedRange, Sequence[Message]]]) -> int:
        """Put archived runs' messages back exactly as they were and drop their records.

        Every run is checked before any is written. SQLite brings them all back in one
        transaction; a Neo4j server one transaction a run (a file may hold a whole
        memory, and a server's transaction state lives in its heap). Their vectors are
        not brought back (the embedding backfill makes them again).

        :returns: How many messages came back.
        :raises NotFound: if a run is not recorded; on SQLite nothing is changed, on
            Neo4j the runs before it are back.
        :raises InvalidInput: if a run's messages are not exactly its messages, in seq
            order; nothing is changed.
        """
        ...

    # -- hooks: read positions --------------------------------------------------------
    #
    # Where a hook stopped reading each transcript file of a thread: bookkeeping of the
    # machine the agent runs on, kept apart from the messages (never in their metadata)
    # and never exported.

    async def read_positions(self, partition: str, thread_id: str) -> list[ReadPosition]:
        """The thread's read positions, one per file, in path order; none for an unknown thread."""
        ...

    async def save_read_positions(self, partition: str, thread_id: str, positions: Sequence[ReadPosition]) -> None:
        """Record where reading each file stopped, replacing that file's earlier position.

        The thread need not exist yet (a transcript may hold no message so far).
        """
        ...

    # -- session readings: what a model made of a session ------------------------------

    async def session_reading(self, partition: str, thread_id: str) -> SessionReadingRecord | None:
        """The thread's latest model reading, None when it has none (or the thread is unknown)."""
        ...

    async def save_session_reading(self, record: SessionReadingRecord) -> None:
        """Keep ``record`` as its thread's reading, replacing the one before.

        The thread need not exist (a reading is bookkeeping beside it, as read positions are).
        """
        ...
