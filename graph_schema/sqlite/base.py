"""Plumbing every part of the SQLite backend shares: one writer connection, readers beside it, worker threads.

It exists so the per-feature classes (``dag``, ``facts``, ``vectors``,
``maintenance``) and the store that assembles them (``store``) run their work the same
way: all ``sqlite3`` work runs in a worker thread (``asyncio.to_thread``), so the event
loop never blocks, and every sqlite3 error leaves as a domain error. Writes (and reads
that decide a write) run on one connection guarded by a thread lock, so a cancelled
caller never leaves it half-used. The reads that tools serve (`SqliteBase._read`) run
on read-only connections of their own: in WAL mode they read the last committed state
while the writer writes, so a search or a context assembly never queues behind an
append or a compaction's write, nor behind another read (``bench/load.py`` measured
that queue as most of a tool call's latency with 32 clients). It also holds the small
row-to-model and binding helpers that more than one feature uses.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from palimpsest.graph_schema.errors import Conflict, InternalError, InvalidInput, NotFound, StoreUnavailable
from palimpsest.graph_schema.models import Message, Thread
from palimpsest.graph_schema.prepare import check_limit
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.vectors import VectorSpace

if TYPE_CHECKING:
    from palimpsest.graph_schema.sqlite.vector_file import SearchView

T = TypeVar("T")

INT64_MAX = 2**63 - 1
#: Idle read-only connections a store keeps open for the next reads.
IDLE_READERS = 4
#: How long a connection waits on another's lock before giving up.
BUSY_TIMEOUT_S = 30.0

log = logging.getLogger(__name__)


def stored_time(value: datetime) -> str:
    """A timestamp as stored: UTC ISO 8601 with microseconds, fixed width (text order = time order)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def clamp_int64(value: int) -> int:
    """Clamp a caller's integer to what SQLite can bind, so a huge bound is not an error."""
    return max(-INT64_MAX, min(INT64_MAX, value))


def page_limit(limit: int) -> int:
    """A caller's page size, checked, and clamped to what SQLite can bind."""
    return clamp_int64(check_limit(limit))


def ids_json(ids: Sequence[str]) -> str:
    return json.dumps(list(ids))


def domain_error(exc: sqlite3.Error, path: str) -> Exception:
    """The domain error for a sqlite3 error, so no driver exception leaves this module."""
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError):
        if "summarizes.child_id" in text:
            return Conflict("a child is already covered by another summary")
        return Conflict(f"write refused by a store constraint ({text})")
    if isinstance(exc, sqlite3.DataError):
        return InvalidInput(f"value refused by SQLite ({text})")
    if isinstance(exc, sqlite3.ProgrammingError) or "syntax error" in text or text.startswith("no such"):
        # Arguments are validated before a statement runs: this is our own SQL at fault.
        log.error("the SQLite database %s refused one of Palimpsest's statements: %s", path, text)
        return InternalError(f"the SQLite database {path} refused one of Palimpsest's own statements")
    if "locked" in text or "busy" in text:
        return StoreUnavailable(f"the SQLite database {path} is locked by another process; try again")
    return StoreUnavailable(f"the SQLite database {path} cannot be used: {text}")


@contextmanager
def transaction(conn: sqlite3.Connection, mode: str) -> Iterator[None]:
    """One transaction: ``IMMEDIATE`` takes the write lock at once, ``DEFERRED`` gives reads a snapshot."""
    conn.execute(f"BEGIN {mode}")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def message_from_row(row: sqlite3.Row) -> Message:
    return Message.model_validate({**dict(row), "metadata": json.loads(row["metadata"])})


def thread_from_row(row: sqlite3.Row) -> Thread:
    return Thread.model_validate(dict(row))


def require_thread(conn: sqlite3.Connection, partition: str | None, thread_id: str) -> sqlite3.Row:
    """The thread (partition, thread_id); with no partition, the one thread of that id.

    :raises NotFound: if the partition has no such thread.
    :raises InvalidInput: if no partition is named and several partitions have one.
    """
    rows = conn.execute(q.THREAD, {"thread_id": thread_id, "partition": partition}).fetchall()
    if not rows:
        raise NotFound("thread", thread_id)
    if len(rows) > 1:
        raise InvalidInput(f"thread id {thread_id!r} exists in several partitions: name the partition")
    return rows[0]


class SqliteBase:
    """The connection, its lock and the worker-thread runner that every SQLite feature class shares."""

    def __init__(self, path: str) -> None:
        """Remember where the database lives; nothing is opened until ``initialize()``."""
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._vectors = VectorSpace()
        self._idle_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        #: The vector files as last mapped, and a ``:memory:`` store's directory for them.
        self._vector_view: SearchView | None = None
        self._view_lock = threading.Lock()
        self._vector_scratch: tempfile.TemporaryDirectory[str] | None = None

    # -- plumbing -------------------------------------------------------------------

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on the connection in a worker thread, translating every sqlite3 error."""
        return await asyncio.to_thread(self._locked, work)

    async def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run read-only ``work`` on a reader connection in a worker thread, beside the writer.

        ``work`` sees the last committed state (one snapshot inside a ``DEFERRED``
        transaction). An in-memory database has no other connection to it, so there it
        runs on the writer as `_run` does.
        """
        if self.path == ":memory:":
            return await self._run(work)
        return await asyncio.to_thread(self._on_reader, work)

    def _on_reader(self, work: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._take_reader()
        try:
            return work(conn)
        except sqlite3.Error as exc:
            raise domain_error(exc, self.path) from exc
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"an argument is not valid UTF-8 (position {exc.start})") from exc
        finally:
            self._give_back(conn)

    def _take_reader(self) -> sqlite3.Connection:
        with self._readers_lock:
            if self._conn is None:
                raise StoreUnavailable("the SQLite store is not open: call initialize() first")
            if self._idle_readers:
                return self._idle_readers.pop()
        try:
            target = Path(self.path).expanduser()
            conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            raise domain_error(exc, self.path) from exc
        return conn

    def _give_back(self, conn: sqlite3.Connection) -> None:
        """Keep the connection for the next read, or close it (the store closed, or enough are idle)."""
        with self._readers_lock:
            if self._conn is not None and not conn.in_transaction and len(self._idle_readers) < IDLE_READERS:
                self._idle_readers.append(conn)
                return
        conn.close()

    def _close_readers(self) -> None:
        with self._readers_lock:
            idle, self._idle_readers = self._idle_readers, []
        for conn in idle:
            conn.close()

    def _locked(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._conn is None:
                raise StoreUnavailable("the SQLite store is not open: call initialize() first")
            try:
                return work(self._conn)
            except sqlite3.Error as exc:
                raise domain_error(exc, self.path) from exc
            except UnicodeEncodeError as exc:
                raise InvalidInput(f"an argument is not valid UTF-8 (position {exc.start})") from exc
