"""The embedded SQLite backend: one file, zero setup, the default store.

It exists so that Palimpsest runs anywhere Python does, with nothing to install, and
still keeps the guarantees of docs/architecture.md: WAL and ``BEGIN IMMEDIATE`` let every IDE's own stdio
server share one file without a gap or a duplicate ``seq``; ``UNIQUE(child_id)`` on the
SUMMARIZES table holds invariant 2 in the database itself; FTS5 serves text search.

All ``sqlite3`` work runs in a worker thread (``asyncio.to_thread``): writes on one
connection guarded by a thread lock, so the event loop never blocks and a cancelled
caller never leaves the connection half-used; the reads tools serve on read-only
connections beside it (``base``), which WAL lets read while the writer writes.
Validation and derivation come from ``prepare.py``.

The plumbing lives in ``base`` and the verbs of each feature in their own module
(``dag``, ``facts``, ``vectors``, ``maintenance``, ``transfer``, ``archive``, ``positions``, ``readings``); this module
assembles them into `SqliteStore` and keeps its lifecycle, threads and messages, text search
and stats.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.errors import InvalidInput, NotFound, StoreUnavailable
from palimpsest.graph_schema.models import (
    AppendResult,
    Message,
    NewMessage,
    SearchHit,
    SearchKind,
    StoreStats,
    Thread,
    utcnow,
)
from palimpsest.graph_schema.prepare import PreparedMessage, check_kinds, prepare_append
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.archive import SqliteArchive
from palimpsest.graph_schema.sqlite.base import (
    BUSY_TIMEOUT_S,
    INT64_MAX,
    clamp_int64,
    domain_error,
    ids_json,
    message_from_row,
    page_limit,
    require_thread,
    stored_time,
    thread_from_row,
    transaction,
)
from palimpsest.graph_schema.sqlite.dag import SqliteDag
from palimpsest.graph_schema.sqlite.derived import SqliteDerived
from palimpsest.graph_schema.sqlite.facts import SqliteFacts
from palimpsest.graph_schema.sqlite.footprint import measure
from palimpsest.graph_schema.sqlite.fts import upgrade_indexes
from palimpsest.graph_schema.sqlite.maintenance import SqliteMaintenance
from palimpsest.graph_schema.sqlite.migrations import migrate
from palimpsest.graph_schema.sqlite.positions import SqlitePositions
from palimpsest.graph_schema.sqlite.readings import SqliteReadings
from palimpsest.graph_schema.sqlite.snippets import snippets as build_snippets
from palimpsest.graph_schema.sqlite.transfer import SqliteTransfer
from palimpsest.graph_schema.sqlite.vectors import SqliteVectors
from palimpsest.graph_schema.vectors import head_snippet


def _message_rows(partition: str, thread_id: str, prepared: Sequence[PreparedMessage]) -> list[tuple[Any, ...]]:
    """Each message's row but for project and seq, which are only known under the lock.

    The columns are those of ``q.INSERT_MESSAGE`` without the 5th and 6th (project, seq);
    metadata is JSON text, ``{}`` without encoding in the common case.
    """
    rows: list[tuple[Any, ...]] = []
    times: dict[datetime, str] = {}
    for index, message in enumerate(prepared):
        try:
            metadata = json.dumps(message.metadata) if message.metadata else "{}"
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"message {index} metadata is not JSON: {exc}") from None
        created_at = times.get(message.created_at)
        if created_at is None:
            created_at = times[message.created_at] = stored_time(message.created_at)
        rows.append(
            (
                message.id, message.source_id, thread_id, partition, message.role, message.content,
                message.sha256, message.tokens, created_at, message.tool_call_id, metadata,
            )
        )  # fmt: skip
    return rows


class SqliteStore(
    SqliteDag,
    SqliteFacts,
    SqliteVectors,
    SqliteMaintenance,
    SqliteTransfer,
    SqliteArchive,
    SqlitePositions,
    SqliteReadings,
    SqliteDerived,
):
    """A `MemoryStore` in one SQLite file (or ``:memory:``), shared safely by several processes."""

    kind = "sqlite"

    async def initialize(self) -> None:
        """Open the file (creating its directory), set WAL and timeouts, apply the schema."""
        schema = resources.files(__package__).joinpath("schema.sql").read_text("utf-8")
        await asyncio.to_thread(self._open, schema)

    def _open(self, schema: str) -> None:
        with self._lock:
            conn = self._conn
            try:
                if conn is None:
                    target: str | Path = self.path
                    if self.path != ":memory:":
                        target = Path(self.path).expanduser()
                        target.parent.mkdir(parents=True, exist_ok=True)
                    conn = sqlite3.connect(
                        target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
                    )
                    conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                migrate(conn, schema)
                upgrade_indexes(conn, schema)
                conn.executescript(schema)
            except (sqlite3.Error, OSError) as exc:
                if conn is not None and self._conn is None:
                    conn.close()
                if isinstance(exc, OSError):
                    raise StoreUnavailable(f"cannot create the SQLite database {self.path}: {exc}") from exc
                raise domain_error(exc, self.path) from exc
            self._conn = conn

    async def close(self) -> None:
        """Close the connection; safe to call twice."""
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        self._close_readers()
        with self._lock:
            self._release_vectors()
            if self._conn is not None:
                conn, self._conn = self._conn, None
                try:
                    conn.close()
                except sqlite3.Error as exc:
                    raise domain_error(exc, self.path) from exc

    # -- threads and messages -------------------------------------------------------

    async def append_messages(
        self,
        partition: str,
        thread_id: str,
        messages: Sequence[NewMessage],
        *,
        project: str | None = None,
    ) -> AppendResult:
        """Append in one ``BEGIN IMMEDIATE`` transaction: seq is taken under the write lock.

        Validation and hashing run in the worker thread too, before the lock is taken,
        so a large batch never stalls the event loop.
        """

        def prepare_and_append() -> AppendResult:
            prepared = prepare_append(partition, thread_id, messages, project)
            rows = _message_rows(partition, thread_id, prepared)
            return self._locked(lambda conn: self._append(conn, partition, thread_id, prepared, rows, project))

        return await asyncio.to_thread(prepare_and_append)

    def _append(
        self,
        conn: sqlite3.Connection,
        partition: str,
        thread_id: str,
        prepared: list[PreparedMessage],
        rows: list[tuple[Any, ...]],
        project: str | None,
    ) -> AppendResult:
        with transaction(conn, "IMMEDIATE"):
            now = stored_time(utcnow())
            thread = conn.execute(q.THREAD, {"thread_id": thread_id, "partition": partition}).fetchone()
            existing: dict[str, str] = {}
            if thread is None:
                conn.execute(
                    q.INSERT_THREAD, {"thread_id": thread_id, "partition": partition, "project": project, "now": now}
                )
                next_seq, covered, thread_project = 0, 0, project
            else:
                next_seq, covered, thread_project = thread["message_count"], thread["covered_count"], thread["project"]
                if next_seq and prepared:
                    params = {
                        "thread_id": thread_id,
                        "partition": partition,
                        "ids": ids_json([message.source_id for message in prepared]),
                    }
                    existing = {row[0]: row[1] for row in conn.execute(q.EXISTING_MESSAGE_IDS, params)}
            message_project = project if project is not None else thread_project
            stored_ids = dict(existing)
            new_rows: list[tuple[Any, ...]] = []
            tokens = secrets = 0
            for message, row in zip(prepared, rows, strict=True):
                if message.source_id in stored_ids:
                    continue
                stored_ids[message.source_id] = message.id
                tokens += message.tokens
                secrets += message.secrets
                new_rows.append((*row[:4], message_project, next_seq + len(new_rows), *row[4:]))
            if new_rows:
                conn.executemany(q.INSERT_MESSAGE, new_rows)
                conn.execute(
                    q.GROW_THREAD,
                    {
                        "added": len(new_rows),
                        "tokens": tokens,
                        "secrets": secrets,
                        "now": now,
                        "project": project,
                        "thread_id": thread_id,
                        "partition": partition,
                    },
                )
        return AppendResult(
            thread_id=thread_id,
            partition=partition,
            appended=len(new_rows),
            duplicates=len(prepared) - len(new_rows),
            message_ids=[stored_ids[message.source_id] for message in prepared],
            uncompacted=next_seq + len(new_rows) - covered,
        )

    async def get_thread(self, partition: str | None, thread_id: str) -> Thread:
        """One thread with its message count; ``NotFound`` outside its partition."""
        return await self._read(lambda conn: thread_from_row(require_thread(conn, partition, thread_id)))

    async def list_threads(self, partition: str | None, *, limit: int = 100) -> list[Thread]:
        """Threads, most recently updated first."""
        params = {"partition": partition, "limit": page_limit(limit)}
        return await self._read(lambda conn: [thread_from_row(row) for row in conn.execute(q.LIST_THREADS, params)])

    async def get_messages(
        self,
        partition: str | None,
        thread_id: str,
        *,
        first_seq: int = 0,
        last_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """Messages of a thread in a seq range, read by the (thread_id, seq) index."""
        params = {
            "thread_id": thread_id,
            "first_seq": clamp_int64(first_seq),
            "last_seq": INT64_MAX if last_seq is None else clamp_int64(last_seq),
            "limit": -1 if limit is None else page_limit(limit),
        }

        def read(conn: sqlite3.Connection) -> list[Message]:
            with transaction(conn, "DEFERRED"):
                thread = require_thread(conn, partition, thread_id)
                scoped = {**params, "partition": thread["partition"]}
                return [message_from_row(row) for row in conn.execute(q.MESSAGES_IN_RANGE, scoped)]

        return await self._read(read)

    async def get_message(self, partition: str | None, message_id: str) -> Message:
        """One message by its stored id."""

        def read(conn: sqlite3.Connection) -> Message:
            row = conn.execute(q.MESSAGE_BY_ID, {"id": message_id, "partition": partition}).fetchone()
            if row is None:
                raise NotFound("message", message_id)
            return message_from_row(row)

        return await self._read(read)

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
        """BM25-ranked FTS5 search over each kind, merged best first (score = -bm25).

        Every hit is ranked by its BM25 score for all the query's words, wherever it was
        found: rows holding any word are searched, then, when the cap below cut that
        query's matches off, rows holding every word, and the union is sorted by score
        (newest first among ties). The all-words query keeps its best rows in view when
        the any-word query's candidates are only the newest; under the cap it would find
        rows the any-word query already ranked, with the same scores, so it is not run.
        Ranking all-words rows first whatever their score, as this once did, measured 5
        points below plain BM25 on LoCoMo (``bench/recall.py``).

        Each of those queries ranks at most the newest ``MATCH_CANDIDATES`` rows that
        match and pass the filters (see ``queries``): exact below that, and at a
        million messages a common word costs milliseconds, not the second it takes to
        score every row holding it. Past it the newest matches win, as in a memory the
        recent past usually should.

        Snippets are built for the ``limit`` hits returned only, by FTS5 from their
        stored text (``snippets``): the candidates each query ranks never pay for one.
        A tool message matched only by its derived ``search_text`` (the index's second
        column) shows that text instead. With ``snippets=False`` a hit shows its text's
        opening and `text_snippets` builds the window later, for the hits kept.
        """
        searched = check_kinds(kinds)
        limit = page_limit(limit)
        if q.fts_query(query) is None:
            return []
        params = {
            "partition": partition,
            "thread_id": thread_id,
            "since": None if since is None else stored_time(since),
            "until": None if until is None else stored_time(until),
        }

        candidates = max(q.MATCH_CANDIDATES, limit)

        def read(conn: sqlite3.Connection) -> list[SearchHit]:
            # id -> (kind, row, the kind's any-word query); snippets only for those kept,
            # built for that query: a row holding every word shows the same window for it.
            found: dict[str, tuple[SearchKind, tuple[Any, ...], str]] = {}
            for kind in searched:
                ranking = _searched_words(conn, query, kind)
                words = " ".join(ranking) or query
                # ``words`` always holds a word here (the query was checked above).
                any_word = q.fts_query(words) or ""
                tiers = [any_word, q.fts_query(words, require_all=True) or ""]
                for matching in tiers if len(ranking) > 1 else tiers[:1]:
                    asked = {**params, "query": matching, "limit": limit, "candidates": candidates}
                    rows = conn.execute(q.SEARCHES[kind], asked).fetchall()
                    for row in rows:
                        found.setdefault(row[0], (kind, tuple(row), any_word))
                    if not rows or rows[0][10] < candidates:
                        break  # every match was ranked: the all-words rows among them
            kept = sorted(
                found.values(),
                key=lambda hit: (-hit[1][8], -datetime.fromisoformat(hit[1][6]).timestamp(), hit[1][0]),
            )[:limit]
            if snippets:
                texts = build_snippets([(row[7], fts_query, row[9]) for _, row, fts_query in kept])
            else:
                texts = [head_snippet(row[7]) for _, row, _ in kept]
            return [
                SearchHit(
                    id=row[0], kind=kind, source_id=row[1], thread_id=row[2], partition=row[3], role=row[4],
                    level=row[5], created_at=datetime.fromisoformat(row[6]), snippet=text, score=row[8],
                )
                for (kind, row, _), text in zip(kept, texts, strict=True)
            ]  # fmt: skip

        return await self._read(read)

    async def text_snippets(self, query: str, hits: Sequence[SearchHit]) -> list[SearchHit]:
        """The window `search_text` builds, for hits it found with ``snippets=False`` (see `MemoryStore`).

        Each kind's texts come back in one read by id, and the window is built for the
        any-word form of the query that search ran (a message's from its ranking words):
        a row that held every word shows the same window for either form, since FTS5's
        snippet scores the same matched phrases.
        """
        if not hits or q.fts_query(query) is None:
            return list(hits)

        def read(conn: sqlite3.Connection) -> list[SearchHit]:
            matched: dict[str, tuple[str, str, str | None]] = {}
            for kind in {hit.kind for hit in hits}:
                fts_query = q.fts_query(" ".join(_searched_words(conn, query, kind)) or query)
                if fts_query is None:
                    continue
                ids = json.dumps([hit.id for hit in hits if hit.kind == kind])
                for node_id, text, derived in conn.execute(q.SNIPPET_SOURCES[kind], {"ids": ids}):
                    matched[node_id] = (text, fts_query, derived)
            found = [hit.id for hit in hits if hit.id in matched]
            texts = dict(zip(found, build_snippets([matched[node_id] for node_id in found]), strict=True))
            return [hit.model_copy(update={"snippet": texts[hit.id]}) if hit.id in texts else hit for hit in hits]

        return await self._read(read)

    async def stats(self, partition: str | None) -> StoreStats:
        """Counts from the per-thread totals and one GROUP BY over summaries; sizes from the files (`footprint`)."""

        def read(conn: sqlite3.Connection) -> StoreStats:
            params = {"partition": partition}
            with transaction(conn, "DEFERRED"):
                threads, messages, tokens, secrets = conn.execute(q.THREAD_TOTALS, params).fetchone()
                levels = {level: count for level, count in conn.execute(q.SUMMARY_LEVELS, params)}
                (facts,) = conn.execute(q.FACT_COUNT, params).fetchone()
                runs, archived = conn.execute(q.ARCHIVED_TOTALS, params).fetchone()
                pages, free = conn.execute(q.PAGE_BYTES).fetchone()
            if self.path == ":memory:":
                size, reclaimable, archives = pages, free, None
            else:
                footprint = measure(self.path, free)
                size, reclaimable, archives = (
                    footprint.bytes_on_disk,
                    footprint.reclaimable_bytes,
                    footprint.archive_bytes,
                )
            return StoreStats(
                store=self.kind,
                partition=partition,
                threads=threads,
                messages=messages,
                summaries_by_level=levels,
                facts=facts,
                tokens=tokens,
                secrets_redacted=secrets,
                archived_messages=archived,
                archived_runs=runs,
                bytes_on_disk=size,
                bytes_reclaimable=reclaimable,
                archive_bytes=archives,
            )

        return await self._read(read)

    async def partitions(self) -> dict[str, int]:
        """One GROUP BY over the threads table (see `MemoryStore`)."""

        def read(conn: sqlite3.Connection) -> dict[str, int]:
            return {partition: count for partition, count in conn.execute(q.PARTITIONS)}

        return await self._read(read)


def _searched_words(conn: sqlite3.Connection, query: str, kind: SearchKind) -> list[str]:
    """The words a kind's index is searched with: a message's ranking words, every word of the query elsewhere."""
    return _ranking_words(conn, query) if kind == "message" else q.query_words(query)


def _ranking_words(conn: sqlite3.Connection, query: str) -> list[str]:
    """The query's words that can rank a message: those in some but not most messages.

    A word in no message matches nothing and adds nothing to any score, yet would make
    every row fail the all-words query. FTS5's bm25 gives a term found in over half the
    messages an IDF of zero (it clamps it at 1e-6), so it changes no ranking, yet
    requiring it drops good rows that lack it. How common a word is comes from the
    newest ``COMMON_TERM_SAMPLE`` messages: counting all of a common word's rows would
    cost tens of milliseconds at a million. Common terms are kept when the store is small
    (below ``COMMON_TERM_MIN_ROWS``). When no word is left the caller searches the query
    as is, newest matches first in effect (every score is near zero), and runs no
    all-words query: it would rank the same near-zero scores again, at the cost of a
    second pass over up to ``MATCH_CANDIDATES`` rows.
    """
    (rows,) = conn.execute(q.MESSAGE_ROWS).fetchone()
    sample = {"after": rows - q.COMMON_TERM_SAMPLE}
    kept = []
    for word in q.query_words(query):
        word_query = q.fts_query(word)
        (recent,) = conn.execute(q.RECENT_MATCHES, {**sample, "query": word_query}).fetchone()
        if not recent and conn.execute(q.ANY_MESSAGE_MATCH, {"query": word_query}).fetchone() is None:
            continue
        if rows < q.COMMON_TERM_MIN_ROWS or 2 * recent <= min(rows, q.COMMON_TERM_SAMPLE):
            kept.append(word)
    return kept
