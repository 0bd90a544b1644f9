"""Compaction and expansion benchmark, run by hand: is the summary DAG cheap enough?

Three goals: compacting costs under 1 ms per message, and at most twice what appending
the same messages cost (summarizer included: it runs on every append's compaction);
and expanding a high summary back to its messages costs within 2x of reading the same
messages straight from the store. For each store and thread size it appends a realistic thread,
compacts it to a full DAG with the extractive summarizer (defaults: threshold 30, fresh
tail 10, fan-in 4), then times the expansion of the level-3+ summary closest to 10k
messages against ``get_messages`` over the same seq range, interleaved, median of
several runs.

The yardstick is the cheapest insert there is, measured in the same run on the same
store: the thread appended in calls of up to ``MAX_BATCH`` (5,000) messages. Hooks
append a turn at a time, which costs more per message, so "x append" is an upper bound
of what compaction adds to real appends.

    .venv/bin/python bench/compaction.py --sizes 10000 --neo4j-uri bolt://127.0.0.1:7687
    .venv/bin/python bench/compaction.py --sizes 1000 --stores sqlite   # a quick look

The Neo4j run writes one new thread per size under a ``bench-...`` partition and never
deletes anything: point it at a throwaway database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.models import MAX_BATCH, Message, NewMessage, Role, Summary
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.compaction import compact_thread
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.scheduler.extractive import ExtractiveSummarizer
from palimpsest.scheduler.summarizer import Background, SummaryDraft

EXPAND_TARGET = 10_000
COMPACTION_GOAL_MS = 1.0
#: Compaction, summarizer included, at most this many times the cost of appending the same messages.
APPEND_GOAL_RATIO = 2.0
EXPANSION_GOAL_RATIO = 2.0

_WORDS = (
    "token refresh jwt verify expired claims route handler migration postgres sqlite cache redis "
    "fixture pytest assertion failed passed config timeout retry backoff schema index query commit "
    "branch diff patch rename alias deprecate docker compose build deploy log trace error warning"
).split()
_TOOLS = ["Read", "Read", "Edit", "Bash"]
_FILES = ["src/auth/jwt.py", "src/api/routes.py", "tests/test_refresh.py", "pyproject.toml", "src/db/models.py"]


def make_thread(count: int, seed: int) -> list[NewMessage]:
    """A deterministic agent session: requests, tool calls and results as the Claude Code feed stores them."""
    rng = random.Random(seed)
    messages: list[NewMessage] = []
    call = 0
    while len(messages) < count:
        words = " ".join(rng.choices(_WORDS, k=rng.randint(8, 60)))
        kind = rng.random()
        if kind < 0.2:
            messages.append(NewMessage(role=Role.user, content=f"Please look at {rng.choice(_FILES)}: {words}?"))
        elif kind < 0.6 and len(messages) + 1 < count:
            call += 1
            call_id = f"call_{call}"
            tool = rng.choice(_TOOLS)
            given = (
                {"command": f"pytest -q {rng.choice(_FILES)}"} if tool == "Bash" else {"file_path": rng.choice(_FILES)}
            )
            if tool == "Edit":
                given |= {"old_string": words[:40], "new_string": words[40:80]}
            metadata = {"kind": "tool_use", "tool_name": tool}
            call_text = f"{tool} {json.dumps(given)}"
            messages.append(NewMessage(role=Role.assistant, content=call_text, tool_call_id=call_id, metadata=metadata))
            body = "\n".join(" ".join(rng.choices(_WORDS, k=10)) for _ in range(rng.randint(2, 20)))
            failed = {"is_error": True} if rng.random() < 0.1 else {}
            result = {"kind": "tool_result", **failed}
            messages.append(NewMessage(role=Role.tool, content=body, tool_call_id=call_id, metadata=result))
        else:
            messages.append(NewMessage(role=Role.assistant, content=words + "."))
    return [m.model_copy(update={"message_id": f"b{index}"}) for index, m in enumerate(messages)]


class TimedSummarizer:
    """The extractive summarizer with a stopwatch, to split summarizing from storing."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.name = self.inner.name
        self.seconds = 0.0

    async def summarize_messages(
        self, messages: Sequence[Message], *, background: Background | None = None
    ) -> SummaryDraft:
        start = time.perf_counter()
        try:
            return await self.inner.summarize_messages(messages, background=background)
        finally:
            self.seconds += time.perf_counter() - start

    async def summarize_summaries(
        self, summaries: Sequence[Summary], level: int, *, background: Background | None = None
    ) -> SummaryDraft:
        start = time.perf_counter()
        try:
            return await self.inner.summarize_summaries(summaries, level, background=background)
        finally:
            self.seconds += time.perf_counter() - start


