"""Transfer on SQLite: threads, messages, summaries and facts written exactly as another store held them.

It exists so export, import and migrate (``scheduler/portability/``) can copy a memory
between stores without re-deriving anything: ids, seqs, hashes, timestamps and edges
are written as read, each verb in one ``BEGIN IMMEDIATE`` transaction, and what is
already stored is skipped, so a copy interrupted and run again adds only what is missing.
``restore_records`` writes a whole archive in one transaction, so an import that fails
part-way leaves the store as it was.
"""

from __future__ import annotations

import json
import sqlite3
import struct
from collections.abc import Callable, Sequence
from typing import TypeVar

from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.models import Fact, FactLayerState, Message, StoredVector, Summary, Thread, ThreadSnapshot
from palimpsest.graph_schema.prepare import restored_messages
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import SqliteBase, ids_json, stored_time, transaction
from palimpsest.graph_schema.sqlite.dag import insert_summary, refuse_covered

T = TypeVar("T")


def _floats(blob: bytes) -> list[float]:
    """A stored vector (little-endian float32) as numbers; struct, not numpy, which the hook path never loads."""
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def _seq(message: Message) -> int:
    return message.seq


def _level_and_seq(summary: Summary) -> tuple[int, int]:
    return summary.level, summary.first_seq


def _in_transaction(conn: sqlite3.Connection, work: Callable[[], T]) -> T:
    with transaction(conn, "IMMEDIATE"):
        return work()


def message_row(message: Message) -> tuple[object, ...]:
    """A message as ``q.INSERT_MESSAGE`` binds it; metadata as the JSON text an append stores."""
    metadata = json.dumps(message.metadata) if message.metadata else "{}"
    return (
        message.id, message.source_id, message.thread_id, message.partition, message.project, message.seq,
        message.role.value, message.content, message.sha256, message.tokens, stored_time(message.created_at),
        message.tool_call_id, metadata,
    )  # fmt: skip


def _write_thread(conn: sqlite3.Connection, thread: Thread, messages: Sequence[Message]) -> int:
    """`restore_thread` inside the caller's transaction."""
    row = conn.execute(q.THREAD, {"thread_id": thread.id, "partition": thread.partition}).fetchone()
    if row is None:
        conn.execute(
            q.RESTORE_THREAD,
            {
                "thread_id": thread.id, "partition": thread.partition, "project": thread.project,
                "created_at": stored_time(thread.created_at), "updated_at": stored_time(thread.updated_at),
            },
        )  # fmt: skip
        stored = 0
    else:
        stored = row["message_count"]
    ids = ids_json([message.id for message in messages])
    existing = {found[0] for found in conn.execute(q.STORED_MESSAGE_IDS, {"ids": ids})}
    fresh = restored_messages(thread, messages, stored, existing)
    conn.executemany(q.INSERT_MESSAGE, [message_row(message) for message in fresh])
    conn.execute(
        q.RESTORE_GROW_THREAD,
        {
            "added": len(fresh), "tokens": sum(message.tokens for message in fresh),
            "updated_at": stored_time(thread.updated_at), "project": thread.project,
            "thread_id": thread.id, "partition": thread.partition,
        },
    )  # fmt: skip
    return len(fresh)


def _write_summaries(conn: sqlite3.Connection, summaries: Sequence[Summary]) -> int:
    """`restore_summaries` inside the caller's transaction."""
    written = 0
    stored = {row["id"] for row in conn.execute(q.SUMMARIES_BY_IDS, {"ids": ids_json([s.id for s in summaries])})}
    for summary in summaries:
        if summary.id in stored:
            continue
        scope = {"ids": ids_json(summary.child_ids), "thread_id": summary.thread_id, "partition": summary.partition}
        if conn.execute(q.THREAD, {"thread_id": summary.thread_id, "partition": summary.partition}).fetchone() is None:
            raise NotFound("thread", summary.thread_id)
        children = q.CHILD_MESSAGES if summary.level == 1 else q.CHILD_SUMMARIES
        found = {row["id"] for row in conn.execute(children, scope)}
        for child_id in summary.child_ids:
            if child_id not in found:
                raise NotFound("message" if summary.level == 1 else "summary", child_id)
        refuse_covered(conn, scope)
        insert_summary(conn, summary)
        stored.add(summary.id)
        written += 1
    return written


