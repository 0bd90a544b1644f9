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
with its load, CPU per call much less, so compare that between runs. Its baseline is
measured first in the same run: the smallest FastMCP server (one tool that answers at
once, the same streamable HTTP) under the same ``--clients`` for ``--framework-seconds``,
what any tool call costs before Palimpsest does anything.

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

A team's set-up, ``--servers N``: N server processes on the one store, the clients
spread over them (client ``i`` on server ``i mod N``, as a proxy would), and beside them
a hook-like writer: every ``--hook-every`` seconds it adds a turn to a transcript file
and runs ``palimpsest ingest`` on it, a fresh process each time, as an agent's hook
does. The second table shows, per server process, the compaction cycles and summaries
it recorded (every process should compact), the largest uncovered backlog of any
thread at the end (goal: under three times the compaction threshold) and the ingest
runs. ``--restart term`` (or ``kill``) stops a server halfway through the load phase
with that signal (the first one whose log shows it compacting a thread, waiting up to
10 s for one; else server 0), starts it again on the same port, and times the stop,
the start, and how long until the thread it was compacting gets a new summary from
any process (goal: within 30 s); its clients reconnect, as behind a proxy, and the
calls the restart cut are counted apart from errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
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
#: Server CPU a call may cost at most, under 64 clients: under 2x the framework's own.
CPU_GOAL_MS = 5.0
THRESHOLD = 12
KEEP_RECENT = 4
#: The mix of calls, by weight.
MIX = {"append_messages": 40, "grep_memories": 25, "expand_summary": 15, "assemble_context": 20}
WORDS = (
    "token refresh rotates signing keys gateway deploy migration retries pytest fixture cache "
    "auth service login redis schema index vector summary frontier lease scheduler budget"
).split()
_NEO4J_WIPE = "MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"
#: The framework's own cost, the baseline of server CPU per call: the smallest FastMCP
#: server over the same streamable HTTP, one tool that answers at once (``sys.argv[1]``: its port).
MINIMAL_SERVER = """
import sys

from fastmcp import FastMCP

server = FastMCP("minimal")


@server.tool
def echo(text: str) -> dict[str, object]:
    return {"text": text, "chars": len(text)}


server.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False)
"""