@dataclass
class Row:
    """One store and size, measured."""

    store: str
    messages: int
    append_s: float
    compact_s: float
    summarize_s: float
    compacted: int
    by_level: dict[int, int]
    target: Summary | None
    expand_ms: float
    raw_ms: float

    @property
    def ms_per_message(self) -> float:
        """Compaction wall time per compacted message, summarizing included."""
        return 1000 * self.compact_s / max(self.compacted, 1)

    @property
    def store_ms_per_message(self) -> float:
        """The same without the summarizer's own time: what the engine and the store cost."""
        return 1000 * (self.compact_s - self.summarize_s) / max(self.compacted, 1)

    @property
    def append_ms_per_message(self) -> float:
        """What appending cost per message: the yardstick compaction is held to."""
        return 1000 * self.append_s / max(self.messages, 1)

    @property
    def append_ratio(self) -> float:
        """Compaction cost per compacted message over append cost per appended message."""
        return self.ms_per_message / self.append_ms_per_message if self.append_s else float("nan")

    @property
    def ratio(self) -> float:
        """Expansion time over the raw read of the same messages."""
        return self.expand_ms / self.raw_ms if self.raw_ms else float("nan")


async def read_all(fetch: Callable[[str | None], Awaitable[tuple[int, str | None]]]) -> int:
    """Follow a paged read to its end; returns how many items it gave."""
    total, cursor = 0, None
    while True:
        count, cursor = await fetch(cursor)
        total += count
        if cursor is None:
            return total


async def time_expansion(store: MemoryStore, target: Summary, page: int, runs: int) -> tuple[float, float]:
    """Median ms of expanding ``target`` fully, and of reading its seq range raw, interleaved."""

    async def expand_page(cursor: str | None) -> tuple[int, str | None]:
        result = await store.expand(target.partition, target.id, limit=page, cursor=cursor)
        return len(result.items), result.next_cursor

    async def raw_page(cursor: str | None) -> tuple[int, str | None]:
        first = target.first_seq if cursor is None else int(cursor)
        messages = await store.get_messages(
            target.partition, target.thread_id, first_seq=first, last_seq=target.last_seq, limit=page
        )
        following = first + len(messages)
        return len(messages), str(following) if messages and following <= target.last_seq else None

    expand_times: list[float] = []
    raw_times: list[float] = []
    for _ in range(runs):
        for fetch, times in ((expand_page, expand_times), (raw_page, raw_times)):
            start = time.perf_counter()
            count = await read_all(fetch)
            times.append(1000 * (time.perf_counter() - start))
            if count != target.message_count:
                raise RuntimeError(f"read {count} messages, expected {target.message_count}")
    return statistics.median(expand_times), statistics.median(raw_times)


async def measure(uri: str, label: str, size: int, page: int, runs: int) -> Row:
    """Append, compact and expand one thread of ``size`` messages in a fresh partition."""
    store = open_store(uri, Neo4jCredentials(user=os.environ.get("NEO4J_USER", "neo4j"),
                                             password=os.environ.get("NEO4J_PASSWORD")))  # fmt: skip
    await store.initialize()
    run_id = uuid.uuid4().hex[:8]
    partition, thread_id = f"bench-{run_id}", f"bench-{size}-{run_id}"
    try:
        messages = make_thread(size, seed=size)
        start = time.perf_counter()
        for offset in range(0, size, MAX_BATCH):
            await store.append_messages(partition, thread_id, messages[offset : offset + MAX_BATCH])
        append_s = time.perf_counter() - start
        logging.info("%s %d: appended in %.1fs", label, size, append_s)

        summarizer = TimedSummarizer()
        start = time.perf_counter()
        await compact_thread(store, partition, thread_id, CompactionSettings(), summarizer)
        compact_s = time.perf_counter() - start
        logging.info("%s %d: compacted in %.1fs", label, size, compact_s)

        dag = await store.summary_dag(partition, thread_id)
        by_level: dict[int, int] = {}
        for node in dag.nodes:
            by_level[node.level] = by_level.get(node.level, 0) + 1
        compacted = sum(item.last_seq - item.first_seq + 1 for item in dag.frontier if item.kind == "summary")
        high = [node for node in dag.nodes if node.level >= 3]
        target = min(high, key=lambda node: abs(node.message_count - EXPAND_TARGET), default=None)
        expand_ms = raw_ms = float("nan")
        if target is not None:
            expand_ms, raw_ms = await time_expansion(store, target, page, runs)
        return Row(label, size, append_s, compact_s, summarizer.seconds, compacted, by_level, target, expand_ms, raw_ms)
    finally:
        await store.close()


