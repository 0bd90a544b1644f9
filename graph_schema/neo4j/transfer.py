"""Transfer on Neo4j: threads, messages, summaries and facts written exactly as another store held them.

It exists so export, import and migrate (``scheduler/portability/``) can copy a memory
between stores without re-deriving anything: ids, seqs, hashes, timestamps and edges
are written as read, each verb in one managed transaction under the same locks as the
verbs that create these nodes, and what is already stored is skipped, so a copy
interrupted and run again adds only what is missing. The writes reuse the append and
summary statements, so a restored thread has the same NEXT chain and SUMMARIZES edges
as one built by appends and compaction.

``restore_records`` writes a whole archive in transactions of `BATCH` records, not one:
a server's transaction state lives in its heap, and an archive may hold a whole
memory. The caller has checked the archive against the store first
(``scheduler/portability/checking.py``), so a refusal comes before the first write;
only the server failing part-way leaves a prefix, which the same import run again
completes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from neo4j import AsyncManagedTransaction

from palimpsest.graph_schema.errors import Conflict, InvalidInput, NotFound
from palimpsest.graph_schema.models import Fact, FactLayerState, Message, StoredVector, Summary, Thread, ThreadSnapshot
from palimpsest.graph_schema.neo4j import queries as q
from palimpsest.graph_schema.neo4j.base import EPOCH, Neo4jBase, aware, native, one_thread
from palimpsest.graph_schema.neo4j.dag import keep_floors
from palimpsest.graph_schema.prepare import restored_messages

#: Records written per transaction by `restore_records`: small enough for a server's heap.
BATCH = 1000


def _epoch_us(value: datetime) -> int:
    """Microseconds since the epoch, as ``APPEND_WRITE`` takes a message's time."""
    return (cast(datetime, aware(value)) - EPOCH) // timedelta(microseconds=1)


def message_row(message: Message) -> dict[str, Any]:
    """A message as ``APPEND_WRITE`` stores it; metadata as the JSON text an append stores."""
    return {
        "id": message.id,
        "source_id": message.source_id,
        "thread_id": message.thread_id,
        "partition": message.partition,
        "project": message.project,
        "seq": message.seq,
        "role": message.role.value,
        "content": message.content,
        "sha256": message.sha256,
        "tokens": message.tokens,
        "created_at": _epoch_us(message.created_at),
        "tool_call_id": message.tool_call_id,
        "metadata": json.dumps(message.metadata) if message.metadata else "{}",
    }