@dataclass
class Tally:
    """What the clients of one phase did: latencies per tool, errors, acknowledged messages."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    acknowledged: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    #: Calls cut by a server's restart (its clients reconnect, as behind a proxy).
    cut: int = 0
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
    """One MCP client over HTTP running the mix until its deadline; it reconnects if its server restarts."""

    def __init__(self, url: str, number: int, threads: list[str], tally: Tally, seed: int) -> None:
        self.url = url
        self.number = number
        self.threads = threads
        self.tally = tally
        self.rng = random.Random(seed)
        self.sent = 0
        self.summaries: list[str] = []

    async def run(self, ready: asyncio.Queue[None], go: asyncio.Future[float]) -> None:
        """Connect and warm up, report ready, then run the mix from the common start until the deadline.

        If its server goes away mid-run (a restart), it reconnects, as behind a proxy.
        """
        deadline: float | None = None
        while deadline is None or time.monotonic() < deadline:
            try:
                async with Client(self.url, timeout=60) as session:
                    session.session.validate_tool_result = skip_output_validation  # type: ignore[method-assign]
                    if deadline is None:
                        await call(session, "memory_stats", {})
                        ready.put_nowait(None)
                        deadline = await go
                    if await self.mix(session, deadline):
                        return
            except Exception:
                if deadline is None:
                    raise
            await asyncio.sleep(0.5)

    async def mix(self, session: Client, deadline: float) -> bool:
        """Run the mix until the deadline (True), or until the server goes away (False, the call counted as cut)."""
        tools = list(MIX)
        weights = list(MIX.values())
        while time.monotonic() < deadline:
            tool = self.rng.choices(tools, weights)[0]
            started = time.perf_counter()
            try:
                arguments = await self.arguments(session, tool)
                if arguments is None:
                    continue
                started = time.perf_counter()
                answer = await call(session, tool, arguments)
            except CallFailed as exc:
                self.tally.errors[tool] += 1
                self.tally.error_samples.append(f"{tool}: {exc}")
                continue
            except Exception:  # the connection broke: the server is restarting
                self.tally.cut += 1
                return False
            self.tally.latencies[tool].append(time.perf_counter() - started)
            self.record(tool, arguments, answer)
        return True

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


def servers_cpu(pids: list[int]) -> dict[int, float]:
    """CPU seconds so far of each server process still running."""
    spent: dict[int, float] = {}
    for pid in pids:
        try:
            spent[pid] = cpu_seconds(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return spent


async def drive(
    urls: list[str],
    clients: int,
    seconds: float,
    threads: list[str],
    seed: int,
    pids: list[int],
    during: Callable[[float], Awaitable[None]] | None = None,
) -> Tally:
    """Connect every client first, then time the mix (and the servers' CPU, and ours) from one start.

    Client ``n`` talks to ``urls[n % len(urls)]``; ``during`` runs beside the timed
    phase, given its deadline (a restart, the hook-like writer). Server CPU counts the
    processes that ran through the whole phase.
    """
    tally = Tally()
    ready: asyncio.Queue[None] = asyncio.Queue()
    go: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    runners = [
        LoadClient(urls[n % len(urls)], seed * 1000 + n, threads, tally, seed * 1000 + n) for n in range(clients)
    ]
    running = asyncio.gather(*(runner.run(ready, go) for runner in runners))
    for _ in runners:
        await ready.get()
    before, own = servers_cpu(pids), cpu_seconds()
    started = time.monotonic()
    go.set_result(started + seconds)
    await asyncio.gather(running, *([during(started + seconds)] if during is not None else []))
    tally.seconds = time.monotonic() - started
    after = servers_cpu(pids)
    tally.server_cpu = sum(after[pid] - before[pid] for pid in after if pid in before)
    tally.client_cpu = cpu_seconds() - own
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


def server_env(store_uri: str) -> dict[str, str]:
    """The environment of the servers and the hook-like writer: small thresholds, no embedder, no tokens."""
    env = os.environ | {
        "PALIMPSEST_STORE": store_uri,
        "PALIMPSEST_PARTITION": PARTITION,
        "PALIMPSEST_COMPACTION_INTERVAL": "2",
        "PALIMPSEST_COMPACTION_THRESHOLD": str(THRESHOLD),
        "PALIMPSEST_KEEP_RECENT": str(KEEP_RECENT),
        "PALIMPSEST_THREADS_PER_CYCLE": "4",
        "PALIMPSEST_EMBEDDER": "none",
    }
    env.pop("PALIMPSEST_TOKENS_FILE", None)
    return env


def start_server(store_uri: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    serve = "from palimpsest.server.cli.main import app; app()"
    command = [sys.executable, "-c", serve, "serve", "--transport", "http", "--port", str(port)]
    with log.open("wb") as out:
        server = subprocess.Popen(command, env=server_env(store_uri), stdout=out, stderr=subprocess.STDOUT)
    wait_listening(server, port, log)
    return server


def wait_listening(server: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Return once ``server`` listens on ``port``; exit (killing it) if it dies or takes over 120 s."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
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


@dataclass
class Restart:
    """What restarting a server mid-run cost: seconds to stop, to listen again, until its thread moved on."""

    signal: str
    server: int = 0
    stop_seconds: float = float("nan")
    start_seconds: float = float("nan")
    thread: str | None = None
    resumed_seconds: float | None = None


@dataclass
class HookWriter:
    """A hook's writes: a turn added to a transcript, then ``palimpsest ingest`` run on it, a process each time."""

    store_uri: str
    folder: Path
    every: float
    thread: str = "hook-0"
    runs: list[float] = field(default_factory=list)
    failures: int = 0
    acknowledged: list[str] = field(default_factory=list)

    async def run(self, deadline: float) -> None:
        transcript = self.folder / "hook.jsonl"
        rng = random.Random(9)
        turn = 0
        while time.monotonic() < deadline:
            lines = [
                {"thread_id": self.thread, "role": role, "content": sentence(rng), "message_id": f"h{turn}-{role}"}
                for role in ("user", "assistant")
            ]
            with transcript.open("a") as out:
                out.writelines(json.dumps(line) + "\n" for line in lines)
            started = time.monotonic()
            ingest = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                "from palimpsest.server.cli.main import app; app()",
                "ingest",
                str(transcript),
                "--format",
                "jsonl",
                "--partition",
                PARTITION,
                "--store",
                self.store_uri,
                "--json",
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                env=server_env(self.store_uri),
            )
            if await ingest.wait() == 0:
                self.runs.append(time.monotonic() - started)
                self.acknowledged.extend(line["message_id"] for line in lines)
            else:
                self.failures += 1
            turn += 1
            await asyncio.sleep(max(0.0, self.every - (time.monotonic() - started)))


