"""Ingest throughput: Palimpsest's real ingest path beside a bare write of the same rows.

Run by hand (not a test)::

    .venv/bin/python bench/ingest.py --sizes 10000,100000 --neo4j-uri bolt://127.0.0.1:7687

For each store and size it generates one JSONL file (realistic turns of 200-2000
characters, threads of ``--thread-size`` messages) and times ``ingest_files`` on it:
parsing, validation, ids and hashes, and the store's appends. Beside it, in the same run,
the same rows are written with no product logic at all:

- SQLite: a bare ``executemany`` INSERT into a fresh file initialized by ``SqliteStore``
  (same table, indexes and FTS trigger, same WAL and ``synchronous`` pragmas), one
  transaction per batch.
- Neo4j: a bare ``UNWIND $rows AS row CREATE (m:Message) SET m = row`` per batch after
  wiping the nodes (the store's constraints and indexes stay, as for the real path). The
  rows have the columns the real path sends, ``created_at`` as epoch microseconds as it
  sends it (a Python datetime would cost the driver ~0.1 ms a row to pack); the bare
  write stores that int as is, where the real path builds a DateTime from it.

Batches have the size the real path uses (one thread, at most ``MAX_BATCH``). The ratio
ours/raw is what the goals are about: SQLite >= 50 %, Neo4j >= 60 %. ``--profile``
prints where the real path's main thread spends its time (cProfile). This script may use
sqlite3 and Cypher itself: it is a measuring tool, not product code.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import random
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.identity import estimate_tokens, message_id, message_sha256
from palimpsest.graph_schema.models import MAX_BATCH
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.feeds.ingest import ingest_files, parse_jsonl

GOALS = {"sqlite": 0.50, "neo4j": 0.60}
PARTITION = "bench"
WORDS = (
    "the refresh token rotates every fifteen minutes so auth/service.py keeps a cache of "
    "signing keys def login(request) returns a JWT pytest fails on test_login because the "
    "fixture builds a user without email we should migrate the schema with alembic then "
    "run make test again error ImportError cannot import name TokenStore from auth.store "
    "decision keep SQLite for local development and Neo4j for the team deployment"
).split()
_SQLITE_COLUMNS = (
    "id, source_id, thread_id, partition, project, seq, role, content, sha256, tokens, "
    "created_at, tool_call_id, metadata"
)
_SQLITE_INSERT = f"INSERT INTO messages ({_SQLITE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_NEO4J_CREATE = "UNWIND $rows AS row CREATE (m:Message) SET m = row"
_NEO4J_WIPE = "MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"


@dataclass
class Measure:
    """One store at one size: the real path and the bare write of the same rows."""

    store: str
    size: int
    ours_s: float
    parse_s: float
    raw_s: float

    @property
    def ratio(self) -> float:
        """Ours over raw, in messages per second (1.0 = as fast as the bare write)."""
        return self.raw_s / self.ours_s


def generate(path: Path, size: int, thread_size: int, seed: int = 7) -> list[dict[str, Any]]:
    """Write a JSONL file of ``size`` messages and return its records (for the raw rows)."""
    rng = random.Random(seed)
    start = datetime(2024, 5, 1, tzinfo=UTC)
    records: list[dict[str, Any]] = []
    with path.open("w", encoding="utf-8") as handle:
        for index in range(size):
            words: list[str] = []
            target = rng.randint(200, 2000)
            length = 0
            while length < target:
                word = rng.choice(WORDS)
                words.append(word)
                length += len(word) + 1
            record = {
                "thread_id": f"bench-{index // thread_size:05d}",
                "role": ("user", "assistant", "tool", "assistant")[index % 4],
                "content": " ".join(words)[:target],
                "message_id": f"m{index}",
                "created_at": (start + timedelta(seconds=index)).isoformat(),
            }
            if record["role"] == "tool":
                record["tool_call_id"] = f"call-{index}"
            records.append(record)
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return records


def raw_rows(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rows the real path writes, computed up front, cut into the real path's batches."""
    batches: list[list[dict[str, Any]]] = []
    seqs: dict[str, int] = {}
    current: str | None = None
    for record in records:
        thread_id = record["thread_id"]
        seq = seqs.get(thread_id, 0)
        seqs[thread_id] = seq + 1
        if thread_id != current or len(batches[-1]) >= MAX_BATCH:
            batches.append([])
            current = thread_id
        created = datetime.fromisoformat(record["created_at"]).astimezone(UTC)
        batches[-1].append(
            {
                "id": message_id(PARTITION, thread_id, record["message_id"]),
                "source_id": record["message_id"],
                "thread_id": thread_id,
                "partition": PARTITION,
                "project": None,
                "seq": seq,
                "role": record["role"],
                "content": record["content"],
                "sha256": message_sha256(
                    PARTITION,
                    thread_id,
                    record["message_id"],
                    record["role"],
                    record["content"],
                    record.get("tool_call_id"),
                ),
                "tokens": estimate_tokens(record["content"]),
                "created_at": created.isoformat(timespec="microseconds"),
                "tool_call_id": record.get("tool_call_id"),
                "metadata": "{}",
            }
        )
    return batches


