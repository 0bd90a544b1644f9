"""Storage benchmark, run by hand: bytes on disk per message, and a 100k migration round trip.

How big a memory gets, and where the bytes go. It fills a SQLite store with agent
sessions (threads of 1,000 messages from ``compaction.make_thread``), compacts every
thread with the extractive summarizer and gives every message and summary a
384-number vector (random unit vectors: a vector's size does not depend on its
values), then migrates it to Neo4j with ``palimpsest migrate``'s code and back to a
fresh SQLite file, checking every thread's digest both ways. It prints bytes per
message for each store split into content (the messages themselves), text index,
vectors and graph (threads, summaries, edges, facts, other indexes), beside the same
messages as raw JSON Lines and gzip-compressed.

    .venv/bin/python bench/storage.py --messages 100000 --neo4j-uri bolt://127.0.0.1:PORT \\
        --neo4j-data .cache/neo4j/bench/home/data/databases/neo4j

Neo4j must be a fresh, empty server of its own, whose store files are measured: start
one with ``NEO4J_STATE=.cache/neo4j/bench tools/neo4j.sh start``. Writes not yet
checkpointed sit in its transaction logs (Neo4j checkpoints every 15 minutes and on
shutdown), whose size is printed apart. Without ``--neo4j-uri`` only SQLite is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import logging
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from compaction import make_thread
from rich.console import Console
from rich.table import Table

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.models import MAX_BATCH, NewMessage
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.compaction import compact_thread
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.scheduler.extractive import ExtractiveSummarizer
from palimpsest.scheduler.portability.export import EVERYTHING
from palimpsest.scheduler.portability.format import thread_digest
from palimpsest.scheduler.portability.migrate import migrate_memory

THREAD_SIZE = 1000
DIMENSIONS = 384
MODEL = "bench-random-384"
PARTS = ("content", "text index", "vectors", "graph")


def sessions(total: int) -> list[tuple[str, list[NewMessage]]]:
    """``total`` messages as threads of ``THREAD_SIZE``, deterministic."""
    threads = []
    for index in range(0, total, THREAD_SIZE):
        threads.append((f"session-{index // THREAD_SIZE:04d}", make_thread(min(THREAD_SIZE, total - index), index)))
    return threads


def raw_sizes(threads: list[tuple[str, list[NewMessage]]], folder: Path) -> tuple[int, int]:
    """Bytes of the messages as Palimpsest's ingest JSON Lines, plain and gzip (level 6)."""
    path = folder / "messages.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for thread_id, messages in threads:
            for message in messages:
                line = {"thread_id": thread_id, **message.model_dump(mode="json", exclude_defaults=True)}
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
    data = path.read_bytes()
    return len(data), len(gzip.compress(data, compresslevel=6))


async def fill(store: MemoryStore, threads: list[tuple[str, list[NewMessage]]]) -> None:
    """Append, compact and embed every thread."""
    rng = np.random.default_rng(7)
    await store.ensure_vector_index(DIMENSIONS, MODEL)
    for number, (thread_id, messages) in enumerate(threads):
        for offset in range(0, len(messages), MAX_BATCH):
            await store.append_messages("bench", thread_id, messages[offset : offset + MAX_BATCH], project="bench")
        await compact_thread(store, "bench", thread_id, CompactionSettings(), ExtractiveSummarizer())
        snapshot = await store.snapshot("bench", thread_id)
        ids = [m.id for m in snapshot.messages] + [s.id for s in snapshot.summaries]
        vectors = rng.standard_normal((len(ids), DIMENSIONS)).astype("float32")
        for offset in range(0, len(ids), 1000):
            batch = [(node_id, vectors[offset + i].tolist()) for i, node_id in enumerate(ids[offset : offset + 1000])]
            await store.set_embeddings(batch, MODEL)
        if number % 10 == 0:
            logging.info("filled %d of %d threads", number + 1, len(threads))