def thread_in_progress(log: Path) -> str | None:
    """The thread a server's log shows it started compacting and did not finish."""
    open_threads: list[str] = []
    for line in log.read_text(errors="replace").splitlines():
        started = re.search(r"compaction: thread (\S+): \d+ uncovered messages", line)
        if started:
            open_threads.append(started.group(1))
        finished = re.search(r"compaction: thread (\S+) (?:compacted|is busy)", line)
        if finished and finished.group(1) in open_threads:
            open_threads.remove(finished.group(1))
    return open_threads[-1] if open_threads else None


async def frontier_summaries(store_uri: str, thread: str) -> set[str]:
    store = open_store(store_uri, Neo4jCredentials())
    await store.initialize()
    try:
        return {item.id for item in await store.frontier(PARTITION, thread) if item.kind == "summary"}
    finally:
        await store.close()


async def restart_server(
    servers: list[subprocess.Popen[bytes]], store_uri: str, ports: list[int], workdir: Path, kind: str, restart: Restart
) -> None:
    """Stop a server busy compacting with the restart's signal, start it again, time both and the resumption."""
    logs = [workdir / f"server-{kind}-{n}.log" for n in range(len(servers))]
    looking = time.monotonic()
    while time.monotonic() < looking + 10:
        busy = [(n, thread) for n, log in enumerate(logs) if (thread := thread_in_progress(log)) is not None]
        if busy:
            restart.server, restart.thread = busy[0]
            break
        await asyncio.sleep(0.2)
    before = await frontier_summaries(store_uri, restart.thread) if restart.thread else set()
    signalled = time.monotonic()
    victim = servers[restart.server]
    victim.send_signal(signal.SIGTERM if restart.signal == "term" else signal.SIGKILL)
    await asyncio.to_thread(victim.wait, 60)
    restart.stop_seconds = time.monotonic() - signalled
    started = time.monotonic()
    log = workdir / f"server-{kind}-{restart.server}-restarted.log"
    servers[restart.server] = await asyncio.to_thread(start_server, store_uri, ports[restart.server], log)
    restart.start_seconds = time.monotonic() - started
    if restart.thread is None:
        return
    while time.monotonic() < signalled + 120:
        if await frontier_summaries(store_uri, restart.thread) - before:
            restart.resumed_seconds = time.monotonic() - signalled
            return
        await asyncio.sleep(0.5)


async def largest_backlog(store_uri: str) -> int:
    store = open_store(store_uri, Neo4jCredentials())
    await store.initialize()
    try:
        largest = await store.compaction_candidates(None, min_uncovered=0, limit=1)
        return largest[0].uncovered if largest else 0
    finally:
        await store.close()


async def cycles_by_process(store_uri: str) -> dict[str, tuple[int, int, int]]:
    """Per server pid: compaction cycles recorded, threads and summaries in them."""
    store = open_store(store_uri, Neo4jCredentials())
    await store.initialize()
    try:
        cycles = await store.recent_cycles(100_000)
    finally:
        await store.close()
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for cycle in cycles:
        if cycle.job == "compaction":
            entry = totals[cycle.holder.rsplit(":", 2)[1]]
            entry[0] += 1
            entry[1] += cycle.threads
            entry[2] += cycle.summaries
    return {pid: (n, t, s) for pid, (n, t, s) in totals.items()}


@dataclass
class Framework:
    """What the minimal FastMCP server cost under the same clients: the baseline of the load tables."""

    calls: int
    seconds: float
    server_cpu: float
    p99_ms: float

    @property
    def cpu_per_call_ms(self) -> float:
        return 1000 * self.server_cpu / max(self.calls, 1)


