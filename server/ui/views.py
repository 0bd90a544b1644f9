"""What each viewer page shows, gathered through the store protocol and the retrieval functions.

The viewer reads memory the way the MCP tools do (the same store verbs, ``grep_memories``,
``doctor``'s digest check), so a page never shows something a tool would not. Every
function takes the partition explicitly: which partitions a caller may see is decided
before these run (``server/ui/access.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, Field

from palimpsest.graph_schema.doctor import check_snapshot
from palimpsest.graph_schema.models import (
    ExpandPage,
    MaintenanceCycle,
    Message,
    StoreStats,
    Summary,
    Thread,
    ThreadBacklog,
)
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.maintenance import backlog_floor
from palimpsest.server.mcp.metrics import ToolMetric
from palimpsest.server.mcp.partitions import shared_cycle
from palimpsest.server.mcp.tools import LAST_CYCLES, PENDING_THREADS, Runtime

#: Threads read to find which partitions exist when no token limits them.
PARTITION_SCAN = 10_000
#: Messages shown per page when a summary is expanded.
EXPAND_PAGE = 50


class PartitionRow(BaseModel):
    """One partition on the index page."""

    name: str
    stats: StoreStats


class CycleRow(BaseModel):
    """A maintenance cycle as ``memory_stats`` shows it (``shared_cycle``): no host, pid or thread."""

    cycle: MaintenanceCycle
    errors: int = Field(description="How many errors it had (their text names threads: only its log has it).")


class Overview(BaseModel):
    """The index page: partitions the caller may see, this server's tools, the last cycles."""

    partitions: list[PartitionRow]
    tools: list[ToolMetric]
    last_cycles: list[CycleRow]
    store_kind: str
    bytes_on_disk: int | None = Field(None, description="The whole store's files (shown when every partition is).")
    bytes_reclaimable: int | None = None
    archive_bytes: int | None = None


class PartitionPage(BaseModel):
    """A partition: its counts and what waits for compaction (its sessions: `server/ui/sessions.py`)."""

    partition: str
    stats: StoreStats
    pending: list[ThreadBacklog]


class SummaryNode(BaseModel):
    """A summary as the DAG page draws it."""

    summary: Summary
    verified: bool = Field(description="Its digest matches the one recomputed from the messages up.")

    @property
    def ratio(self) -> float:
        """How many times shorter it is than what it summarizes."""
        return self.summary.source_tokens / self.summary.tokens if self.summary.tokens else 0.0


class ThreadDag(BaseModel):
    """A thread's summaries by level, each with its digest verdict."""

    thread: Thread
    levels: dict[int, list[SummaryNode]] = Field(description="Level -> summaries in thread order, top level first.")
    uncovered: list[tuple[int, int]] = Field(description="Runs of seq no summary covers, the fresh tail among them.")
    message_count: int
    checked: bool = Field(True, description="Whether the digests were recomputed (else `verified` says nothing).")


class SummaryDetail(BaseModel):
    """One summary opened: its text, its children and its parent."""

    node: SummaryNode
    child_summaries: list[Summary]


async def overview(runtime: Runtime, allowed: frozenset[str] | None) -> Overview:
    """The partitions the caller may see (every one in the store when ``allowed`` is None)."""
    store = runtime.store
    if allowed is None:
        names = sorted({thread.partition for thread in await store.list_threads(None, limit=PARTITION_SCAN)})
    else:
        names = sorted(allowed)
    rows = [PartitionRow(name=name, stats=await store.stats(name)) for name in names]
    # The size is the store's, not a partition's: shown only to a caller who sees them all.
    whole = await store.stats(None) if allowed is None else None
    cycles = await store.recent_cycles(LAST_CYCLES)
    return Overview(
        partitions=rows,
        tools=runtime.metrics.snapshot(),
        last_cycles=[CycleRow(cycle=shared_cycle(cycle), errors=len(cycle.errors)) for cycle in cycles],
        store_kind=store.kind,
        bytes_on_disk=None if whole is None else whole.bytes_on_disk,
        bytes_reclaimable=None if whole is None else whole.bytes_reclaimable,
        archive_bytes=None if whole is None else whole.archive_bytes,
    )


async def partition_page(runtime: Runtime, partition: str) -> PartitionPage:
    """A partition's counts and its threads waiting for compaction."""
    store = runtime.store
    return PartitionPage(
        partition=partition,
        stats=await store.stats(partition),
        pending=await store.compaction_candidates(
            partition, min_uncovered=backlog_floor(runtime.settings.compaction), limit=PENDING_THREADS
        ),
    )


async def thread_dag(store: MemoryStore, partition: str, thread_id: str) -> ThreadDag:
    """A thread's DAG by level, every digest recomputed from the messages up (``doctor``'s check)."""
    snapshot = await store.snapshot(partition, thread_id)
    broken = {breach.node_id for breach in check_snapshot(snapshot) if breach.invariant == 4}
    levels: dict[int, list[SummaryNode]] = {}
    for summary in sorted(snapshot.summaries, key=lambda node: (-node.level, node.first_seq)):
        levels.setdefault(summary.level, []).append(SummaryNode(summary=summary, verified=summary.id not in broken))
    covered = {seq for summary in snapshot.summaries if summary.level == 1 for seq in _seqs(summary)}
    return ThreadDag(
        thread=snapshot.thread,
        levels=levels,
        uncovered=_runs(message.seq for message in snapshot.messages if message.seq not in covered),
        message_count=len(snapshot.messages),
    )


def _seqs(summary: Summary) -> range:
    return range(summary.first_seq, summary.last_seq + 1)


def _runs(seqs: Iterable[int]) -> list[tuple[int, int]]:
    """Consecutive seqs folded into (first, last) runs."""
    runs: list[tuple[int, int]] = []
    for seq in sorted(seqs):
        if runs and runs[-1][1] == seq - 1:
            runs[-1] = (runs[-1][0], seq)
        else:
            runs.append((seq, seq))
    return runs


async def summary_detail(store: MemoryStore, partition: str, summary_id: str) -> SummaryDetail:
    """A summary with its full text, its child summaries, and whether its digest verifies."""
    summary = await store.get_summary(partition, summary_id)
    snapshot = await store.snapshot(partition, summary.thread_id)
    verified = not any(breach.invariant == 4 and breach.node_id == summary.id for breach in check_snapshot(snapshot))
    children = [node for node in snapshot.summaries if node.id in set(summary.child_ids)]
    children.sort(key=lambda node: node.first_seq)
    return SummaryDetail(node=SummaryNode(summary=summary, verified=verified), child_summaries=children)


async def expand_messages(store: MemoryStore, partition: str, summary_id: str, cursor: str | None) -> ExpandPage:
    """One page of the original messages a summary covers (``expand_summary`` with no depth)."""
    return await store.expand(partition, summary_id, limit=EXPAND_PAGE, cursor=cursor)


def page_messages(page: ExpandPage) -> list[Message]:
    """The messages of an expand page (with no depth, every item is one)."""
    return [item for item in page.items if isinstance(item, Message)]


def time_range(first: datetime, last: datetime) -> str:
    """``2026-11-30 10:04 → 10:31``: the date once when both ends share it."""
    start = first.strftime("%Y-%m-%d %H:%M")
    end = last.strftime("%H:%M" if first.date() == last.date() else "%Y-%m-%d %H:%M")
    return f"{start} → {end}"
