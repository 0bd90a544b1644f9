"""``migrate``: copy a whole memory from one store to another, then prove the copy equal.

A person moves from the embedded SQLite file to a team's Neo4j (or back) with one
command. The copy goes thread by thread through the transfer verbs, in batches of one
transaction each; every verb skips what the target already holds, so a migration
killed half-way and run again finishes the job without duplicating anything. At the
end the two stores are compared: their counts, and every thread's digest
(`format.thread_digest`, over every field of every message and summary).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, Field

from palimpsest.graph_schema.errors import NotFound
from palimpsest.graph_schema.models import StoreStats
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.portability.copying import Advance, copy_fact_layer, copy_facts, copy_thread, copy_vectors
from palimpsest.scheduler.portability.export import EVERYTHING, VECTOR_BATCH, threads_in_scope
from palimpsest.scheduler.portability.format import thread_digest

#: Told the number of messages to copy, once, before the copy starts.
Start = Callable[[int], None]


class MigrateReport(BaseModel):
    """What a migration wrote and whether the target now equals the source."""

    source: str
    target: str
    threads: int
    written: dict[str, int]
    mismatches: list[str] = Field(
        description="Each difference between the stores, one sentence each; empty when equal."
    )


async def migrate_memory(
    source: MemoryStore, target: MemoryStore, *, start: Start | None = None, advance: Advance | None = None
) -> MigrateReport:
    """Copy everything of ``source`` (every partition) into ``target`` and compare them.

    Args:
        source: The store to copy from, initialized; only read.
        target: The store to copy into, initialized; what it holds already is kept.
        start: Told how many messages the source holds, before the copy.
        advance: Told how many messages were just copied.

    Raises:
        Conflict: If a thread of the source exists in the target under another partition.
    """
    totals = await source.stats(None)
    if start is not None:
        start(totals.messages)
    threads = await threads_in_scope(source, None, None)
    written = {"messages": 0, "summaries": 0, "facts": 0, "vectors": 0}
    digests: dict[tuple[str, str], str] = {}
    for thread in threads:
        snapshot = await source.snapshot(thread.partition, thread.id)
        messages, summaries = await copy_thread(target, snapshot, advance)
        written["messages"] += messages
        written["summaries"] += summaries
        await copy_fact_layer(target, await source.fact_layer(thread.partition, thread.id))
        node_ids = [message.id for message in snapshot.messages] + [summary.id for summary in snapshot.summaries]
        written["vectors"] += await _copy_vectors_of(source, target, node_ids)
        digests[(thread.partition, thread.id)] = thread_digest(snapshot.messages, snapshot.summaries)
    facts = await source.list_facts(None, current_only=False, limit=EVERYTHING)
    facts.sort(key=lambda fact: (fact.created_at, fact.id))
    written["facts"] = await copy_facts(target, facts)
    written["vectors"] += await _copy_vectors_of(source, target, [fact.id for fact in facts])
    mismatches = _count_mismatches(totals, await target.stats(None))
    for (partition, thread_id), digest in digests.items():
        try:
            copied = await target.snapshot(partition, thread_id)
        except NotFound:
            mismatches.append(f"thread {thread_id!r} of partition {partition!r} is missing from the target")
            continue
        if thread_digest(copied.messages, copied.summaries) != digest:
            mismatches.append(f"thread {thread_id!r} of partition {partition!r} has another digest in the target")
    return MigrateReport(
        source=source.kind, target=target.kind, threads=len(threads), written=written, mismatches=mismatches
    )


async def _copy_vectors_of(source: MemoryStore, target: MemoryStore, node_ids: list[str]) -> int:
    written = 0
    for start in range(0, len(node_ids), VECTOR_BATCH):
        vectors = await source.read_embeddings(node_ids[start : start + VECTOR_BATCH])
        written += await copy_vectors(target, vectors)
    return written


def _count_mismatches(source: StoreStats, target: StoreStats) -> list[str]:
    """Each count that differs between the two stores, named."""
    mismatches = []
    for field in ("threads", "messages", "summaries_by_level", "facts", "tokens"):
        mine, theirs = getattr(source, field), getattr(target, field)
        if mine != theirs:
            mismatches.append(f"{field}: the source holds {mine}, the target {theirs}")
    return mismatches