async def framework_baseline(args: argparse.Namespace, workdir: Path, console: Console) -> Framework:
    """``--clients`` clients calling the minimal server's one tool for ``--framework-seconds``."""
    console.print(f"minimal FastMCP server: {args.clients} clients for {args.framework_seconds:g} s (baseline)...")
    port = free_port()
    log = workdir / "minimal.log"
    with log.open("wb") as out:
        server = subprocess.Popen([sys.executable, "-c", MINIMAL_SERVER, str(port)], stdout=out, stderr=out)
    try:
        await asyncio.to_thread(wait_listening, server, port, log)
        url = f"http://127.0.0.1:{port}/mcp"
        latencies: list[float] = []
        text = " ".join(WORDS)

        async def client(go: asyncio.Future[float], ready: asyncio.Queue[None]) -> None:
            async with Client(url, timeout=60) as session:
                session.session.validate_tool_result = skip_output_validation  # type: ignore[method-assign]
                await call(session, "echo", {"text": text})
                ready.put_nowait(None)
                deadline = await go
                while time.monotonic() < deadline:
                    started = time.perf_counter()
                    await call(session, "echo", {"text": text})
                    latencies.append(time.perf_counter() - started)

        ready: asyncio.Queue[None] = asyncio.Queue()
        go: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        running = asyncio.gather(*(client(go, ready) for _ in range(args.clients)))
        for _ in range(args.clients):
            await ready.get()
        before, started = cpu_seconds(server.pid), time.monotonic()
        go.set_result(started + args.framework_seconds)
        await running
        seconds, spent = time.monotonic() - started, cpu_seconds(server.pid) - before
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
    return Framework(len(latencies), seconds, spent, percentile([t * 1000 for t in latencies], 0.99))


