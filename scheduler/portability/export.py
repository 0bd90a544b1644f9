"""``export`` and ``import``: a memory (a store, a partition or a thread) to one archive file and back.

Export reads through the protocol only, thread by thread (its ``snapshot``), so it is
the same on both stores; import reads and checks the whole archive first
(`format.read_archive`: every record, the trailer, the counts, the digests, the
derived ids and the lossless invariants), then checks it against the store
(`checking`: no thread it clashes with, no known id with other content), and only then
writes, with `MemoryStore.restore_records`: one transaction on SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import Fact, Thread, utcnow
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.portability.checking import check_against_store, vectors_to_write
from palimpsest.scheduler.portability.copying import Advance, copy_vectors
from palimpsest.scheduler.portability.format import (
    ArchiveHeader,
    ArchiveWriter,
    ThreadEntry,
    VectorRecord,
    read_archive,
    thread_digest,
)

#: ``list_threads`` and ``list_facts`` have no cursor: ask for more than any store holds.
EVERYTHING = 10_000_000
#: Node ids whose vectors are read at once.
VECTOR_BATCH = 1000


class TransferReport(BaseModel):
    """What an export wrote, or an import read and wrote (what was already there is skipped)."""

    path: str
    store: str
    threads: int
    messages: int
    summaries: int
    facts: int
    vectors: int
    written: dict[str, int] = {}


async def threads_in_scope(store: MemoryStore, partition: str | None, thread_id: str | None) -> list[Thread]:
    """The threads an export or migrate covers, in a stable order (partition, id)."""
    if thread_id is not None:
        return [await store.get_thread(partition, thread_id)]
    threads = await store.list_threads(partition, limit=EVERYTHING)
    return sorted(threads, key=lambda thread: (thread.partition, thread.id))


async def export_memory(
    store: MemoryStore,
    path: Path,
    *,
    partition: str | None = None,
    thread_id: str | None = None,
    with_vectors: bool = False,
    advance: Advance | None = None,
) -> TransferReport:
    """Write the memory in scope to ``path`` as one archive (see `format`).

    Args:
        store: An initialized store.
        path: The archive to write; an existing file is replaced only once the new one is complete.
        partition: Only this partition; None exports every partition.
        thread_id: Only this thread (and its facts).
        with_vectors: Also the vectors of every exported node.
        advance: Told how many messages were just written.

    Raises:
        NotFound: If ``thread_id`` names no thread (of ``partition`` when given).
    """
    if path.is_dir():
        raise InvalidInput(f"{path} is a directory; give the archive's file name")
    threads = await threads_in_scope(store, partition, thread_id)
    try:
        writer = ArchiveWriter(path)
    except OSError as exc:
        raise InvalidInput(f"cannot write the archive {path}: {exc.strerror}") from None
    try:
        entries: list[ThreadEntry] = []
        node_ids: list[str] = []
        for listed in threads:
            snapshot = await store.snapshot(listed.partition, listed.id)
            writer.write("thread", snapshot.thread)
            layer = await store.fact_layer(listed.partition, listed.id)
            if not layer.enabled or layer.extracted_seq >= 0:
                writer.write("fact_layer", layer)
            for message in snapshot.messages:
                writer.write("message", message)
            summaries = sorted(snapshot.summaries, key=lambda summary: (summary.level, summary.first_seq))
            for summary in summaries:
                writer.write("summary", summary)
            entries.append(
                ThreadEntry(
                    partition=listed.partition,
                    id=listed.id,
                    messages=len(snapshot.messages),
                    summaries=len(summaries),
                    digest=thread_digest(snapshot.messages, summaries),
                )
            )
            if with_vectors:
                node_ids += [message.id for message in snapshot.messages] + [summary.id for summary in summaries]
            if advance is not None:
                advance(len(snapshot.messages))
        facts = await _facts(store, threads, partition, thread_id)
        for fact in facts:
            writer.write("fact", fact)
        if with_vectors:
            node_ids += [fact.id for fact in facts]
            for start in range(0, len(node_ids), VECTOR_BATCH):
                for vector in await store.read_embeddings(node_ids[start : start + VECTOR_BATCH]):
                    writer.write(
                        "vector", VectorRecord(node_id=vector.node_id, model=vector.model, vector=vector.vector)
                    )
    except BaseException:
        writer.abandon()
        raise
    header = ArchiveHeader(
        store=store.kind,
        created_at=utcnow(),
        partition=partition,
        thread_id=thread_id,
        counts=writer.counts,
        threads=entries,
    )
    writer.finish(header)
    return _report(path, store.kind, header)


async def _facts(
    store: MemoryStore, threads: Sequence[Thread], partition: str | None, thread_id: str | None
) -> list[Fact]:
    """The facts of the exported threads, oldest first (a superseded fact before its successor)."""
    facts = await store.list_facts(partition, thread_id=thread_id, current_only=False, limit=EVERYTHING)
    exported = {(thread.partition, thread.id) for thread in threads}
    kept = [fact for fact in facts if (fact.partition, fact.thread_id) in exported]
    return sorted(kept, key=lambda fact: (fact.created_at, fact.id))


def _report(path: Path, store: str, header: ArchiveHeader) -> TransferReport:
    return TransferReport(
        path=str(path),
        store=store,
        threads=header.counts["thread"],
        messages=header.counts["message"],
        summaries=header.counts["summary"],
        facts=header.counts["fact"],
        vectors=header.counts["vector"],
    )


async def import_archive(store: MemoryStore, path: Path, *, advance: Advance | None = None) -> TransferReport:
    """Check the whole archive, alone and against ``store``, then write into it whatever of it is missing there.

    A record the store holds exactly is skipped, so importing an archive again writes
    nothing. Vectors go last, after ``ensure_vector_index`` for each model has been
    checked before any record was written: they are derived data, each node's written
    whole, and a node's the store holds the same are not written again.

    Args:
        advance: Told how many of the archive's messages were just checked against the store.

    Raises:
        InvalidInput: If the archive is truncated, altered or not an export, or an id
            in it is not the one its record's fields give, naming the first bad
            record; nothing is written then.
        Conflict: If a record clashes with the store (see `checking`), or the store
            holds vectors of another size, naming it; nothing is written then.
    """
    archive = read_archive(path)
    await check_against_store(store, archive, path, advance=advance)
    vectors = await vectors_to_write(store, archive.vectors)
    for vector in {vector.model: vector for vector in vectors}.values():
        await store.ensure_vector_index(len(vector.vector), vector.model)
    messages, summaries, facts = await store.restore_records(archive.threads, archive.fact_layers, archive.facts)
    written = {
        "messages": messages,
        "summaries": summaries,
        "facts": facts,
        "vectors": await copy_vectors(store, vectors),
    }
    report = _report(path, archive.header.store, archive.header)
    report.written = written
    return report