def sqlite_parts(path: Path) -> dict[str, int]:
    """Bytes of each part of a SQLite file, from its pages (``dbstat``), after a WAL checkpoint."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        parts = dict.fromkeys(PARTS, 0)
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            if "_fts" in name:
                parts["text index"] += size
            elif name == "messages" or name.startswith("sqlite_autoindex_messages"):
                parts["content"] += size
            elif name.startswith(("embeddings", "sqlite_autoindex_embeddings", "vector_index")):
                parts["vectors"] += size
            else:
                parts["graph"] += size
    return parts


def neo4j_parts(folder: Path) -> dict[str, int]:
    """Bytes of each part of a Neo4j database folder, by store file and index kind."""
    parts = dict.fromkeys(PARTS, 0)
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        relative = path.relative_to(folder).as_posix()
        size = path.stat().st_size
        if relative.startswith("schema/index/fulltext"):
            parts["text index"] += size
        elif relative.startswith("schema/index/vector") or relative.startswith("neostore.propertystore.db.arrays"):
            parts["vectors"] += size
        elif relative.startswith("neostore.propertystore.db"):
            parts["content"] += size
        else:
            parts["graph"] += size
    return parts


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


async def digests(store: MemoryStore) -> dict[str, str]:
    found = {}
    for thread in await store.list_threads(None, limit=EVERYTHING):
        snapshot = await store.snapshot(thread.partition, thread.id)
        found[thread.id] = thread_digest(snapshot.messages, snapshot.summaries)
    return found


async def opened(uri: str) -> MemoryStore:
    credentials = Neo4jCredentials(
        user=os.environ.get("NEO4J_USER", "neo4j"), password=os.environ.get("NEO4J_PASSWORD")
    )
    store = open_store(uri, credentials)
    await store.initialize()
    return store


async def run(args: argparse.Namespace, folder: Path) -> tuple[dict[str, dict[str, int]], list[str], int]:
    """Fill SQLite, migrate to Neo4j and back; each store's parts, the migration log, messages."""
    threads = sessions(args.messages)
    results: dict[str, dict[str, int]] = {}
    raw, packed = raw_sizes(threads, folder)
    results["raw JSON Lines"] = {"total": raw}
    results["gzip JSON Lines"] = {"total": packed}
    sqlite_path = folder / "memory.db"
    source = await opened(f"sqlite:///{sqlite_path}")
    log: list[str] = []
    try:
        start = time.perf_counter()
        await fill(source, threads)
        log.append(f"filled SQLite in {time.perf_counter() - start:.0f}s")
        results["SQLite"] = sqlite_parts(sqlite_path)
        if args.neo4j_uri:
            target = await opened(args.neo4j_uri)
            try:
                if (await target.stats(None)).threads:
                    raise SystemExit("the Neo4j server is not empty: start a fresh one for this benchmark")
                start = time.perf_counter()
                there = await migrate_memory(source, target)
                log.append(f"migrated SQLite -> Neo4j in {time.perf_counter() - start:.0f}s: {there.written}")
                log += [f"mismatch: {m}" for m in there.mismatches]
                if args.neo4j_data:
                    results["Neo4j"] = neo4j_parts(args.neo4j_data)
                    logs = args.neo4j_data.parent.parent / "transactions" / args.neo4j_data.name
                    if logs.is_dir():
                        log.append(f"Neo4j transaction logs (not in the table): {folder_bytes(logs) / 1e6:,.0f} MB")
                back = await opened(f"sqlite:///{folder / 'back.db'}")
                try:
                    start = time.perf_counter()
                    again = await migrate_memory(target, back)
                    log.append(f"migrated Neo4j -> SQLite in {time.perf_counter() - start:.0f}s: {again.written}")
                    log += [f"mismatch: {m}" for m in again.mismatches]
                    original, returned = await digests(source), await digests(back)
                    equal = sum(original[key] == returned.get(key) for key in original)
                    log.append(f"thread digests equal after the round trip: {equal} of {len(original)}")
                finally:
                    await back.close()
            finally:
                await target.close()
    finally:
        await source.close()
    return results, log, args.messages


def render(results: dict[str, dict[str, int]], messages: int) -> Table:
    table = Table(title=f"Bytes on disk per message ({messages:,} messages, compacted, a 384-number vector each)")
    for column in ("form", *PARTS, "total", "vs raw JSONL"):
        table.add_column(column, justify="left" if column == "form" else "right")
    raw = results["raw JSON Lines"]["total"]
    for form, parts in results.items():
        if not parts:
            continue
        total = parts.get("total", sum(parts.get(part, 0) for part in PARTS))
        cells = [f"{parts[part] / messages:,.0f}" if part in parts else "" for part in PARTS]
        table.add_row(form, *cells, f"{total / messages:,.0f}", f"{total / raw:.2f}x")
    return table


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000, help="Messages in all (default: %(default)s).")
    parser.add_argument("--neo4j-uri", default=os.environ.get("NEO4J_URI"), help="A fresh Neo4j (default: $NEO4J_URI).")
    parser.add_argument("--neo4j-data", type=Path, help="That server's database folder, to measure its files.")
    parser.add_argument("--verbose", action="store_true", help="Log progress to stderr.")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    logging.getLogger("neo4j").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="palimpsest-storage-") as scratch:
        results, log, messages = asyncio.run(run(args, Path(scratch)))
    console = Console() if sys.stdout.isatty() else Console(width=200)
    console.print(render(results, messages))
    for line in log:
        console.print(line, markup=False)


if __name__ == "__main__":
    main()
