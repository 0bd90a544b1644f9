"""Reading and forging export archives, shared by the export and archive tests."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.models import Message, Summary
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.portability.format import (
    ArchiveHeader,
    ArchiveWriter,
    ThreadEntry,
    thread_digest,
)


def records(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        return [json.loads(line) for line in stream]


#: Changes one record's data in place, given its kind.
Change = Callable[[str, dict[str, Any]], None]


def forge(path: Path, change: Change) -> None:
    """Rewrite an archive with ``change`` applied to its records, every checksum, digest and count made again.

    What anyone can do to a file: its checks prove it whole, not honest, so what
    refuses the result must be the ids and the store.
    """
    lines = records(path)
    writer = ArchiveWriter(path)
    threads: dict[tuple[str, str], tuple[list[Message], list[Summary]]] = {}
    for record in lines[1:-1]:
        kind, data = record["kind"], record["data"]
        change(kind, data)
        writer.write(kind, data)
        if kind == "thread":
            threads[(data["partition"], data["id"])] = ([], [])
        elif kind == "message":
            threads[(data["partition"], data["thread_id"])][0].append(Message.model_validate(data))
        elif kind == "summary":
            threads[(data["partition"], data["thread_id"])][1].append(Summary.model_validate(data))
    entries = [
        ThreadEntry(partition=p, id=t, messages=len(m), summaries=len(s), digest=thread_digest(m, s))
        for (p, t), (m, s) in threads.items()
    ]
    header = ArchiveHeader.model_validate(lines[0])
    writer.finish(header.model_copy(update={"counts": writer.counts, "threads": entries}))


def at_seq(thread_id: str, seq: int, change: Callable[[dict[str, Any]], None]) -> Change:
    """A `Change` of the message of one seq of one thread."""

    def apply(kind: str, data: dict[str, Any]) -> None:
        if kind == "message" and (data["thread_id"], data["seq"]) == (thread_id, seq):
            change(data)

    return apply


async def state(store: MemoryStore) -> dict[str, Any]:
    """What a store holds, down to every field: counts, every thread's digest, every fact."""
    stats = await store.stats(None)
    digests = {}
    for thread in await store.list_threads(None, limit=1000):
        snapshot = await store.snapshot(thread.partition, thread.id)
        digests[(thread.partition, thread.id)] = (snapshot.thread, thread_digest(snapshot.messages, snapshot.summaries))
    facts = await store.list_facts(None, current_only=False, limit=1000)
    return {"messages": stats.messages, "summaries": stats.summaries_by_level, "threads": digests, "facts": facts}
