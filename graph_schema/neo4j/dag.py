"""The summary DAG on Neo4j: uncovered backlog, summaries, expansion, frontier, snapshot.

Summaries are ``(:Summary)-[:SUMMARIZES {position}]->(child)`` edges over messages or
lower summaries. `Neo4jDag.persist_summaries` takes the thread node's write lock
(``SET t._lock = true REMOVE t._lock``: held until commit, the node left unchanged)
and reads, checks and finds the children uncovered in the transaction that writes the
summary, so of two compactions of the same children exactly one wins. Counters on the
Thread node (``covered_count`` beside ``message_count``) keep backlog questions O(1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from neo4j import AsyncManagedTransaction

from palimpsest.graph_schema import identity
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
from palimpsest.graph_schema.neo4j import queries as q
from palimpsest.graph_schema.neo4j.base import (
    UNBOUNDED,
    Neo4jBase,
    from_epoch_us,
    message_from_record,
    one_thread,
    plain_props,
    thread_from_record,
)
from palimpsest.graph_schema.prepare import (
    check_limit,
    check_summary_batch,
    decode_cursor,
    derive_summary,
    encode_cursor,
)


def _summary(record: dict[str, Any]) -> Summary:
    parents = record["parent_ids"]
    return Summary.model_validate(
        {
            **from_epoch_us(plain_props(record["props"])),
            "child_ids": record["child_ids"],
            "parent_id": parents[0] if parents else None,
        }
    )


def _frontier(items: list[dict[str, Any]]) -> list[FrontierItem]:
    return sorted((FrontierItem.model_validate(item) for item in items), key=lambda item: item.first_seq)


async def keep_floors(tx: AsyncManagedTransaction, partition: str, thread_id: str, level: int, lowest: int) -> None:
    """After summaries of ``level`` are written (the lowest from seq ``lowest``): keep the thread's covered floors.

    As SQLite's ``keep_floors`` does (docs/architecture.md, "Covered floors"): the
    level's floor comes down to a summary written below it, and the floor of the
    level under it goes up to its first node still without a parent, or past its
    last node. Both touch only the nodes between the old floor and the new one.
    """
    run = Neo4jBase._run
    scope = {"partition": partition, "thread_id": thread_id}
    (row,) = await run(tx, q.COVERED_FLOORS, **scope)
    kept = row["floors"]
    if kept is None:  # a thread written before floors were kept: 0 on every level it has
        (top,) = await run(tx, q.TOP_LEVEL, **scope)
        kept = [0] * (top["top"] + 1)
    floors: list[int] = list(kept) + [0] * max(0, level + 1 - len(kept))
    floors[level] = min(floors[level], lowest)
    floor = floors[level - 1]
    if level == 1:
        first = await run(tx, q.FIRST_UNCOVERED_MESSAGE, **scope, floor=floor)
        floors[0] = first[0]["seq"] if first else row["next_seq"]
    else:
        first = await run(tx, q.FIRST_PARENTLESS_SUMMARY, **scope, level=level - 1, floor=floor)
        end = first or await run(tx, q.LEVEL_END, **scope, level=level - 1, floor=floor)
        floors[level - 1] = end[0]["seq"] if end else floor
    if floors != row["floors"]:
        await run(tx, q.SET_COVERED_FLOORS, **scope, floors=floors)


class Neo4jDag(Neo4jBase):
    """The summary DAG verbs, apart because compaction and expansion are the store's largest feature."""

    async def count_uncovered(self, partition: str, thread_id: str) -> int:
        """From the thread counters, O(1) (see `MemoryStore`)."""
        return int((await self._thread_record(partition, thread_id))["uncovered"])

    async def uncovered_messages(self, partition: str, thread_id: str, *, limit: int | None = None) -> list[Message]:
        """Messages no summary covers, oldest first (see `MemoryStore`)."""
        if limit is not None:
            check_limit(limit)
        rows = await self._query(
            q.UNCOVERED_MESSAGES,
            partition=partition,
            thread_id=thread_id,
            limit=UNBOUNDED if limit is None else limit,
        )
        one_thread(rows, thread_id)
        return [message_from_record(raw) for raw in rows[0]["messages"]]

    async def uncovered_summaries(self, partition: str, thread_id: str, level: int) -> list[Summary]:
        """Summaries of one level without a parent, in thread order (see `MemoryStore`)."""
        rows = await self._query(q.UNCOVERED_SUMMARIES, partition=partition, thread_id=thread_id, level=level)
        return [_summary(row["summary"]) for row in rows]

    async def persist_summary(self, summary: NewSummary) -> Summary:
        """Write a summary and its edges in one transaction under the thread's lock."""
        return (await self.persist_summaries([summary]))[0]

    async def persist_summaries(self, summaries: Sequence[NewSummary]) -> list[Summary]:
        """Write summaries of one level of one thread in one transaction under the thread's lock.

        The children are read (without their content), checked and found uncovered
        inside the same transaction that writes the summaries, after the lock is taken,
        so of two compactions of the same children exactly one succeeds and the other
        gets `Conflict`. Two statements whatever the batch's size, one read and one
        write (a second read only when a child is not of the kind its level expects).
        """
        check_summary_batch(summaries)
        first = summaries[0]
        created_at = utcnow()
        ids = [identity.summary_id(s.partition, s.thread_id, s.level, s.child_ids) for s in summaries]

        async def work(tx: AsyncManagedTransaction) -> list[Summary]:
            found: dict[str, tuple[Message | Summary, bool]] = {}
            wanted = [child_id for summary in summaries for child_id in summary.child_ids]
            # The children are sought as the level says; any not found are sought as the
            # other kind, so a child of the wrong level is refused as such, not as missing.
            lookups = [q.SUMMARY_BATCH_LOCK_MESSAGES, q.SUMMARY_BATCH_LOCK_SUMMARIES]
            for query in lookups if first.level == 1 else lookups[::-1]:
                rows = await self._run(
                    tx,
                    query,
                    thread_id=first.thread_id,
                    partition=first.partition,
                    child_ids=[child_id for child_id in wanted if child_id not in found],
                    summary_ids=ids,
                )
                one_thread(rows, first.thread_id)
                for child in rows[0]["messages"]:
                    found[child["props"]["id"]] = (message_from_record(child["props"]), child["covered"])
                for child in rows[0]["summaries"]:
                    node = _summary(child)
                    found[node.id] = (node, node.parent_id is not None)
                if len(found) == len(wanted):
                    break
            existing = set(rows[0]["existing"])
            derived: list[Summary] = []
            for summary in summaries:
                for child_id in summary.child_ids:
                    if child_id not in found:
                        raise NotFound("message" if summary.level == 1 else "summary", child_id)
                written = derive_summary(summary, [found[child_id][0] for child_id in summary.child_ids], created_at)
                if written.id in existing:
                    raise Conflict(f"summary {written.id} already exists")
                covered = [child_id for child_id in summary.child_ids if found[child_id][1]]
                if covered:
                    raise Conflict(f"{covered[0]} is already covered by another summary")
                derived.append(written)
            rows_out = [
                {
                    "props": written.model_dump(exclude={"child_ids", "parent_id"}),
                    "children": [{"id": child, "position": index} for index, child in enumerate(written.child_ids)],
                }
                for written in derived
            ]
            if first.level == 1:
                await self._run(
                    tx,
                    q.SUMMARY_BATCH_WRITE_OVER_MESSAGES,
                    partition=first.partition,
                    thread_id=first.thread_id,
                    covered=sum(len(summary.child_ids) for summary in summaries),
                    summaries=rows_out,
                )
            else:
                await self._run(tx, q.SUMMARY_BATCH_WRITE_OVER_SUMMARIES, summaries=rows_out)
            lowest = min(summary.first_seq for summary in derived)
            await keep_floors(tx, first.partition, first.thread_id, first.level, lowest)
            return derived

        return await self._transaction(work, write=True)

    async def get_summary(self, partition: str | None, summary_id: str) -> Summary:
        """One summary with ordered children and parent (see `MemoryStore`)."""
        rows = await self._query(q.GET_SUMMARY, partition=partition, id=summary_id)
        if not rows:
            raise NotFound("summary", summary_id)
        return _summary(rows[0]["summary"])

    async def _messages_in_range(self, top: Summary, offset: int, count: int) -> list[dict[str, Any]]:
        """The rows of ``count`` messages of ``top``'s range from ``offset``; none past its end."""
        if count <= 0:  # past the end there is nothing to read (and no seq to compute)
            return []
        return await self._query(
            q.MESSAGES_IN_RANGE,
            partition=top.partition,
            thread_id=top.thread_id,
            first_seq=top.first_seq + offset,
            last_seq=top.last_seq,
            limit=count,
        )

    async def expand(
        self,
        partition: str | None,
        summary_id: str,
        *,
        depth: int | None = None,
        limit: int = 200,
        cursor: str | None = None,
    ) -> ExpandPage:
        """A page of what a summary covers, in thread order (see `MemoryStore`).

        ``depth=None`` (or a depth reaching level 0) reads messages by the summary's seq
        range through the range index; a smaller depth walks SUMMARIZES edges down.
        """
        if depth is not None and depth < 1:
            raise InvalidInput(f"depth must be at least 1, got {depth}")
        check_limit(limit)
        offset = decode_cursor(cursor)
        top = await self.get_summary(partition, summary_id)
        target = 0 if depth is None else top.level - depth
        items: list[Message | Summary]
        if target <= 0:
            total = top.message_count
            # Whether the range is archived, and its page, asked at once: one wait for the
            # server instead of two (the page is dropped when the range is archived).
            archived, rows = await asyncio.gather(
                self._query(
                    q.ARCHIVED_OVERLAP,
                    partition=top.partition,
                    thread_id=top.thread_id,
                    first_seq=top.first_seq,
                    last_seq=top.last_seq,
                ),
                self._messages_in_range(top, offset, min(limit, total - offset)),
            )
            if archived:
                raise Archived(top.id, top.first_seq, top.last_seq, archived[0]["path"])
            items = [message_from_record(raw) for row in rows for raw in row["messages"]]
        else:
            rows = await self._query(q.DESCENDANTS, id=top.id, level=target, offset=offset, limit=limit)
            total = rows[0]["total"]
            page = [_summary(raw) for raw in rows[0]["page"]]
            page.sort(key=lambda node: node.first_seq)
            items = list(page)
        end = offset + len(items)
        return ExpandPage(
            summary_id=top.id,
            items=items,
            total=total,
            next_cursor=encode_cursor(end) if items and end < total else None,
        )

    async def covered_by(self, message_ids: Sequence[str]) -> dict[str, list[str]]:
        """The summary chain above each message, lowest level first (see `MemoryStore`)."""
        chains: dict[str, list[str]] = {message_id: [] for message_id in message_ids}
        if chains:
            for row in await self._query(q.COVERED_BY, ids=list(chains)):
                chains[row["id"]] = row["chain"]
        return chains

    async def frontier(self, partition: str, thread_id: str) -> list[FrontierItem]:
        """Top summaries and uncovered messages in thread order (see `MemoryStore`)."""
        rows = await self._query(q.FRONTIER, partition=partition, thread_id=thread_id)
        one_thread(rows, thread_id)
        return _frontier(rows[0]["items"])

    async def context_frontier(
        self, partition: str, thread_id: str, *, budget_tokens: int, limit: int
    ) -> ContextFrontier:
        """The frontier, its summaries and its newest page of messages, in one statement (see `MemoryStore`)."""
        check_limit(limit)
        rows = await self._query(
            q.CONTEXT_FRONTIER, partition=partition, thread_id=thread_id, budget=budget_tokens, limit=limit
        )
        one_thread(rows, thread_id)
        summaries = sorted((_summary(row) for row in rows[0]["summaries"]), key=lambda summary: summary.first_seq)
        tops = [
            FrontierItem(
                kind="summary", id=s.id, level=s.level, first_seq=s.first_seq, last_seq=s.last_seq, tokens=s.tokens
            )
            for s in summaries
        ]
        return ContextFrontier(
            items=sorted([*_frontier(rows[0]["messages"]), *tops], key=lambda item: item.first_seq),
            summaries=summaries,
            newest=[message_from_record(raw) for raw in rows[0]["newest"]],
        )

    async def summary_dag(self, partition: str, thread_id: str) -> SummaryDag:
        """Every summary, the summary-to-summary edges and the frontier, read at once."""

        async def work(tx: AsyncManagedTransaction) -> SummaryDag:
            rows = await self._run(tx, q.THREAD_SUMMARIES, partition=partition, thread_id=thread_id)
            one_thread(rows, thread_id)
            (frontier,) = await self._run(tx, q.FRONTIER, partition=partition, thread_id=thread_id)
            nodes = [_summary(row) for row in rows[0]["summaries"]]
            return SummaryDag(
                thread_id=thread_id,
                partition=partition,
                nodes=nodes,
                edges=[
                    DagEdge(parent_id=node.id, child_id=child_id, position=position)
                    for node in nodes
                    if node.level > 1
                    for position, child_id in enumerate(node.child_ids)
                ],
                frontier=_frontier(frontier["items"]),
            )

        return await self._transaction(work, write=False)

    async def compaction_candidates(
        self, partition: str | None, *, min_uncovered: int, limit: int
    ) -> list[ThreadBacklog]:
        """Threads by uncovered count from the thread counters (see `MemoryStore`)."""
        check_limit(limit)
        rows = await self._query(q.COMPACTION_CANDIDATES, partition=partition, min_uncovered=min_uncovered, limit=limit)
        return [ThreadBacklog.model_validate(row) for row in rows]

    async def snapshot(self, partition: str | None, thread_id: str) -> ThreadSnapshot:
        """The whole thread, in one read transaction (see `MemoryStore`)."""

        async def work(tx: AsyncManagedTransaction) -> ThreadSnapshot:
            rows = await self._run(tx, q.THREAD_SUMMARIES, partition=partition, thread_id=thread_id)
            one_thread(rows, thread_id)
            thread = thread_from_record(rows[0]["props"])
            (messages,) = await self._run(
                tx,
                q.GET_MESSAGES,
                partition=thread.partition,
                thread_id=thread_id,
                first_seq=0,
                last_seq=UNBOUNDED,
                limit=UNBOUNDED,
            )
            archived = await self._run(tx, q.ARCHIVED_RANGES, partition=None, thread_id=thread_id)
            return ThreadSnapshot(
                thread=thread,
                messages=[message_from_record(raw) for raw in messages["messages"]],
                summaries=[_summary(row) for row in rows[0]["summaries"]],
                archived=[ArchivedRange.model_validate(plain_props(row["props"])) for row in archived],
            )

        return await self._transaction(work, write=False)
