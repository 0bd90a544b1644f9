"""Archiving on Neo4j: runs of old messages moved out of the graph, a record of each, and back.

It exists so a store that keeps everything need not grow without bound: the raw
messages of old, compacted runs move to archive files beside the store (written and
checked by ``scheduler/portability/archive.py``). A message's node stays as a stub
(relabelled ``ArchivedMessage``, stripped to id, partition, thread and seq) so the
SUMMARIZES and NEXT edges around it stay; its content, metadata and vector go. Each
run goes and comes back in one managed transaction under the thread's lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from neo4j import AsyncManagedTransaction

from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.models import ArchivedRange, Message
from palimpsest.graph_schema.neo4j import queries as q
from palimpsest.graph_schema.neo4j.base import Neo4jBase, plain_props
from palimpsest.graph_schema.neo4j.transfer import message_row
from palimpsest.graph_schema.prepare import check_archived_run


def archived_from_record(raw: dict[str, object]) -> ArchivedRange:
    return ArchivedRange.model_validate(plain_props(dict(raw)))


class Neo4jArchive(Neo4jBase):
    """The archiving verbs, apart because they are the only ones that ever take a message out."""

    async def archive_messages(self, archived: ArchivedRange) -> ArchivedRange:
        """Lock the thread, check the run is live and covered, stub its messages, record it."""
        run = {
            "thread_id": archived.thread_id, "partition": archived.partition,
            "first_seq": archived.first_seq, "last_seq": archived.last_seq,
        }  # fmt: skip

        async def work(tx: AsyncManagedTransaction) -> ArchivedRange:
            rows = await self._run(tx, q.ARCHIVE_RUN_STATE, **run)
            if not rows:
                raise NotFound("thread", archived.thread_id)
            size = archived.last_seq - archived.first_seq + 1
            live, covered = rows[0]["live"], rows[0]["covered"]
            if size < 1 or live != size or covered != size:
                raise InvalidInput(
                    f"seq {archived.first_seq}-{archived.last_seq} of thread {archived.thread_id!r} is not a run of "
                    f"live messages all covered by summaries ({live} live, {covered} covered)"
                )
            await self._run(tx, q.ARCHIVE_WRITE, **run, record=archived.model_dump())
            return archived

        return await self._transaction(work, write=True)

    async def archived_ranges(self, partition: str | None, thread_id: str | None = None) -> list[ArchivedRange]:
        """The ArchivedRange nodes in scope."""
        rows = await self._query(q.ARCHIVED_RANGES, partition=partition, thread_id=thread_id)
        return [archived_from_record(row["props"]) for row in rows]

    async def unarchive_messages(self, runs: Sequence[tuple[ArchivedRange, Sequence[Message]]]) -> int:
        """Check every run, then per run: turn its stubs back into the messages, exactly, and delete its record.

        One transaction a run, not one for all: a file may hold a whole memory, and a
        server's transaction state lives in its heap.
        """
        for archived, messages in runs:
            check_archived_run(archived, messages)
        restored = 0
        for archived, messages in runs:
            restored += await self._transaction(
                partial(self._unarchive, archived=archived, messages=messages), write=True
            )
        return restored

    async def _unarchive(
        self, tx: AsyncManagedTransaction, archived: ArchivedRange, messages: Sequence[Message]
    ) -> int:
        rows = await self._run(
            tx,
            q.UNARCHIVE_WRITE,
            thread_id=archived.thread_id,
            partition=archived.partition,
            first_seq=archived.first_seq,
            last_seq=archived.last_seq,
            rows=[message_row(message) for message in messages],
        )
        restored = rows[0]["restored"] if rows else 0
        if restored != len(messages):
            raise NotFound("archived range", f"{archived.thread_id}:{archived.first_seq}-{archived.last_seq}")
        return int(restored)
