"""The plumbing every part of the Neo4j backend shares: driver state, queries, errors.

`palimpsest.graph_schema.neo4j.store.Neo4jStore` is assembled from one class per feature (the summary
DAG, facts, vectors, maintenance); this module holds what they all stand on, so no
feature module imports another:

- Every query is a module constant with parameters only (the driver types queries as
  ``LiteralString`` to push exactly this), run in managed transactions so the driver
  retries transient failures (deadlocks, leader switches) on its own.
- Driver exceptions never leave the backend: `Neo4jBase._translated` turns them into
  `StoreUnavailable`, `Conflict`, `InvalidInput` or (for a statement of our own the
  server refuses) `InternalError`, with one sentence naming the server.
- Records come back with timestamps as epoch microseconds and Neo4j temporal values;
  the row-to-model helpers here turn them into the models more than one feature reads.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString, TypeVar

from neo4j import AsyncDriver, AsyncManagedTransaction, Record, RoutingControl
from neo4j import exceptions as neo4j_errors
from neo4j.graph import Node, Path, Relationship
from neo4j.time import DateTime as Neo4jDateTime

from palimpsest.graph_schema.credentials import Neo4jCredentials
from palimpsest.graph_schema.errors import Conflict, InternalError, InvalidInput, NotFound, StoreUnavailable
from palimpsest.graph_schema.models import Message, Thread
from palimpsest.graph_schema.neo4j import queries as q
from palimpsest.graph_schema.vectors import VectorSpace

T = TypeVar("T")

log = logging.getLogger(__name__)

#: Stands for "no upper bound" where Cypher needs a number (LIMIT, a seq bound).
UNBOUNDED = sys.maxsize
#: Index candidates asked per hit wanted, and at least this many: the fulltext and
#: vector indexes answer before the partition, thread, kind and time filters apply,
#: and asking again costs a round trip.
CANDIDATE_OVERSAMPLE = 4
CANDIDATES_MIN = 64
#: Past this many candidates a search stops asking an index for its top k and reads
#: every match instead (an index allocates room for k up front).
CANDIDATES_MAX = 4096
#: Candidates asked beyond what the last search with the same filters says will pass:
#: the share that passes varies a little from one query to the next.
SHARE_MARGIN = 1.25
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The timestamps message and summary queries return as epoch microseconds.
_EPOCH_US_KEYS = ("created_at", "earliest_at", "latest_at")


def native(value: Any) -> Any:
    return value.to_native() if isinstance(value, Neo4jDateTime) else value


def aware(value: datetime | None) -> datetime | None:
    """Naive times are taken as UTC, as stored ones are; Cypher never compares the two kinds."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def epoch_us(value: int | None) -> datetime | None:
    """An aware UTC datetime from epoch microseconds a query sent (see `from_epoch_us` for why ints)."""
    return None if value is None else EPOCH + timedelta(microseconds=value)


def from_epoch_us(data: dict[str, Any]) -> dict[str, Any]:
    """Turn timestamps sent as epoch microseconds back into aware UTC datetimes.

    Message and summary queries return ints (see ``_MESSAGE_PROPS`` in the queries):
    the driver hydrates each DateTime in pure Python, most of a read's time.
    """
    for key in _EPOCH_US_KEYS:
        value = data.get(key)
        if isinstance(value, int):
            data[key] = EPOCH + timedelta(microseconds=value)
    return data


_SCALARS = (str, int, float, bool, type(None))
_GRAPH_TYPES = (Node, Relationship, Path)


def record_data(record: Record) -> dict[str, Any]:
    """What ``record.data()`` gives, built faster: only graph values are exported, plain values pass as they are.

    Why: ``Record.data`` walks every nested value through a chain of ``isinstance``
    checks against abstract classes, which measured most of the Python time of reading
    a thread's frontier (hundreds of maps) under load; the maps and lists the queries
    return need no change.
    """
    return {key: _plain(value) for key, value in record.items()}


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {key: _plain(item) for key, item in value.items()}
    if kind is list:
        return [_plain(item) for item in value]
    if isinstance(value, _GRAPH_TYPES):
        return Record({"value": value}).data()["value"]
    return value


