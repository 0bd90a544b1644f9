"""The summary DAG on SQLite: compaction's reads and writes, and expansion back to the messages.

It exists so the DAG verbs (what is uncovered, persisting a summary, expanding and walking
the SUMMARIZES edges, the frontier, backlog and snapshots) live apart from the rest of the
backend; ``UNIQUE(child_id)`` on the SUMMARIZES table holds invariant 2 in the database
itself, and the per-thread counters answer backlog questions in O(1).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence

from palimpsest.graph_schema.errors import Archived, Conflict, InvalidInput, NotFound
from palimpsest.graph_schema.models import (
    ArchivedRange,
    ContextFrontier,
    DagEdge,
    ExpandPage,
    FrontierItem,
    Message,
    NewSummary,
    Summary,
    SummaryDag,
    ThreadBacklog,
    ThreadSnapshot,
    utcnow,
)
from palimpsest.graph_schema.prepare import (
    check_limit,
    check_summary_batch,
    decode_cursor,
    derive_summary,
    encode_cursor,
    newest_page,
)
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import (
    INT64_MAX,
    SqliteBase,
    clamp_int64,
    ids_json,
    message_from_row,
    page_limit,
    require_thread,
    stored_time,
    thread_from_row,
    transaction,
)


def _summary(row: sqlite3.Row, child_ids: list[str], parent_id: str | None) -> Summary:
    return Summary.model_validate({**dict(row), "child_ids": child_ids, "parent_id": parent_id})


def _summaries(conn: sqlite3.Connection, rows: Sequence[sqlite3.Row]) -> list[Summary]:
    """Summaries with their ordered child ids and their parent, two queries for any number."""
    ids = ids_json([row["id"] for row in rows])
    children: dict[str, list[str]] = {}
    for parent_id, child_id in conn.execute(q.CHILDREN, {"ids": ids}):
        children.setdefault(parent_id, []).append(child_id)
    parents = dict(conn.execute(q.PARENTS, {"ids": ids}).fetchall())
    return [_summary(row, children.get(row["id"], []), parents.get(row["id"])) for row in rows]


def covered_floors(conn: sqlite3.Connection, partition: str, thread_id: str) -> dict[int, int]:
    """Per level, the seq below which every node of the level has a parent (docs/architecture.md, "Covered floors")."""
    return dict(conn.execute(q.COVERED_FLOORS, {"partition": partition, "thread_id": thread_id}).fetchall())


def _frontier(conn: sqlite3.Connection, partition: str, thread_id: str) -> list[FrontierItem]:
    """Top summaries and the messages no summary covers, each level read from its covered floor up."""
    scope = {"partition": partition, "thread_id": thread_id}
    floors = covered_floors(conn, partition, thread_id)
    items: list[FrontierItem] = []
    for level in range(1, conn.execute(q.TOP_LEVEL, scope).fetchone()[0] + 1):
        items += [
            FrontierItem(kind="summary", id=r[0], level=r[1], first_seq=r[2], last_seq=r[3], tokens=r[4])
            for r in conn.execute(q.TOP_SUMMARIES, {**scope, "level": level, "floor": floors.get(level, 0)})
        ]
    items += [
        FrontierItem(kind="message", id=r[0], level=0, first_seq=r[1], last_seq=r[1], tokens=r[2])
        for r in conn.execute(q.UNCOVERED_SPANS, {**scope, "floor": floors.get(0, 0)})
    ]
    items.sort(key=lambda item: item.first_seq)
    return items


def keep_floors(conn: sqlite3.Connection, summary: Summary) -> None:
    """After a summary is written: its level's floor comes down to it, its children's goes up.

    A new summary below its level's floor (a gap compacted late) has no parent yet, so
    that floor comes down to its first seq. Its children's level's floor goes up to the
    first node of that level still without a parent, or past the level's last node.
    Both steps touch the nodes between the old floor and the new one, once each.
    """
    scope = {"partition": summary.partition, "thread_id": summary.thread_id}
    floors = covered_floors(conn, summary.partition, summary.thread_id)
    if summary.first_seq < floors.get(summary.level, 0):
        conn.execute(q.SET_COVERED_FLOOR, {**scope, "level": summary.level, "floor": summary.first_seq})
    below, floor = summary.level - 1, floors.get(summary.level - 1, 0)
    if below == 0:
        first = conn.execute(q.FIRST_UNCOVERED_MESSAGE, {**scope, "floor": floor}).fetchone()
        raised = first[0] if first is not None else conn.execute(q.NEXT_SEQ, scope).fetchone()[0]
    else:
        first = conn.execute(q.FIRST_PARENTLESS_SUMMARY, {**scope, "level": below, "floor": floor}).fetchone()
        end = None if first is not None else conn.execute(q.LEVEL_END, {**scope, "level": below}).fetchone()
        raised = first[0] if first is not None else floor if end is None else end[0]
    if raised != floor:
        conn.execute(q.SET_COVERED_FLOOR, {**scope, "level": below, "floor": raised})


def refuse_covered(conn: sqlite3.Connection, scope: Mapping[str, object]) -> None:
    """Raises Conflict when a child of ``scope["ids"]`` is already under a summary (invariant 2)."""
    covered = conn.execute(q.ALREADY_COVERED, scope).fetchone()
    if covered is not None:
        raise Conflict(f"{covered[0]} is already covered by summary {covered[1]}")


def insert_summary(conn: sqlite3.Connection, summary: Summary) -> None:
    """Write a summary, its ordered edges, its thread's covered floors and, for an L1, covered count.

    One writer for both ways a summary arrives (compaction derives it, a transfer copies
    it), inside the caller's transaction, so the two cannot store it differently.
    """
    conn.execute(
        q.INSERT_SUMMARY,
        (
            summary.id, summary.thread_id, summary.partition, summary.level, summary.text,
            summary.tokens, summary.source_tokens, summary.first_seq, summary.last_seq,
            stored_time(summary.earliest_at), stored_time(summary.latest_at), summary.message_count,
            summary.digest, summary.summarizer, stored_time(summary.created_at),
        ),
    )  # fmt: skip
    conn.executemany(
        q.INSERT_EDGE, [(summary.id, child_id, position) for position, child_id in enumerate(summary.child_ids)]
    )
    if summary.level == 1:
        conn.execute(
            q.COVER_MESSAGES,
            {"covered": len(summary.child_ids), "thread_id": summary.thread_id, "partition": summary.partition},
        )
    keep_floors(conn, summary)


class SqliteDag(SqliteBase):
    """The summary DAG verbs, apart because compaction and expansion are one concern with their own tables."""

    async def count_uncovered(self, partition: str, thread_id: str) -> int:
        """O(1): the thread row keeps how many messages level-1 summaries cover."""

        def read(conn: sqlite3.Connection) -> int:
            row = require_thread(conn, partition, thread_id)
            return int(row["message_count"] - row["covered_count"])

        return await self._run(read)

    async def uncovered_messages(self, partition: str, thread_id: str, *, limit: int | None = None) -> list[Message]:
        """Messages no SUMMARIZES edge points at, oldest first."""
        params = {"thread_id": thread_id, "partition": partition, "limit": -1 if limit is None else page_limit(limit)}

        def read(conn: sqlite3.Connection) -> list[Message]:
            with transaction(conn, "DEFERRED"):
                require_thread(conn, partition, thread_id)
                params["floor"] = covered_floors(conn, partition, thread_id).get(0, 0)
                return [message_from_row(row) for row in conn.execute(q.UNCOVERED_MESSAGES, params)]

        return await self._run(read)

    async def uncovered_summaries(self, partition: str, thread_id: str, level: int) -> list[Summary]:
        """Summaries of one level with no parent, in thread order, read from the level's covered floor up."""
        params = {"thread_id": thread_id, "partition": partition, "level": clamp_int64(level)}

        def read(conn: sqlite3.Connection) -> list[Summary]:
            with transaction(conn, "DEFERRED"):
                floor = covered_floors(conn, partition, thread_id).get(level, 0)
                return _summaries(conn, conn.execute(q.UNCOVERED_SUMMARIES, {**params, "floor": floor}).fetchall())

        return await self._run(read)

    async def persist_summary(self, summary: NewSummary) -> Summary:
        """Write the summary, its edges and the thread's covered count in one transaction."""
        return (await self.persist_summaries([summary]))[0]

    async def persist_summaries(self, summaries: Sequence[NewSummary]) -> list[Summary]:
        """Write summaries of one level of one thread in one transaction, all or none."""
        check_summary_batch(summaries)

        def write(conn: sqlite3.Connection) -> list[Summary]:
            with transaction(conn, "IMMEDIATE"):
                require_thread(conn, summaries[0].partition, summaries[0].thread_id)
                return [self._persist(conn, new) for new in summaries]

        return await self._run(write)

    def _persist(self, conn: sqlite3.Connection, new: NewSummary) -> Summary:
        """One summary, inside the caller's write transaction."""
        scope = {"ids": ids_json(new.child_ids), "thread_id": new.thread_id, "partition": new.partition}
        found: dict[str, Message | Summary] = {
            row["id"]: message_from_row(row) for row in conn.execute(q.CHILD_MESSAGES, scope)
        }
        found.update((row["id"], _summary(row, [], None)) for row in conn.execute(q.CHILD_SUMMARIES, scope))
        for child_id in new.child_ids:
            if child_id not in found:
                raise NotFound("message" if new.level == 1 else "summary", child_id)
        refuse_covered(conn, scope)
        summary = derive_summary(new, [found[child_id] for child_id in new.child_ids], utcnow())
        insert_summary(conn, summary)
        return summary

    async def get_summary(self, partition: str | None, summary_id: str) -> Summary:
        """One summary with its ordered children and its parent."""

        def read(conn: sqlite3.Connection) -> Summary:
            with transaction(conn, "DEFERRED"):
                row = conn.execute(q.SUMMARY_BY_ID, {"id": summary_id, "partition": partition}).fetchone()
                if row is None:
                    raise NotFound("summary", summary_id)
                return _summaries(conn, [row])[0]

        return await self._read(read)

    async def expand(
        self,
        partition: str | None,
        summary_id: str,
        *,
        depth: int | None = None,
        limit: int = 200,
        cursor: str | None = None,
    ) -> ExpandPage:
        """Messages by the summary's seq range (contiguous by invariant 2), or summaries by edges.

        ``depth`` at or past the summary's level reaches the messages; a smaller depth
        walks SUMMARIZES edges down with a recursive query.
        """
        offset = decode_cursor(cursor)
        if depth is not None and depth < 1:
            raise InvalidInput(f"depth must be at least 1, got {depth}")
        limit = page_limit(limit)

        def read(conn: sqlite3.Connection) -> ExpandPage:
            with transaction(conn, "DEFERRED"):
                row = conn.execute(q.SUMMARY_BY_ID, {"id": summary_id, "partition": partition}).fetchone()
                if row is None:
                    raise NotFound("summary", summary_id)
                items: list[Message | Summary]
                if depth is None or depth >= row["level"]:
                    archived = conn.execute(q.ARCHIVED_OVERLAP, dict(row)).fetchone()
                    if archived is not None:
                        raise Archived(summary_id, row["first_seq"], row["last_seq"], archived["path"])
                    total = row["message_count"]
                    params = {
                        "thread_id": row["thread_id"],
                        "partition": row["partition"],
                        "first_seq": clamp_int64(row["first_seq"] + offset),
                        "last_seq": row["last_seq"],
                        "limit": limit,
                    }
                    items = [message_from_row(r) for r in conn.execute(q.MESSAGES_IN_RANGE, params)]
                else:
                    ids = [r[0] for r in conn.execute(q.DESCENDANTS, {"id": summary_id, "depth": depth})]
                    total = len(ids)
                    page = ids[offset : offset + limit]
                    by_id = {r["id"]: r for r in conn.execute(q.SUMMARIES_BY_IDS, {"ids": ids_json(page)})}
                    items = list(_summaries(conn, [by_id[i] for i in page]))
            end = offset + len(items)
            return ExpandPage(
                summary_id=summary_id,
                items=items,
                total=total,
                next_cursor=encode_cursor(end) if items and end < total else None,
            )

        return await self._read(read)

    async def covered_by(self, message_ids: Sequence[str]) -> dict[str, list[str]]:
        """Walk SUMMARIZES edges up from every id at once, lowest level first."""

        def read(conn: sqlite3.Connection) -> dict[str, list[str]]:
            chains: dict[str, list[str]] = {message_id: [] for message_id in message_ids}
            for origin, summary_id in conn.execute(q.ANCESTORS, {"ids": ids_json(list(chains))}):
                chains[origin].append(summary_id)
            return chains

        return await self._read(read)

    async def frontier(self, partition: str, thread_id: str) -> list[FrontierItem]:
        """Top summaries and uncovered messages, ordered by first seq."""

        def read(conn: sqlite3.Connection) -> list[FrontierItem]:
            with transaction(conn, "DEFERRED"):
                require_thread(conn, partition, thread_id)
                return _frontier(conn, partition, thread_id)

        return await self._read(read)

    async def context_frontier(
        self, partition: str, thread_id: str, *, budget_tokens: int, limit: int
    ) -> ContextFrontier:
        """The frontier, its summaries and its newest page of messages, in one transaction."""
        check_limit(limit)

        def read(conn: sqlite3.Connection) -> ContextFrontier:
            with transaction(conn, "DEFERRED"):
                require_thread(conn, partition, thread_id)
                items = _frontier(conn, partition, thread_id)
                ids = ids_json([item.id for item in items if item.kind == "summary"])
                rows = conn.execute(q.SUMMARIES_IN_PARTITION, {"ids": ids, "partition": partition}).fetchall()
                summaries = sorted(_summaries(conn, rows), key=lambda summary: summary.first_seq)
                page = newest_page(items, budget_tokens, limit)
                newest: list[Message] = []
                if page:
                    span = {"first_seq": page[-1].first_seq, "last_seq": page[0].first_seq, "limit": -1}
                    scope = {"thread_id": thread_id, "partition": partition, **span}
                    newest = [message_from_row(row) for row in conn.execute(q.MESSAGES_IN_RANGE, scope)]
                return ContextFrontier(items=items, summaries=summaries, newest=newest)

        return await self._read(read)

    async def summary_dag(self, partition: str, thread_id: str) -> SummaryDag:
        """All summaries of the thread, the summary-to-summary edges and the frontier."""

        def read(conn: sqlite3.Connection) -> SummaryDag:
            params = {"thread_id": thread_id, "partition": partition}
            with transaction(conn, "DEFERRED"):
                require_thread(conn, partition, thread_id)
                nodes = _summaries(conn, conn.execute(q.THREAD_SUMMARIES, params).fetchall())
                edges = [
                    DagEdge(parent_id=r[0], child_id=r[1], position=r[2]) for r in conn.execute(q.SUMMARY_EDGES, params)
                ]
                frontier = _frontier(conn, partition, thread_id)
            return SummaryDag(thread_id=thread_id, partition=partition, nodes=nodes, edges=edges, frontier=frontier)

        return await self._read(read)

    async def compaction_candidates(
        self, partition: str | None, *, min_uncovered: int, limit: int
    ) -> list[ThreadBacklog]:
        """Threads by backlog, largest first, straight from the per-thread counters."""
        params = {"partition": partition, "minimum": clamp_int64(min_uncovered), "limit": page_limit(limit)}

        def read(conn: sqlite3.Connection) -> list[ThreadBacklog]:
            return [
                ThreadBacklog(thread_id=r[0], partition=r[1], uncovered=r[2])
                for r in conn.execute(q.CANDIDATES, params)
            ]

        return await self._run(read)

    async def snapshot(self, partition: str | None, thread_id: str) -> ThreadSnapshot:
        """The whole thread in one read transaction, so ``doctor`` checks a consistent state."""
        params = {"thread_id": thread_id, "first_seq": 0, "last_seq": INT64_MAX, "limit": -1}

        def read(conn: sqlite3.Connection) -> ThreadSnapshot:
            with transaction(conn, "DEFERRED"):
                thread = thread_from_row(require_thread(conn, partition, thread_id))
                scoped = {**params, "partition": thread.partition}
                messages = [message_from_row(row) for row in conn.execute(q.MESSAGES_IN_RANGE, scoped)]
                summaries = _summaries(conn, conn.execute(q.THREAD_SUMMARIES, scoped).fetchall())
                scope = {"partition": thread.partition, "thread_id": thread_id}
                archived = [ArchivedRange.model_validate(dict(r)) for r in conn.execute(q.ARCHIVED_RANGES, scope)]
            return ThreadSnapshot(thread=thread, messages=messages, summaries=summaries, archived=archived)

        return await self._run(read)
