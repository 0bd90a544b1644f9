"""Load: many MCP clients over HTTP at once while the scheduler compacts, then proof that nothing was lost.

Run by hand (not a test), loopback only, bounded in clients and seconds::

    .venv/bin/python bench/load.py                                   # SQLite, 32 clients, 60 s
    .venv/bin/python bench/load.py --stores sqlite,neo4j --neo4j-uri bolt://127.0.0.1:PORT --seconds 30

For each store it starts ``palimpsest serve --transport http`` on a free loopback port,
with the compaction tick every two seconds and a small threshold, so the scheduler folds
threads while the clients work. One client warms the server up (``--warmup-seconds``,
untimed), then runs the same mix alone for ``--baseline-seconds`` (the same-run
baseline), then ``--clients`` clients run it for
``--seconds``: each call is one of append (a batch of 1 to 5 messages to one of a few
shared threads, so appends contend), grep (text, the words of the turns), expand (a
summary a grep hit is covered by, or one of the thread's DAG) and assemble_context.
Every call is timed from the client; its table shows calls, errors, throughput and
p50/p95/p99 per tool, and the single client's p50 ("alone") with the ratio of the
p99 under load to it. The caption adds the CPU each call cost the server process and
the clients (Linux ``/proc``): on a machine shared with other work latencies swing
with its load, CPU per call much less, so compare that between runs.

The clients are real fastmcp clients over streamable HTTP, but cheap ones on purpose:
the server and the 32 clients share this machine's cores, and each client CPU-second
is one the server does not get. So a client reads each answer's JSON as it arrives
(``call_tool_mcp``, an error answer counted as an error) and skips what only a
client does with it: the MCP SDK's check of the answer against the tool's output
schema and fastmcp's typed copy of it, together a third of the clients' CPU. The
server's work per call is unchanged; its tests check the output schemas.

Then the server is stopped and the store opened directly: every acknowledged message
must be stored exactly once (by its ``message_id`` in its thread) and ``doctor`` must
find no breach. Goals: no errors, nothing lost or duplicated, p99 under 1 s per tool.
The Neo4j database named by ``--neo4j-uri`` is wiped first: give a throwaway one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastmcp import Client
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.doctor import check_store

PARTITION = "load"
P99_GOAL_MS = 1000.0
#: The mix of calls, by weight.
MIX = {"append_messages": 40, "grep_memories": 25, "expand_summary": 15, "assemble_context": 20}
WORDS = (
    "token refresh rotates signing keys gateway deploy migration retries pytest fixture cache "
    "auth service login redis schema index vector summary frontier lease scheduler budget"
).split()
_NEO4J_WIPE = "MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"


@dataclass
class Tally:
    """What the clients of one phase did: latencies per tool, errors, acknowledged messages."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    acknowledged: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    seconds: float = 0.0
    #: CPU seconds the server and the clients spent during the timed phase.
    server_cpu: float = 0.0
    client_cpu: float = 0.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user and system) of a process so far: this one, or ``pid``'s from ``/proc``."""
    if pid is None:
        times = os.times()
        return times.user + times.system
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def skip_output_validation(name: str, result: Any) -> None:
    """Stands in for the MCP SDK's check of an answer against the tool's output schema (see the docstring)."""


class CallFailed(Exception):
    """A tool answered with an error."""