def one_line(exc: Exception) -> str:
    """A driver exception's text on one line: the driver joins the causes of a failed connection with newlines."""
    return " ".join(str(exc).split())


def plain_props(raw: dict[str, Any]) -> dict[str, Any]:
    return {key: native(value) for key, value in raw.items()}


def message_from_record(raw: dict[str, Any]) -> Message:
    data = from_epoch_us(plain_props(raw))
    data["metadata"] = json.loads(data.get("metadata") or "{}")
    return Message.model_validate(data)


def one_thread(rows: list[Any], thread_id: str) -> None:
    """Check that a thread read found exactly one thread.

    A thread is (partition, id), so a read that names no partition may find several.

    :raises NotFound: if it found none.
    :raises InvalidInput: if it found threads of that id in several partitions.
    """
    if not rows:
        raise NotFound("thread", thread_id)
    if len(rows) > 1:
        raise InvalidInput(f"thread id {thread_id!r} exists in several partitions: name the partition")


def thread_from_record(raw: dict[str, Any]) -> Thread:
    return Thread.model_validate(plain_props(raw))


class Neo4jBase:
    """Connection state and the query plumbing the feature classes of `Neo4jStore` share.

    Built only through `palimpsest.graph_schema.neo4j.store.Neo4jStore`, whose docstring lists the
    constructor's arguments.
    """

    def __init__(
        self,
        uri: str,
        credentials: Neo4jCredentials,
        *,
        retry_seconds: float = 5.0,
        connect_seconds: float = 5.0,
    ) -> None:
        self._uri = uri
        self._credentials = credentials
        self._retry_seconds = retry_seconds
        self._connect_seconds = connect_seconds
        self._driver: AsyncDriver | None = None
        self._vectors = VectorSpace()
        #: The share of an index's candidates the filters kept, by (query, partition,
        #: kinds), from the last search without a time filter (see `_top_hits`).
        self._pass_shares: dict[tuple[str, str | None, tuple[str, ...]], float] = {}

    # -- plumbing -----------------------------------------------------------------

    @asynccontextmanager
    async def _translated(self) -> AsyncIterator[None]:
        """Turn every driver exception into a domain error naming the server."""
        where = f"Neo4j at {self._uri}"
        try:
            yield
        except neo4j_errors.ConstraintError as exc:
            raise Conflict(f"{where} refused a write that breaks a uniqueness constraint: {exc.message}") from exc
        except neo4j_errors.AuthError as exc:
            raise StoreUnavailable(
                f"{where} refused the credentials of user {self._credentials.user!r}: {exc.message}"
            ) from exc
        except neo4j_errors.ClientError as exc:
            if "DatabaseNotFound" in (exc.code or ""):
                raise StoreUnavailable(
                    f"{where} has no database {self._credentials.database!r}: {exc.message}"
                ) from exc
            if (exc.code or "").startswith("Neo.ClientError.Statement."):
                # Every argument is validated before a query runs, so a statement the
                # server refuses is our own Cypher at fault, not the caller's input.
                log.error("%s refused one of Palimpsest's queries: %s %s", where, exc.code, exc.message)
                raise InternalError(f"{where} refused one of Palimpsest's own queries ({exc.code})") from exc
            raise InvalidInput(f"{where} rejected the request: {exc.message}") from exc
        except (neo4j_errors.ServiceUnavailable, neo4j_errors.SessionExpired) as exc:
            raise StoreUnavailable(
                f"{where} cannot be reached ({one_line(exc)}); check that the server is running and reachable"
            ) from exc
        except (neo4j_errors.Neo4jError, neo4j_errors.DriverError) as exc:
            raise StoreUnavailable(f"{where} failed: {one_line(exc)}") from exc

    def _ready(self) -> AsyncDriver:
        if self._driver is None:
            raise StoreUnavailable(f"the store for Neo4j at {self._uri} is not open: call initialize() first")
        return self._driver

    async def _query(self, query: LiteralString, /, *, write: bool = False, **params: Any) -> list[dict[str, Any]]:
        """One query in one managed transaction; its records as dicts (see `_run` for why not ``data()``)."""
        driver = self._ready()
        async with self._translated():
            result = await driver.execute_query(
                query,
                params,
                routing_=RoutingControl.WRITE if write else RoutingControl.READ,
                database_=self._credentials.database,
            )
        return [record_data(record) for record in result.records]

    async def _transaction(self, work: Callable[[AsyncManagedTransaction], Awaitable[T]], *, write: bool) -> T:
        """Several queries (and Python between them) in one managed transaction."""
        driver = self._ready()
        async with (
            self._translated(),
            driver.session(
                database=self._credentials.database,
                bookmark_manager=driver.execute_query_bookmark_manager,
            ) as session,
        ):
            if write:
                return await session.execute_write(work)
            return await session.execute_read(work)

    @staticmethod
    async def _run(tx: AsyncManagedTransaction, query: LiteralString, /, **params: Any) -> list[dict[str, Any]]:
        """One query in the caller's transaction; its records as dicts (`record_data`)."""
        result = await tx.run(query, params)
        return [record_data(record) async for record in result]

    async def _top_hits(
        self, top_k: LiteralString, every_match: LiteralString, /, *, limit: int, **params: Any
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` hits of an index search, asking the index for as few candidates as will do.

        An index ranks its top ``k`` far faster than all its matches (Lucene skips
        whole blocks that cannot make the top ``k``; the vector index walks less of its
        graph), but the filters apply after it answers. So ``top_k`` (a query taking
        ``$k`` and returning one row of ``candidates``, the index's answer count, and
        ``hits``, those that passed the filters) is asked for ``limit`` times
        `CANDIDATE_OVERSAMPLE` candidates, then eight times more while too few pass
        and the index had more; past `CANDIDATES_MAX`, ``every_match`` (one ``hit`` a
        row) ranks every match instead.

        A ``top_k`` that also returns ``passed`` (how many candidates the filters kept)
        lets the next search with the same partition and kinds ask for ``limit``
        divided by that share, times `SHARE_MARGIN`, instead: in a store of one
        partition, 375 vector candidates for hybrid search's 300 rather than 1,200, the
        largest part of its time. A share gone stale (another partition grew) only
        costs the widening step above, after which the share is learned again.
        """
        key = (top_k, params.get("partition"), tuple(params.get("kinds", ())))
        timeless = params.get("since") is None and params.get("until") is None
        share = self._pass_shares.get(key) if timeless else None
        if share is None:
            k = max(limit * CANDIDATE_OVERSAMPLE, CANDIDATES_MIN)
        else:
            k = min(max(math.ceil(limit / share * SHARE_MARGIN), CANDIDATES_MIN), CANDIDATES_MAX)
        while k <= CANDIDATES_MAX:
            (row,) = await self._query(top_k, k=k, limit=limit, **params)
            if timeless and row.get("passed") is not None and row["candidates"]:
                self._pass_shares[key] = max(row["passed"], 1) / row["candidates"]
            if len(row["hits"]) >= limit or row["candidates"] < k:
                return row["hits"]
            if k == CANDIDATES_MAX:
                break
            k = min(k * 8, CANDIDATES_MAX)
        return [row["hit"] for row in await self._query(every_match, limit=limit, **params)]

    async def _thread_record(self, partition: str | None, thread_id: str) -> dict[str, Any]:
        rows = await self._query(q.GET_THREAD, partition=partition, thread_id=thread_id)
        one_thread(rows, thread_id)
        return rows[0]
