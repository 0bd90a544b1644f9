"""Plumbing every part of the SQLite backend shares: one connection, one lock, one worker thread.

It exists so the per-feature classes (``dag``, ``facts``, ``vectors``,
``maintenance``) and the store that assembles them (``store``) run their work the same
way: all ``sqlite3`` work runs in a worker thread (``asyncio.to_thread``) on one connection
guarded by a thread lock, so the event loop never blocks and a cancelled caller never leaves
the connection half-used, and every sqlite3 error leaves as a domain error. It also holds the
small row-to-model and binding helpers that more than one feature uses.
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
from typing import TYPE_CHECKING, TypeVar

from palimpsest.graph_schema.errors import Conflict, InternalError, InvalidInput, NotFound, StoreUnavailable
from palimpsest.graph_schema.models import Message, Thread
from palimpsest.graph_schema.prepare import check_limit
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.vectors import VectorSpace

if TYPE_CHECKING:
    from palimpsest.graph_schema.sqlite.vector_file import MappedVectors

T = TypeVar("T")

INT64_MAX = 2**63 - 1

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
        #: The vector files as last mapped, and a ``:memory:`` store's directory for them.
        self._mapped_vectors: MappedVectors | None = None
        self._vector_scratch: tempfile.TemporaryDirectory[str] | None = None

    # -- plumbing -------------------------------------------------------------------

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on the connection in a worker thread, translating every sqlite3 error."""
        return await asyncio.to_thread(self._locked, work)

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