async def time_ours(store: MemoryStore, path: Path, profile: bool) -> float:
    """Seconds ``ingest_files`` takes on an initialized, empty store."""
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    report = await ingest_files(store, [path], partition=PARTITION)
    if profiler is not None:
        profiler.disable()
    elapsed = time.perf_counter() - started
    if report.appended != report.messages:
        raise SystemExit(f"expected a fresh store, {report.duplicates} duplicates")
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(18)
        Console(stderr=True).print(f"[bold]cProfile of ingest_files ({store.kind}, main thread, by tottime)")
        print(out.getvalue(), file=sys.stderr)
    return elapsed


def time_parse(path: Path) -> float:
    """Seconds spent parsing and validating alone (part of ours)."""
    started = time.perf_counter()
    parse_jsonl(path, partition=PARTITION)
    return time.perf_counter() - started


async def bench_sqlite(
    workdir: Path, path: Path, batches: list[list[dict[str, Any]]], profile: bool
) -> tuple[float, float]:
    """(ours, raw) seconds on SQLite, each on a fresh file initialized by SqliteStore."""
    for stale in workdir.glob("*.db*"):
        stale.unlink()
    ours_file = workdir / "ours.db"
    store = open_store(f"sqlite:///{ours_file}")
    await store.initialize()
    try:
        ours = await time_ours(store, path, profile)
    finally:
        await store.close()

    raw_file = workdir / "raw.db"
    empty = open_store(f"sqlite:///{raw_file}")
    await empty.initialize()
    await empty.close()
    conn = sqlite3.connect(raw_file, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    tuples = [[tuple(row.values()) for row in batch] for batch in batches]
    started = time.perf_counter()
    for batch in tuples:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(_SQLITE_INSERT, batch)
        conn.execute("COMMIT")
    raw = time.perf_counter() - started
    conn.close()
    return ours, raw


def epoch_us(iso: str) -> int:
    """An ISO timestamp as the Neo4j store sends it: microseconds since the epoch."""
    return (datetime.fromisoformat(iso) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


async def wipe(driver: Any) -> None:
    """Delete every node (the schema stays); CALL IN TRANSACTIONS needs an auto-commit session."""
    async with driver.session() as session:
        result = await session.run(_NEO4J_WIPE)
        await result.consume()


async def bench_neo4j(uri: str, path: Path, batches: list[list[dict[str, Any]]], profile: bool) -> tuple[float, float]:
    """(ours, raw) seconds on Neo4j, the database wiped of nodes before each."""
    import neo4j

    password = os.environ.get("NEO4J_PASSWORD")
    user = os.environ.get("NEO4J_USER", "neo4j")
    auth = (user, password) if password else None
    driver = neo4j.AsyncGraphDatabase.driver(uri, auth=auth)
    try:
        await wipe(driver)
        store = open_store(uri, Neo4jCredentials(user=user, password=password))
        await store.initialize()
        try:
            ours = await time_ours(store, path, profile)
        finally:
            await store.close()
        await wipe(driver)
        sent = [[row | {"created_at": epoch_us(row["created_at"])} for row in batch] for batch in batches]
        started = time.perf_counter()
        for batch in sent:
            await driver.execute_query(_NEO4J_CREATE, rows=batch)
        raw = time.perf_counter() - started
        await wipe(driver)
    finally:
        await driver.close()
    return ours, raw


async def best_of(repeat: int, measure: Any, *args: Any) -> tuple[float, float]:
    """The fastest (ours, raw) of ``repeat`` runs: the machine's noise only ever adds time."""
    runs = [await measure(*args) for _ in range(repeat)]
    return min(run[0] for run in runs), min(run[1] for run in runs)


async def run(sizes: list[int], neo4j_uri: str | None, thread_size: int, profile: bool, repeat: int) -> list[Measure]:
    """Every store at every size, one generated file per size."""
    console = Console(stderr=True)
    results: list[Measure] = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="palimpsest-bench-") as tmp:
            workdir = Path(tmp)
            path = workdir / "messages.jsonl"
            console.print(f"generating {size:,} messages...")
            records = generate(path, size, thread_size)
            batches = raw_rows(records)
            del records
            parse = min(time_parse(path) for _ in range(repeat))
            console.print(f"sqlite, {size:,} messages...")
            ours, raw = await best_of(repeat, bench_sqlite, workdir, path, batches, profile)
            results.append(Measure("sqlite", size, ours, parse, raw))
            if neo4j_uri:
                console.print(f"neo4j, {size:,} messages...")
                ours, raw = await best_of(repeat, bench_neo4j, neo4j_uri, path, batches, profile)
                results.append(Measure("neo4j", size, ours, parse, raw))
    return results


def table(results: list[Measure]) -> Table:
    """The results: messages per second, ours and raw, and the ratio against the goal."""
    out = Table(title="ingest throughput (messages/s)")
    for name in ("store", "messages", "ours msg/s", "raw msg/s", "ours/raw", "goal", "parse s", "ours s", "raw s"):
        out.add_column(name, justify="left" if name == "store" else "right")
    for item in results:
        goal = GOALS[item.store]
        met = "[green]ok[/green]" if item.ratio >= goal else "[red]missed[/red]"
        out.add_row(
            item.store, f"{item.size:,}", f"{item.size / item.ours_s:,.0f}", f"{item.size / item.raw_s:,.0f}",
            f"{item.ratio:.0%}", f">= {goal:.0%} {met}", f"{item.parse_s:.2f}", f"{item.ours_s:.2f}",
            f"{item.raw_s:.2f}",
        )  # fmt: skip
    return out


def main() -> None:
    """Parse the options, run every measure, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated message counts")
    parser.add_argument("--neo4j-uri", default=os.environ.get("NEO4J_URI"), help="bolt URI; default $NEO4J_URI")
    parser.add_argument("--thread-size", type=int, default=1000, help="messages per thread")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each measure; the fastest counts")
    parser.add_argument("--profile", action="store_true", help="print cProfile of the real path")
    args = parser.parse_args()
    sizes = [int(size.replace("_", "")) for size in args.sizes.split(",") if size]
    if not args.neo4j_uri:
        Console(stderr=True).print("no --neo4j-uri nor NEO4J_URI: measuring SQLite only")
    results = asyncio.run(run(sizes, args.neo4j_uri, args.thread_size, args.profile, args.repeat))
    # Piped output (a report, a log) gets the whole table rather than 80 squeezed columns.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    console.print(table(results))


if __name__ == "__main__":
    main()