async def call(session: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call over the session; its structured answer, or CallFailed with the error text."""
    result = await session.call_tool_mcp(tool, arguments)
    if result.is_error:
        text = result.content[0].text if result.content and hasattr(result.content[0], "text") else "?"
        raise CallFailed(text)
    return result.structured_content or {}


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))


class LoadClient:
    """One MCP client over HTTP running the mix until its deadline."""

    def __init__(self, url: str, number: int, threads: list[str], tally: Tally, seed: int) -> None:
        self.url = url
        self.number = number
        self.threads = threads
        self.tally = tally
        self.rng = random.Random(seed)
        self.sent = 0
        self.summaries: list[str] = []

    async def run(self, ready: asyncio.Queue[None], go: asyncio.Future[float]) -> None:
        """Connect and warm up, report ready, then run the mix from the common start until the deadline."""
        async with Client(self.url, timeout=60) as session:
            session.session.validate_tool_result = skip_output_validation  # type: ignore[method-assign]
            await call(session, "memory_stats", {})
            ready.put_nowait(None)
            deadline = await go
            tools = list(MIX)
            weights = list(MIX.values())
            while time.monotonic() < deadline:
                tool = self.rng.choices(tools, weights)[0]
                arguments = await self.arguments(session, tool)
                if arguments is None:
                    continue
                started = time.perf_counter()
                try:
                    answer = await call(session, tool, arguments)
                except CallFailed as exc:
                    self.tally.errors[tool] += 1
                    self.tally.error_samples.append(f"{tool}: {exc}")
                    continue
                self.tally.latencies[tool].append(time.perf_counter() - started)
                self.record(tool, arguments, answer)

    async def arguments(self, session: Client, tool: str) -> dict[str, Any] | None:
        thread = self.rng.choice(self.threads)
        if tool == "append_messages":
            batch = []
            for _ in range(self.rng.randint(1, 5)):
                batch.append(
                    {
                        "role": self.rng.choice(["user", "assistant"]),
                        "content": sentence(self.rng),
                        "message_id": f"c{self.number}-{self.sent}",
                    }
                )
                self.sent += 1
            return {"thread_id": thread, "messages": batch}
        if tool == "grep_memories":
            return {"query": " ".join(self.rng.sample(WORDS, 2)), "limit": 10}
        if tool == "expand_summary":
            if not self.summaries:
                started = time.perf_counter()
                try:
                    dag = await call(session, "get_summary_dag", {"thread_id": thread})
                except CallFailed:
                    return None  # the thread may not exist yet
                self.tally.latencies["get_summary_dag"].append(time.perf_counter() - started)
                self.summaries = [node["id"] for node in dag.get("nodes", [])]
                if not self.summaries:
                    return None
            return {"summary_id": self.rng.choice(self.summaries), "limit": 50}
        return {"thread_id": thread, "budget_tokens": 4000}

    def record(self, tool: str, arguments: dict[str, Any], answer: dict[str, Any]) -> None:
        if tool == "append_messages":
            self.tally.acknowledged[arguments["thread_id"]].extend(m["message_id"] for m in arguments["messages"])
        elif tool == "grep_memories":
            covering = [summary for hit in answer.get("hits", []) for summary in hit.get("covered_by", [])]
            if covering:
                self.summaries = covering[-20:]


async def drive(url: str, clients: int, seconds: float, threads: list[str], seed: int, server: int) -> Tally:
    """Connect every client first, then time the mix (and the CPU of ``server``, a pid, and ours) from one start."""
    tally = Tally()
    ready: asyncio.Queue[None] = asyncio.Queue()
    go: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    runners = [LoadClient(url, seed * 1000 + n, threads, tally, seed * 1000 + n) for n in range(clients)]
    running = asyncio.gather(*(runner.run(ready, go) for runner in runners))
    for _ in runners:
        await ready.get()
    cpu = (cpu_seconds(server), cpu_seconds())
    started = time.monotonic()
    go.set_result(started + seconds)
    await running
    tally.seconds = time.monotonic() - started
    tally.server_cpu, tally.client_cpu = cpu_seconds(server) - cpu[0], cpu_seconds() - cpu[1]
    return tally


async def seed_threads(url: str, threads: list[str]) -> Tally:
    """One message in each thread, so every call of the mix names a thread that exists."""
    tally = Tally()
    async with Client(url, timeout=60) as session:
        for thread in threads:
            message = {"role": "user", "content": f"{thread} starts: " + " ".join(WORDS), "message_id": "seed"}
            await call(session, "append_messages", {"thread_id": thread, "messages": [message]})
            tally.acknowledged[thread].append("seed")
    return tally


async def wipe_neo4j(uri: str) -> None:
    import neo4j

    driver = neo4j.AsyncGraphDatabase.driver(uri, auth=None)
    try:
        async with driver.session(database="neo4j") as session:
            await (await session.run(_NEO4J_WIPE)).consume()
    finally:
        await driver.close()


def start_server(store_uri: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = os.environ | {
        "PALIMPSEST_STORE": store_uri,
        "PALIMPSEST_PARTITION": PARTITION,
        "PALIMPSEST_COMPACTION_INTERVAL": "2",
        "PALIMPSEST_COMPACTION_THRESHOLD": "12",
        "PALIMPSEST_KEEP_RECENT": "4",
        "PALIMPSEST_THREADS_PER_CYCLE": "4",
        "PALIMPSEST_EMBEDDER": "none",
    }
    env.pop("PALIMPSEST_TOKENS_FILE", None)
    serve = "from palimpsest.server.cli.main import app; app()"
    command = [sys.executable, "-c", serve, "serve", "--transport", "http", "--port", str(port)]
    with log.open("wb") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return server
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}; see {log}")
        time.sleep(0.2)
    server.kill()
    raise SystemExit(f"the server did not listen within 120 s; see {log}")


async def verify(store_uri: str, acknowledged: dict[str, list[str]]) -> tuple[int, int, int, int]:
    """(acknowledged, lost, duplicated, doctor breaches), read from the store directly."""
    store = open_store(store_uri, Neo4jCredentials())
    await store.initialize()
    try:
        lost = duplicated = 0
        for thread, sent in acknowledged.items():
            stored = Counter(message.source_id for message in await store.get_messages(PARTITION, thread))
            lost += sum(1 for source_id in set(sent) if stored[source_id] == 0)
            duplicated += sum(count - 1 for count in stored.values() if count > 1)
        breaches = await check_store(store)
        return sum(len(set(sent)) for sent in acknowledged.values()), lost, duplicated, len(breaches)
    finally:
        await store.close()


async def run_store(kind: str, args: argparse.Namespace, workdir: Path, console: Console) -> Table:
    if kind == "sqlite":
        store_uri = f"sqlite:///{workdir / 'load.db'}"
    else:
        if not args.neo4j_uri:
            raise SystemExit("--neo4j-uri is needed for the neo4j store")
        store_uri = args.neo4j_uri
        await wipe_neo4j(store_uri)
    port = free_port()
    server = start_server(store_uri, port, workdir / f"server-{kind}.log")
    url = f"http://127.0.0.1:{port}/mcp"
    threads = [f"load-{n}" for n in range(max(1, args.clients // 4))]
    try:
        seeded = await seed_threads(url, threads)
        # Untimed: the first calls pay for cold caches (on Neo4j, every query plan compiled once).
        warmup = await drive(url, 1, args.warmup_seconds, threads, seed=3, server=server.pid)
        console.print(f"[bold]{kind}[/]: 1 client for {args.baseline_seconds:g} s (baseline)...")
        baseline = await drive(url, 1, args.baseline_seconds, threads, seed=1, server=server.pid)
        console.print(f"[bold]{kind}[/]: {args.clients} clients for {args.seconds:g} s...")
        load = await drive(url, args.clients, args.seconds, threads, seed=2, server=server.pid)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
    acknowledged: dict[str, list[str]] = defaultdict(list)
    for tally in (seeded, warmup, baseline, load):
        for thread, ids in tally.acknowledged.items():
            acknowledged[thread].extend(ids)
    total, lost, duplicated, breaches = await verify(store_uri, acknowledged)

    table = Table(title=f"{kind}: {args.clients} clients over HTTP for {load.seconds:.0f} s, compaction every 2 s")
    for column in ("tool", "calls", "errors", "calls/s", "p50 ms", "p95 ms", "p99 ms", "alone p50 ms", "p99/alone"):
        table.add_column(column, justify="left" if column == "tool" else "right")
    for tool in sorted(set(load.latencies) | set(load.errors)):
        times = [t * 1000 for t in load.latencies[tool]]
        alone = percentile([t * 1000 for t in baseline.latencies[tool]], 0.5)
        p99 = percentile(times, 0.99)
        table.add_row(
            tool,
            str(len(times)),
            str(load.errors[tool]),
            f"{len(times) / load.seconds:.1f}",
            f"{percentile(times, 0.5):.0f}",
            f"{percentile(times, 0.95):.0f}",
            f"[{'green' if p99 < P99_GOAL_MS else 'red'}]{p99:.0f}[/]",
            f"{alone:.0f}",
            f"{p99 / alone:.1f}x" if alone == alone and alone > 0 else "-",
        )
    phases = (warmup, baseline, load)
    errors = sum(sum(tally.errors.values()) for tally in phases)
    samples = [sample for tally in phases for sample in tally.error_samples]
    calls = sum(len(times) for times in load.latencies.values())
    table.caption = (
        f"acknowledged {total} messages: lost {lost}, duplicated {duplicated}; doctor breaches {breaches}; "
        f"errors {errors}" + (f" (first: {samples[0]})" if errors else "") + "\n"
        f"CPU per call: server {1000 * load.server_cpu / max(calls, 1):.1f} ms, "
        f"clients {1000 * load.client_cpu / max(calls, 1):.1f} ms; load average at the end {os.getloadavg()[0]:.1f}"
    )
    return table


async def main_async(args: argparse.Namespace) -> None:
    console = Console(width=120)
    with tempfile.TemporaryDirectory(prefix="palimpsest-load-") as workdir:
        tables = [await run_store(kind, args, Path(workdir), console) for kind in args.stores.split(",")]
    for table in tables:
        console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--stores", default="sqlite", help="sqlite, neo4j or sqlite,neo4j")
    parser.add_argument("--neo4j-uri", help="a throwaway Neo4j (it is wiped), e.g. bolt://127.0.0.1:7687")
    parser.add_argument("--clients", type=int, default=32, choices=range(1, 129), metavar="1..128")
    parser.add_argument("--seconds", type=float, default=60.0, help="load phase length (at most 600)")
    parser.add_argument("--baseline-seconds", type=float, default=10.0, help="single-client phase length")
    parser.add_argument("--warmup-seconds", type=float, default=10.0, help="untimed single-client phase first")
    args = parser.parse_args()
    if not all(0 < value <= 600 for value in (args.seconds, args.baseline_seconds, args.warmup_seconds)):
        parser.error("--seconds, --baseline-seconds and --warmup-seconds must be within 0..600")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
