"""Neo4j stopped and restarted under a running MCP server, in the middle of an ingest and of a compaction.

Why a server of the test's own: stopping the shared test Neo4j would break every other
test, and a relay that drops connections (tests/support/tcp_relay.py) never shows what a real
restart does (the database shuts down, recovers its transaction log, comes back on the
same port). So this module starts a Neo4j from the jars `tools/neo4j.sh` fetched (which
`make test` has done by the time tests run), on its own data directory and port, stops
it with SIGTERM mid-operation and starts it again on the same data.

What must hold, on one server process that is never restarted:

- while the store is down, a call answers one sentence starting ``store unavailable``
  (after the driver's retries with backoff, ``retry_seconds``), and nothing hangs;
- a call made while the store is down, on a store allowed to retry long enough, is
  retried with backoff and succeeds once the store is back;
- every acknowledged write is there afterwards, exactly once, and ``doctor`` passes;
- a compaction cut off by the outage leaves whole summaries or none, and a compaction
  run after the restart finishes the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from palimpsest.graph_schema.backends import Neo4jCredentials
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.errors import StoreUnavailable
from palimpsest.graph_schema.neo4j.store import Neo4jStore
from palimpsest.server.mcp.app import build_server
from palimpsest.server.settings import Settings

pytestmark = [pytest.mark.neo4j, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NEO4J_CACHE = ROOT / ".cache" / "neo4j"
#: Longest wait for the owned Neo4j to answer on Bolt (a JVM start on a busy 2-core machine).
START_SECONDS = 240.0
PARTITION = "claude"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def bolt_answers(port: int) -> bool:
    """Whether a Bolt server completes the version handshake on ``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"\x60\x60\xb0\x17" + b"\x00\x00\x04\x04" + b"\x00" * 12)
            return len(conn.recv(4)) == 4
    except OSError:
        return False


class OwnedNeo4j:
    """A Neo4j 5 server this module starts, stops (SIGTERM) and restarts on one port and one data directory."""

    def __init__(self, home: Path) -> None:
        lib, classes = NEO4J_CACHE / "lib", NEO4J_CACHE / "classes"
        if not (lib / ".complete").exists() or not (classes / "Launcher.class").exists():
            pytest.fail(
                f"no Neo4j jars in {NEO4J_CACHE}: run `tools/neo4j.sh start` once (make test does)", pytrace=False
            )
        self.home = home
        self.port = free_port()
        self.uri = f"bolt://127.0.0.1:{self.port}"
        self._command = [
            "java",
            "-Xms128m",
            "-Xmx512m",
            "-XX:+UseSerialGC",
            "-cp",
            f"{lib}/*:{classes}",
            "Launcher",
            str(home / "db"),
            str(self.port),
        ]
        self._process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        """Start the server and wait until it answers on Bolt."""
        log = (self.home / "log").open("ab")
        self._process = subprocess.Popen(self._command, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = asyncio.get_running_loop().time() + START_SECONDS
        while not await asyncio.to_thread(bolt_answers, self.port):
            if self._process.poll() is not None:
                pytest.fail(f"the owned Neo4j exited with {self._process.returncode}; see {self.home / 'log'}")
            if asyncio.get_running_loop().time() > deadline:
                pytest.fail(f"the owned Neo4j did not answer within {START_SECONDS:.0f} s; see {self.home / 'log'}")
            await asyncio.sleep(0.5)

    async def stop(self) -> None:
        """SIGTERM, as a service manager stops it: the database shuts down cleanly, then the port closes."""
        assert self._process is not None
        self._process.terminate()
        await asyncio.to_thread(self._process.wait, 120)

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()


@pytest.fixture(scope="module")
def owned_neo4j(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnedNeo4j]:
    server = OwnedNeo4j(tmp_path_factory.mktemp("owned-neo4j"))
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
async def running_neo4j(owned_neo4j: OwnedNeo4j) -> AsyncIterator[OwnedNeo4j]:
    """The owned server, up (each test writes its own thread)."""
    if not bolt_answers(owned_neo4j.port):
        await owned_neo4j.start()
    yield owned_neo4j


def settings(uri: str) -> Settings:
    return Settings(
        store=uri,
        partition=PARTITION,
        compaction_threshold=4,
        keep_recent=2,
        escalation_fanin=4,
        summary_model=None,
        tokens_file=None,
        scheduler=False,
    )


@contextlib.asynccontextmanager
async def serving(uri: str, *, retry_seconds: float) -> AsyncIterator[tuple[Client, Neo4jStore]]:
    """One server process over the owned Neo4j, and a client to it, for the whole test."""
    store = Neo4jStore(uri, Neo4jCredentials(), retry_seconds=retry_seconds, connect_seconds=1.0)
    server = build_server(settings(uri), store=store)
    try:
        async with Client(server, client_info=mcp_types.Implementation(name="faults", version="1")) as session:
            yield session, store
    finally:
        await store.close()


def batch(thread: str, number: int, size: int = 5) -> list[dict[str, Any]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"batch {number} message {i}: the deploy script retried the migration and it passed. " * 2,
            "message_id": f"b{number}-{i}",
        }
        for i in range(size)
    ]