def _write_facts(conn: sqlite3.Connection, facts: Sequence[Fact]) -> int:
    """`restore_facts` inside the caller's transaction."""
    stored = {row[0] for row in conn.execute(q.FACT_IDS, {"ids": ids_json([f.id for f in facts])})}
    fresh = [fact for fact in facts if fact.id not in stored]
    sources = ids_json([m for fact in fresh for m in fact.source_message_ids])
    messages = {row["id"]: row["partition"] for row in conn.execute(q.FACT_SOURCE_MESSAGES, {"ids": sources})}
    for fact in fresh:
        for message_id in fact.source_message_ids:
            if messages.get(message_id) != fact.partition:
                raise NotFound("message", message_id)
        conn.execute(
            q.RESTORE_FACT,
            (
                fact.id, fact.partition, fact.project, fact.text, fact.kind, fact.subject or "",
                fact.thread_id, stored_time(fact.created_at),
                None if fact.valid_until is None else stored_time(fact.valid_until),
            ),
        )  # fmt: skip
        conn.executemany(q.INSERT_FACT_SOURCE, [(fact.id, m) for m in fact.source_message_ids])
    newer = ids_json([fact.superseded_by for fact in facts if fact.superseded_by])
    known = {row[0] for row in conn.execute(q.FACT_IDS, {"ids": newer})}
    conn.executemany(
        q.RESTORE_SUPERSEDES,
        [(fact.superseded_by, fact.id) for fact in facts if fact.superseded_by in known],
    )
    return len(fresh)


def _write_layer(conn: sqlite3.Connection, layer: FactLayerState) -> None:
    """A thread's fact-layer switch and cursor as `set_fact_layer` and `advance_fact_cursor` write them."""
    params = {"thread_id": layer.thread_id, "partition": layer.partition}
    row = conn.execute(q.FACT_LAYER, params).fetchone()
    if row is None:
        raise NotFound("thread", layer.thread_id)
    if not -1 <= layer.extracted_seq < row["message_count"]:
        raise InvalidInput(
            f"extraction cursor {layer.extracted_seq} is outside thread {layer.thread_id!r} "
            f"(seq -1..{row['message_count'] - 1})"
        )
    if not layer.enabled:
        conn.execute(q.SET_FACT_LAYER, {**params, "enabled": 0})
    if layer.extracted_seq >= 0:
        conn.execute(q.ADVANCE_FACT_CURSOR, {**params, "seq": layer.extracted_seq})


class SqliteTransfer(SqliteBase):
    """The transfer verbs, apart because they bypass derivation on purpose: they copy, they do not create."""

    async def restore_thread(self, thread: Thread, messages: Sequence[Message]) -> int:
        """Insert the thread if missing and the messages not yet stored, then grow its counters."""
        return await self._run(lambda conn: _in_transaction(conn, lambda: _write_thread(conn, thread, messages)))

    async def restore_summaries(self, summaries: Sequence[Summary]) -> int:
        """Insert each summary not stored, after checking its children exist and are uncovered."""
        return await self._run(lambda conn: _in_transaction(conn, lambda: _write_summaries(conn, summaries)))

    async def restore_facts(self, facts: Sequence[Fact]) -> int:
        """Insert facts not stored with their sources, then the SUPERSEDES rows both ends of which exist."""
        return await self._run(lambda conn: _in_transaction(conn, lambda: _write_facts(conn, facts)))

    async def restore_records(
        self, threads: Sequence[ThreadSnapshot], layers: Sequence[FactLayerState], facts: Sequence[Fact]
    ) -> tuple[int, int, int]:
        """Every thread, then the layers and the facts, in one ``BEGIN IMMEDIATE`` transaction."""

        def write(conn: sqlite3.Connection) -> tuple[int, int, int]:
            messages = summaries = 0
            with transaction(conn, "IMMEDIATE"):
                for snapshot in threads:
                    messages += _write_thread(conn, snapshot.thread, sorted(snapshot.messages, key=_seq))
                    summaries += _write_summaries(conn, sorted(snapshot.summaries, key=_level_and_seq))
                for layer in layers:
                    _write_layer(conn, layer)
                written_facts = _write_facts(conn, facts)
            return messages, summaries, written_facts

        return await self._run(write)

    async def read_embeddings(self, node_ids: Sequence[str]) -> list[StoredVector]:
        """The ``embeddings`` rows of these nodes, float32 blobs back to lists, a node's pieces in order."""

        def read(conn: sqlite3.Connection) -> list[StoredVector]:
            rows: dict[str, list[StoredVector]] = {}
            for node_id, model, blob in conn.execute(q.READ_EMBEDDINGS, {"ids": ids_json(node_ids)}):
                rows.setdefault(node_id, []).append(StoredVector(node_id, model, _floats(blob)))
            return [vector for node_id in dict.fromkeys(node_ids) for vector in rows.get(node_id, [])]

        return await self._run(read)