async def run_store(
    kind: str, args: argparse.Namespace, workdir: Path, console: Console, framework: Framework
) -> list[Table]:
    if kind == "sqlite":
        store_uri = f"sqlite:///{workdir / 'load.db'}"
    else:
        if not args.neo4j_uri:
            raise SystemExit("--neo4j-uri is needed for the neo4j store")
        store_uri = args.neo4j_uri
        await wipe_neo4j(store_uri)
    ports = [free_port() for _ in range(args.servers)]
    servers = [start_server(store_uri, port, workdir / f"server-{kind}-{n}.log") for n, port in enumerate(ports)]
    pids = [server.pid for server in servers]
    urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]
    threads = [f"load-{n}" for n in range(max(1, args.clients // 4))]
    hook = HookWriter(store_uri, workdir, args.hook_every) if args.servers > 1 else None
    restart = Restart(args.restart) if args.restart != "none" else None

    async def beside_the_load(deadline: float) -> None:
        async def restart_halfway() -> None:
            assert restart is not None
            await asyncio.sleep(max(0.0, deadline - time.monotonic()) / 2)
            await restart_server(servers, store_uri, ports, workdir, kind, restart)

        await asyncio.gather(
            *([hook.run(deadline)] if hook is not None else []), *([restart_halfway()] if restart else [])
        )

    backlog = 0
    try:
        seeded = await seed_threads(urls[0], threads)
        # Untimed: the first calls pay for cold caches (on Neo4j, every query plan compiled once).
        warmup = await drive(urls, len(urls), args.warmup_seconds, threads, seed=3, pids=pids)
        console.print(f"[bold]{kind}[/]: 1 client for {args.baseline_seconds:g} s (baseline)...")
        baseline = await drive(urls[:1], 1, args.baseline_seconds, threads, seed=1, pids=pids)
        console.print(f"[bold]{kind}[/]: {args.clients} clients over {args.servers} servers for {args.seconds:g} s...")
        load = await drive(urls, args.clients, args.seconds, threads, seed=2, pids=pids, during=beside_the_load)
        backlog = await largest_backlog(store_uri)
    finally:
        for server in servers:
            server.send_signal(signal.SIGINT)
        for server in servers:
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                server.kill()
    acknowledged: dict[str, list[str]] = defaultdict(list)
    for tally in (seeded, warmup, baseline, load):
        for thread, ids in tally.acknowledged.items():
            acknowledged[thread].extend(ids)
    if hook is not None:
        acknowledged[hook.thread].extend(hook.acknowledged)
    total, lost, duplicated, breaches = await verify(store_uri, acknowledged)

    over = f"{args.servers} servers" if args.servers > 1 else "HTTP"
    table = Table(title=f"{kind}: {args.clients} clients over {over} for {load.seconds:.0f} s, compaction every 2 s")
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
    server_ms = 1000 * load.server_cpu / max(calls, 1)
    table.caption = (
        f"acknowledged {total} messages: lost {lost}, duplicated {duplicated}; doctor breaches {breaches}; "
        f"errors {errors}" + (f" (first: {samples[0]})" if errors else "") + "\n"
        f"CPU per call: server {server_ms:.1f} ms ({server_ms / framework.cpu_per_call_ms:.1f}x a minimal "
        f"FastMCP server's {framework.cpu_per_call_ms:.1f} ms, {framework.calls / framework.seconds:.0f} calls/s "
        f"and p99 {framework.p99_ms:.0f} ms under the same clients; goal {CPU_GOAL_MS:g} ms), "
        f"clients {1000 * load.client_cpu / max(calls, 1):.1f} ms; load average at the end {os.getloadavg()[0]:.1f}"
    )
    if args.servers == 1 and restart is None:
        return [table]
    cycles = await cycles_by_process(store_uri)
    return [table, team_table(kind, args, pids, servers, cycles, backlog, hook, restart, load)]


def team_table(
    kind: str,
    args: argparse.Namespace,
    pids: list[int],
    servers: list[subprocess.Popen[bytes]],
    cycles: dict[str, tuple[int, int, int]],
    backlog: int,
    hook: HookWriter | None,
    restart: Restart | None,
    load: Tally,
) -> Table:
    """Who compacted what, the backlog left, the hook's runs and the restart's costs."""
    table = Table(title=f"{kind}: {args.servers} server processes on one store")
    for column in ("server", "pid", "compaction cycles", "threads compacted", "summaries written"):
        table.add_column(column, justify="left" if column == "server" else "right")
    rows = [(f"server {n}", pid) for n, pid in enumerate(pids)]
    if restart is not None:
        rows.append((f"server {restart.server}, restarted", servers[restart.server].pid))
    for name, pid in rows:
        n, threads, summaries = cycles.get(str(pid), (0, 0, 0))
        table.add_row(name, str(pid), str(n), str(threads), str(summaries))
    goal = 3 * THRESHOLD
    notes = [
        f"largest uncovered backlog at the end: [{'green' if backlog < goal else 'red'}]{backlog}[/] messages "
        f"(compaction threshold {THRESHOLD}, fresh tail {KEEP_RECENT}; goal under {goal})"
    ]
    if hook is not None:
        runs = [run * 1000 for run in hook.runs]
        notes.append(
            f"hook-like ingest every {hook.every:g} s: {len(runs)} runs, {hook.failures} failed, "
            f"p50 {percentile(runs, 0.5):.0f} ms, p99 {percentile(runs, 0.99):.0f} ms per run (process start included)"
        )
    if restart is not None:
        resumed = (
            f"the thread it was compacting ({restart.thread}) had a new summary {restart.resumed_seconds:.1f} s "
            "after the signal"
            if restart.resumed_seconds is not None
            else f"its thread ({restart.thread}) had no new summary within 120 s"
            if restart.thread
            else "it was compacting no thread at that moment"
        )
        notes.append(
            f"server {restart.server} restarted halfway (SIG{restart.signal.upper()}): "
            f"stopped in {restart.stop_seconds:.2f} s, "
            f"listening again {restart.start_seconds:.2f} s later; {resumed}; {load.cut} client calls cut "
            "(their clients reconnected)"
        )
    table.caption = "\n".join(notes)
    return table


async def main_async(args: argparse.Namespace) -> None:
    console = Console(width=120)
    with tempfile.TemporaryDirectory(prefix="palimpsest-load-") as workdir:
        framework = await framework_baseline(args, Path(workdir), console)
        tables = [
            table
            for kind in args.stores.split(",")
            for table in await run_store(kind, args, Path(workdir), console, framework)
        ]
    for table in tables:
        console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--stores", default="sqlite", help="sqlite, neo4j or sqlite,neo4j")
    parser.add_argument("--neo4j-uri", help="a throwaway Neo4j (it is wiped), e.g. bolt://127.0.0.1:7687")
    parser.add_argument("--clients", type=int, default=32, choices=range(1, 129), metavar="1..128")
    parser.add_argument("--seconds", type=float, default=60.0, help="load phase length (at most 600)")
    parser.add_argument("--baseline-seconds", type=float, default=10.0, help="single-client phase length")
    parser.add_argument("--framework-seconds", type=float, default=15.0, help="minimal FastMCP server phase length")
    parser.add_argument("--warmup-seconds", type=float, default=10.0, help="untimed single-client phase first")
    parser.add_argument("--servers", type=int, default=1, choices=range(1, 9), metavar="1..8", help="server processes")
    parser.add_argument("--hook-every", type=float, default=1.0, help="seconds between hook-like ingests (servers > 1)")
    parser.add_argument("--restart", choices=["none", "term", "kill"], default="none", help="restart a server halfway")
    args = parser.parse_args()
    if not all(0 < value <= 600 for value in (args.seconds, args.baseline_seconds, args.warmup_seconds)):
        parser.error("--seconds, --baseline-seconds and --warmup-seconds must be within 0..600")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