def verdict(ok: bool) -> str:
    """A coloured yes or no for a goal column."""
    return "[green]yes[/green]" if ok else "[red]no[/red]"


def render(rows: list[Row], page: int, runs: int) -> Table:
    """The results as one rich table, a row per store and size, goals checked."""
    table = Table(
        title=f"Compaction and expansion (extractive summarizer; expansion: median of {runs}, pages of {page})"
    )
    for column in (
        "store", "messages", "append s", "append ms/msg", "compact s", "ms/msg", "store ms/msg", "x append",
        "summaries L1/L2/...", "expanded", "expand ms", "raw read ms", "ratio",
        f"<{COMPACTION_GOAL_MS:g} ms/msg", f"<={APPEND_GOAL_RATIO:g}x append", f"<{EXPANSION_GOAL_RATIO:g}x",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column in ("store", "summaries L1/L2/...", "expanded") else "right")
    for row in rows:
        levels = "/".join(str(count) for _, count in sorted(row.by_level.items()))
        expanded = f"L{row.target.level} x {row.target.message_count}" if row.target else "no L3+"
        table.add_row(
            row.store, f"{row.messages:,}", f"{row.append_s:.1f}", f"{row.append_ms_per_message:.3f}",
            f"{row.compact_s:.1f}", f"{row.ms_per_message:.3f}", f"{row.store_ms_per_message:.3f}",
            f"{row.append_ratio:.2f}", levels, expanded,
            f"{row.expand_ms:.1f}", f"{row.raw_ms:.1f}", f"{row.ratio:.2f}",
            verdict(row.ms_per_message < COMPACTION_GOAL_MS), verdict(row.append_ratio <= APPEND_GOAL_RATIO),
            verdict(row.ratio <= EXPANSION_GOAL_RATIO) if row.target else "-",
        )  # fmt: skip
    return table


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line, with sizes and stores split and checked."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="Comma-separated thread sizes (default: %(default)s).")
    parser.add_argument("--stores", default="sqlite,neo4j", help="Comma-separated stores (default: %(default)s).")
    parser.add_argument("--neo4j-uri", default=os.environ.get("NEO4J_URI"), help="Bolt URI (default: $NEO4J_URI).")
    parser.add_argument("--sqlite-dir", type=Path, help="Where the SQLite files go (default: a temporary folder).")
    parser.add_argument("--page", type=int, default=1000, help="Page size of expansion and raw reads.")
    parser.add_argument("--runs", type=int, default=5, help="Timed expansions per thread (median).")
    parser.add_argument("--verbose", action="store_true", help="Log progress to stderr.")
    args = parser.parse_args(argv)
    args.sizes = [int(size.replace("_", "")) for size in args.sizes.split(",") if size]
    args.stores = [store for store in args.stores.split(",") if store]
    if "neo4j" in args.stores and not args.neo4j_uri:
        parser.error("neo4j needs --neo4j-uri or NEO4J_URI (or pass --stores sqlite)")
    unknown = set(args.stores) - {"sqlite", "neo4j"}
    if unknown:
        parser.error(f"unknown store(s): {', '.join(sorted(unknown))}")
    return args


async def run(args: argparse.Namespace) -> list[Row]:
    """Measure every store at every size, one after the other (never concurrently)."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="palimpsest-bench-") as scratch:
        folder = args.sqlite_dir or Path(scratch)
        for name in args.stores:
            for size in args.sizes:
                sqlite_file = folder / f"bench-{size}-{uuid.uuid4().hex[:6]}.db"
                uri = f"sqlite:///{sqlite_file}" if name == "sqlite" else args.neo4j_uri
                rows.append(await measure(uri, name, size, args.page, args.runs))
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print the table."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    logging.getLogger("neo4j").setLevel(logging.WARNING)  # schema notices on every initialize()
    rows = asyncio.run(run(args))
    # Piped output (a report, a log) gets the whole table rather than 80 squeezed columns.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    console.print(render(rows, args.page, args.runs))


if __name__ == "__main__":
    main()