class Writer:
    """Appends batch after batch, as an ingest does, and retries a refused batch until it is acknowledged."""

    def __init__(self, session: Client, thread: str) -> None:
        self.session = session
        self.thread = thread
        self.acknowledged: list[str] = []
        self.refusals: list[str] = []
        self.stop = asyncio.Event()

    async def run(self) -> None:
        number = 0
        while not self.stop.is_set():
            messages = batch(self.thread, number)
            try:
                await self.session.call_tool("append_messages", {"thread_id": self.thread, "messages": messages})
            except ToolError as exc:
                self.refusals.append(str(exc))
                await asyncio.sleep(0.2)
                continue
            self.acknowledged.extend(message["message_id"] for message in messages)
            number += 1

    async def until(self, acknowledged: int = 0, refusals: int = 0) -> None:
        while len(self.acknowledged) < acknowledged or len(self.refusals) < refusals:
            await asyncio.sleep(0.05)


async def test_an_ingest_survives_a_neo4j_restart(running_neo4j: OwnedNeo4j) -> None:
    async with (
        serving(running_neo4j.uri, retry_seconds=1.0) as (session, store),
        serving(running_neo4j.uri, retry_seconds=300.0) as (patient, _),
    ):
        writer = Writer(session, "fault-ingest")
        writing = asyncio.create_task(writer.run())
        await asyncio.wait_for(writer.until(acknowledged=15), 60)
        await running_neo4j.stop()
        await asyncio.wait_for(writer.until(refusals=2), 60)
        during = len(writer.acknowledged)
        # Made while the store is down, on a store that may retry for minutes: it waits, retried with backoff.
        waiting = asyncio.create_task(
            patient.call_tool("append_messages", {"thread_id": "fault-patient", "messages": batch("p", 0)})
        )
        await asyncio.sleep(1.0)
        assert not waiting.done()
        await running_neo4j.start()
        await asyncio.wait_for(writer.until(acknowledged=during + 15), 120)
        writer.stop.set()
        await asyncio.wait_for(writing, 60)
        patient_result = await asyncio.wait_for(waiting, 300)

        assert patient_result.structured_content is not None
        assert patient_result.structured_content["appended"] == 5
        assert writer.refusals and all(r.startswith("store unavailable: ") for r in writer.refusals), writer.refusals
        assert all("\n" not in refusal for refusal in writer.refusals)
        stored = await store.get_messages(PARTITION, "fault-ingest")
        assert [message.source_id for message in stored] == writer.acknowledged
        assert [message.seq for message in stored] == list(range(len(stored)))
        assert not await check_store(store)


async def test_a_compaction_survives_a_neo4j_restart(running_neo4j: OwnedNeo4j) -> None:
    thread = "fault-compaction"
    async with serving(running_neo4j.uri, retry_seconds=1.0) as (session, store):
        messages = [message for number in range(150) for message in batch(thread, number)]
        await session.call_tool("append_messages", {"thread_id": thread, "messages": messages})
        compacting = asyncio.create_task(session.call_tool("compact_thread", {"thread_id": thread}))
        while len((await store.summary_dag(PARTITION, thread)).nodes) < 5:
            assert not compacting.done(), "the compaction finished before the outage: make the thread longer"
            await asyncio.sleep(0.1)
        await running_neo4j.stop()
        with pytest.raises(ToolError, match="^store unavailable: "):
            await asyncio.wait_for(compacting, 120)
        await running_neo4j.start()

        written = {node.id for node in (await store.summary_dag(PARTITION, thread)).nodes}
        assert len(written) >= 5
        assert not await check_store(store), "the cut compaction left a partial summary"
        result = await session.call_tool("compact_thread", {"thread_id": thread})
        assert result.structured_content is not None and result.structured_content["status"] == "compacted"

        dag = await store.summary_dag(PARTITION, thread)
        assert written <= {node.id for node in dag.nodes}
        assert await store.count_uncovered(PARTITION, thread) <= 4 + 2
        stored = await store.get_messages(PARTITION, thread)
        assert [message.source_id for message in stored] == [message["message_id"] for message in messages]
        assert not await check_store(store)


async def test_an_unreachable_neo4j_is_reported_in_one_line() -> None:
    """The driver joins a failed connection's causes with newlines; a client gets one sentence."""
    uri = f"bolt://127.0.0.1:{free_port()}"  # nothing listens there
    store = Neo4jStore(uri, Neo4jCredentials(), retry_seconds=0.2, connect_seconds=0.5)
    try:
        with pytest.raises(StoreUnavailable, match=f"^Neo4j at {uri} cannot be reached") as refused:
            await store.initialize()
    finally:
        await store.close()
    assert "\n" not in str(refused.value)
    assert "Connect call failed" in str(refused.value)
