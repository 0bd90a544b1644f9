"""Archiving on SQLite: runs of old messages moved out of the file, a record of each, and back.

It exists so a store that keeps everything need not grow without bound: the raw
messages of old, compacted runs move to archive files beside the store (written and
checked by ``scheduler/portability/archive.py``), while the summaries over them, their
edges and the thread's counters stay. The messages leave with their FTS entries and
vectors, in one ``BEGIN IMMEDIATE`` transaction with the record that says where they are;
they come back the same way, every run of a file in one transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.models import ArchivedRange, Message
from palimpsest.graph_schema.prepare import check_archived_run
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import SqliteBase, require_thread, stored_time, transaction
from palimpsest.graph_schema.sqlite.transfer import message_row


def archived_from_row(row: sqlite3.Row) -> ArchivedRange:
    return ArchivedRange.model_validate(dict(row))


def _run(archived: ArchivedRange) -> dict[str, object]:
    return {
        "partition": archived.partition,
        "thread_id": archived.thread_id,
        "first_seq": archived.first_seq,
        "last_seq": archived.last_seq,
    }


class SqliteArchive(SqliteBase):
    """The archiving verbs, apart because they are the only ones that ever remove a message row."""

    async def archive_messages(self, archived: ArchivedRange) -> ArchivedRange:
        """Check the run is live and covered, then drop its FTS rows, vectors and rows, and record it."""
        run = _run(archived)

        def write(conn: sqlite3.Connection) -> ArchivedRange:
            with transaction(conn, "IMMEDIATE"):
                require_thread(conn, archived.partition, archived.thread_id)
                live, covered = conn.execute(q.ARCHIVE_RUN_STATE, run).fetchone()
                size = archived.last_seq - archived.first_seq + 1
                if size < 1 or live != size or covered != size:
                    raise InvalidInput(
                        f"seq {archived.first_seq}-{archived.last_seq} of thread {archived.thread_id!r} is not a "
                        f"run of live messages all covered by summaries ({live} live, {covered} covered)"
                    )
                conn.execute(q.ARCHIVE_FTS_DELETE, run)
                if conn.execute(q.ARCHIVE_EMBEDDINGS_DELETE, run).rowcount:
                    conn.execute(q.BUMP_ANY_VECTOR_VERSION)
                conn.execute(q.ARCHIVE_MESSAGES_DELETE, run)
                conn.execute(
                    q.INSERT_ARCHIVED_RANGE,
                    (
                        archived.thread_id, archived.partition, archived.first_seq, archived.last_seq, archived.path,
                        archived.digest, stored_time(archived.archived_at),
                    ),
                )  # fmt: skip
            return archived

        return await self._run(write)

    async def archived_ranges(self, partition: str | None, thread_id: str | None = None) -> list[ArchivedRange]:
        """The ``archived_ranges`` rows in scope."""
        params = {"partition": partition, "thread_id": thread_id}
        return await self._run(lambda conn: [archived_from_row(r) for r in conn.execute(q.ARCHIVED_RANGES, params)])

    async def unarchive_messages(self, runs: Sequence[tuple[ArchivedRange, Sequence[Message]]]) -> int:
        """Insert every run's rows again (the FTS trigger indexes them) and drop its record, in one transaction."""
        for archived, messages in runs:
            check_archived_run(archived, messages)

        def write(conn: sqlite3.Connection) -> int:
            with transaction(conn, "IMMEDIATE"):
                for archived, messages in runs:
                    params = _run(archived)
                    if conn.execute(q.ARCHIVED_RANGE, params).fetchone() is None:
                        raise NotFound(
                            "archived range", f"{archived.thread_id}:{archived.first_seq}-{archived.last_seq}"
                        )
                    conn.executemany(q.INSERT_MESSAGE, [message_row(message) for message in messages])
                    conn.execute(q.DELETE_ARCHIVED_RANGE, params)
            return sum(len(messages) for _, messages in runs)

        return await self._run(write)