class Neo4jTransfer(Neo4jBase):
    """The transfer verbs, apart because they bypass derivation on purpose: they copy, they do not create."""

    async def restore_thread(self, thread: Thread, messages: Sequence[Message]) -> int:
        """Merge the thread, lock it, append the messages not stored with their NEXT chain."""

        async def work(tx: AsyncManagedTransaction) -> int:
            (head,) = await self._run(
                tx,
                q.RESTORE_THREAD_LOCK,
                thread_id=thread.id,
                partition=thread.partition,
                project=thread.project,
                created_at=thread.created_at,
                updated_at=thread.updated_at,
                ids=[message.id for message in messages],
            )
            fresh = restored_messages(thread, messages, head["message_count"], set(head["existing"]))
            if fresh:
                stored_at = native(head["updated_at"])
                await self._run(
                    tx,
                    q.APPEND_WRITE,
                    thread_id=thread.id,
                    partition=thread.partition,
                    project=thread.project,
                    now=max(stored_at, thread.updated_at),
                    rows=[message_row(message) for message in fresh],
                    last_seq=head["last_seq"] + len(fresh),
                    prev_seq=head["last_seq"],
                    tokens=sum(message.tokens for message in fresh),
                    # Copied messages were redacted (and counted) where they were first stored.
                    secrets=0,
                )
            return len(fresh)

        return await self._transaction(work, write=True)

    async def restore_summaries(self, summaries: Sequence[Summary]) -> int:
        """Per summary not stored: the thread's lock and children as `persist_summary` reads them, then the write."""

        async def work(tx: AsyncManagedTransaction) -> int:
            (row,) = await self._run(tx, q.STORED_SUMMARY_IDS, ids=[summary.id for summary in summaries])
            stored = set(row["ids"])
            written = 0
            for summary in summaries:
                if summary.id in stored:
                    continue
                rows = await self._run(
                    tx,
                    q.SUMMARY_LOCK,
                    thread_id=summary.thread_id,
                    partition=summary.partition,
                    child_ids=summary.child_ids,
                    summary_id=summary.id,
                )
                if not rows:
                    raise NotFound("thread", summary.thread_id)
                covered = {child["props"]["id"]: child["covered"] for child in rows[0]["messages"]}
                covered.update((child["props"]["id"], bool(child["parent_ids"])) for child in rows[0]["summaries"])
                for child_id in summary.child_ids:
                    if child_id not in covered:
                        raise NotFound("message" if summary.level == 1 else "summary", child_id)
                    if covered[child_id]:
                        raise Conflict(f"{child_id} is already covered by another summary")
                await self._run(
                    tx,
                    q.SUMMARY_WRITE_OVER_MESSAGES if summary.level == 1 else q.SUMMARY_WRITE_OVER_SUMMARIES,
                    thread_id=summary.thread_id,
                    props=summary.model_dump(exclude={"child_ids", "parent_id"}),
                    children=[{"id": child_id, "position": index} for index, child_id in enumerate(summary.child_ids)],
                )
                stored.add(summary.id)
                written += 1
                await keep_floors(tx, summary.partition, summary.thread_id, summary.level, summary.first_seq)
            return written

        return await self._transaction(work, write=True)

    async def restore_facts(self, facts: Sequence[Fact]) -> int:
        """Create the facts not stored with their EXTRACTED_FROM edges, then the SUPERSEDES edges."""

        async def work(tx: AsyncManagedTransaction) -> int:
            (row,) = await self._run(tx, q.STORED_FACT_IDS, ids=[fact.id for fact in facts])
            fresh = [fact for fact in facts if fact.id not in set(row["ids"])]
            sources = [message_id for fact in fresh for message_id in fact.source_message_ids]
            partitions = {r["id"]: r["partition"] for r in await self._run(tx, q.SOURCE_PARTITIONS, ids=sources)}
            for fact in fresh:
                for message_id in fact.source_message_ids:
                    if partitions.get(message_id) != fact.partition:
                        raise NotFound("message", message_id)
            rows = [
                {
                    "props": fact.model_dump(exclude={"superseded_by", "source_message_ids"}, exclude_none=True),
                    "sources": fact.source_message_ids,
                }
                for fact in fresh
            ]
            await self._run(tx, q.WRITE_FACTS, facts=rows)
            pairs = [{"new_id": fact.superseded_by, "old_id": fact.id} for fact in facts if fact.superseded_by]
            await self._run(tx, q.RESTORE_SUPERSEDES, pairs=pairs)
            return len(fresh)

        return await self._transaction(work, write=True)

    async def restore_records(
        self, threads: Sequence[ThreadSnapshot], layers: Sequence[FactLayerState], facts: Sequence[Fact]
    ) -> tuple[int, int, int]:
        """Each thread's messages and then summaries in batches, the layers, then the facts in batches."""
        messages = summaries = 0
        for snapshot in threads:
            ordered = sorted(snapshot.messages, key=lambda message: message.seq)
            for start in range(0, max(len(ordered), 1), BATCH):
                messages += await self.restore_thread(snapshot.thread, ordered[start : start + BATCH])
            levels = sorted(snapshot.summaries, key=lambda summary: (summary.level, summary.first_seq))
            for start in range(0, len(levels), BATCH):
                summaries += await self.restore_summaries(levels[start : start + BATCH])

        async def write_layers(tx: AsyncManagedTransaction) -> None:
            for layer in layers:
                await self._write_layer(tx, layer)

        if layers:
            await self._transaction(write_layers, write=True)
        written_facts = 0
        for start in range(0, len(facts), BATCH):
            written_facts += await self.restore_facts(facts[start : start + BATCH])
        if len(facts) > BATCH:  # a SUPERSEDES edge to a fact of a later batch
            for start in range(0, len(facts), BATCH):
                await self.restore_facts(facts[start : start + BATCH])
        return messages, summaries, written_facts

    async def _write_layer(self, tx: AsyncManagedTransaction, layer: FactLayerState) -> None:
        """A thread's fact-layer switch and cursor as `set_fact_layer` and `advance_fact_cursor` write them."""
        params = {"partition": layer.partition, "thread_id": layer.thread_id}
        rows = await self._run(tx, q.FACT_LAYER, **params)
        one_thread(rows, layer.thread_id)
        count = rows[0]["message_count"]
        if not -1 <= layer.extracted_seq < count:
            raise InvalidInput(
                f"extraction cursor {layer.extracted_seq} is outside thread {layer.thread_id!r} (seq -1..{count - 1})"
            )
        if not layer.enabled:
            await self._run(tx, q.SET_FACT_LAYER, **params, enabled=False)
        if layer.extracted_seq >= 0:
            await self._run(tx, q.ADVANCE_FACT_CURSOR, **params, seq=layer.extracted_seq)

    async def read_embeddings(self, node_ids: Sequence[str]) -> list[StoredVector]:
        """The Embedding nodes of these nodes, in the order asked."""
        rows = await self._query(q.READ_EMBEDDINGS, ids=list(dict.fromkeys(node_ids)))
        return [StoredVector(row["node_id"], row["model"], list(row["vector"])) for row in rows]
