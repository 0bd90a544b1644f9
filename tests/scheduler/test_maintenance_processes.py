"""Several real ``palimpsest serve`` processes maintaining one store while a writer appends.

This is how Palimpsest runs on a developer's machine: every IDE starts its own stdio
server on the same SQLite file (or Neo4j), each with its background loop. Intervals are
one second and thresholds small, so a few seconds show what a day would. At the end
the leases must have kept the processes apart (no thread compacted twice, no summary
overlapping another, doctor clean), every thread's backlog must be back near the
threshold, and every process must have run maintenance cycles of its own. Stopping a
server mid-pass must leave whole summaries only and no lease behind.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.models import MaintenanceCycle, NewMessage, utcnow
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.compaction import compact_thread
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.scheduler.extractive import ExtractiveSummarizer
from palimpsest.scheduler.maintenance import STOPPED_COMPACTION, STOPPED_EVOLUTION
from tests.support.transcripts import transcript
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow

PALIMPSEST = str(Path(sys.executable).parent / "palimpsest")
THRESHOLD = 8
KEEP_RECENT = 3
#: (partition, thread) pairs the writer appends to.
THREADS = [("claude", "t-a"), ("claude", "t-b"), ("windsurf", "t-c"), ("windsurf", "t-d")]
#: Seconds a server may take to stop once its stdin closes (a pass ends at its next pause;
#: generous, for a loaded machine).
STOP_SECONDS = 30


def maintenance_env(store_url: str, **extra: str) -> dict[str, str]:
    """A server environment with the scheduler on, one-second ticks and small thresholds."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
    env.update(
        {
            "PALIMPSEST_STORE": store_url,
            "PALIMPSEST_SCHEDULER": "on",
            "PALIMPSEST_COMPACTION_INTERVAL": "1",
            "KG_EVOLUTION_INTERVAL": "1",
            "PALIMPSEST_COMPACTION_THRESHOLD": str(THRESHOLD),
            "PALIMPSEST_KEEP_RECENT": str(KEEP_RECENT),
            "PALIMPSEST_ESCALATION_FANIN": "3",
            "PALIMPSEST_THREADS_PER_CYCLE": "2",
            **extra,
        }
    )
    return env


class Server:
    """One ``palimpsest serve``; over stdio it is kept alive by a stdin nobody writes to."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process = process
        self.log = log

    async def stop(self) -> int:
        """Close stdin as an IDE does when it quits, and wait for a clean exit."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        return await asyncio.wait_for(self.process.wait(), STOP_SECONDS)

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()

    def ran_in(self, cycles: list[MaintenanceCycle]) -> bool:
        """Whether this process recorded one of the cycles (holders are host:pid:random)."""
        return any(cycle.holder.rsplit(":", 2)[1] == str(self.process.pid) for cycle in cycles)


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def servers(
    store_url: str, count: int, tmp_path: Path, *, transport: str = "stdio", name: str = "server", **env: str
) -> AsyncIterator[list[Server]]:
    """Start ``count`` servers on one store; kill any left running on the way out."""
    started: list[Server] = []
    try:
        for index in range(count):
            log = tmp_path / f"{name}-{index}.log"
            http = ["--transport", "http", "--port", str(free_port())] if transport == "http" else []
            with log.open("wb") as stderr:
                process = await asyncio.create_subprocess_exec(
                    PALIMPSEST,
                    "serve",
                    *http,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=stderr,
                    env=maintenance_env(store_url, **env),
                )
            started.append(Server(process, log))
        yield started
    finally:
        for server in started:
            server.kill()
            await server.process.wait()


async def open_url(store_url: str) -> MemoryStore:
    store = open_store(store_url, Neo4jCredentials())
    await store.initialize()
    return store


async def summary_count(store: MemoryStore) -> int:
    return sum((await store.stats(None)).summaries_by_level.values())


async def all_cycles(store: MemoryStore) -> list[MaintenanceCycle]:
    return await store.recent_cycles(100_000)


async def assert_no_lease_left(store: MemoryStore) -> None:
    """A new holder takes every step's and thread's lease at once: nothing is stuck."""
    names = ["evolve:facts"] + [f"compact:{p}:{t}" for p, t in THREADS]
    for name in names:
        assert await store.acquire_lease(name, "checker", 30), f"lease {name} was left behind"
        await store.release_lease(name, "checker")


async def test_servers_sharing_a_store_keep_every_thread_digested(store_url: str, tmp_path: Path) -> None:
    """Three servers, then two (one stops mid-run), a writer appending all the while."""
    writer = await open_url(store_url)
    scripts = {thread: transcript(1400, seed=index, prefix=f"{thread}-") for index, (_, thread) in enumerate(THREADS)}
    written = dict.fromkeys(scripts, 0)

    async def append(partition: str, thread: str, count: int) -> None:
        batch: list[NewMessage] = scripts[thread][written[thread] : written[thread] + count]
        await writer.append_messages(partition, thread, batch)
        written[thread] += len(batch)

    try:
        # A backlog large enough that the servers' first passes would overlap without leases.
        for partition, thread in THREADS:
            await append(partition, thread, 300)
        async with servers(store_url, 3, tmp_path) as running:
            turn = 0

            async def write_a_turn() -> None:
                nonlocal turn
                partition, thread = THREADS[turn % len(THREADS)]
                await append(partition, thread, 3)
                turn += 1

            async def first_stopped() -> bool:
                """Write; once every server has run maintenance, stop the first one."""
                await write_a_turn()
                if turn % 10 != 0:
                    return False
                cycles = await all_cycles(writer)
                if not all(server.ran_in(cycles) for server in running):
                    return False
                assert await running[0].stop() == 0, running[0].log.read_text()
                return True

            # Write until every server has run maintenance and the first one has been
            # stopped, then four more seconds with the other two.
            # Generous deadlines: a loaded machine (CI has two cores) starts and runs the
            # servers slowly; these waits only guard against a hang.
            await eventually(first_stopped, 120, "the servers never all ran maintenance")
            loop = asyncio.get_running_loop()
            stopped_at = loop.time()
            while loop.time() < stopped_at + 4:
                await write_a_turn()
                await asyncio.sleep(0.05)

            async def settled() -> bool:
                floor = THRESHOLD + KEEP_RECENT + 1
                return not await writer.compaction_candidates(None, min_uncovered=floor, limit=10)

            await eventually(settled, 90, "the backlog never came back under the threshold", 0.2)
            codes = [await server.stop() for server in running[1:]]
            logs = [server.log.read_text() for server in running]
        assert codes == [0, 0], logs

        assert await check_store(writer) == []
        for partition, thread in THREADS:
            snapshot = await writer.snapshot(partition, thread)
            assert len(snapshot.messages) == written[thread] > 100
            assert await writer.count_uncovered(partition, thread) <= THRESHOLD + KEEP_RECENT
            leaves = sorted((s.first_seq, s.last_seq) for s in snapshot.summaries if s.level == 1)
            assert all(prev[1] < nxt[0] for prev, nxt in zip(leaves, leaves[1:], strict=False)), leaves
            assert any(summary.level >= 2 for summary in snapshot.summaries), f"{thread} never escalated"
        # The leases kept processes apart on each thread: none ever found its summaries
        # written by another (processes do compact different threads at once).
        assert not [line for log in logs for line in log.splitlines() if "is busy" in line], logs
        cycles = await all_cycles(writer)
        # Every server took part. Which of them happened to fold the backlog is the
        # leases' choice (under load one may win every race), so that is not asserted.
        assert all(server.ran_in(cycles) for server in running), [c.holder for c in cycles]
        # Cycles count what they wrote (a pass cut short by shutdown too, see the next test).
        assert 0 < sum(cycle.summaries for cycle in cycles) <= await summary_count(writer)
        assert {error for cycle in cycles for error in cycle.errors} <= {STOPPED_COMPACTION, STOPPED_EVOLUTION}
        await assert_no_lease_left(writer)
    finally:
        await writer.close()


async def test_a_server_stopped_mid_pass_leaves_whole_summaries_and_no_lease(store_url: str, tmp_path: Path) -> None:
    store = await open_url(store_url)
    try:
        for index, (partition, thread) in enumerate(THREADS[:2]):
            await store.append_messages(partition, thread, transcript(1500, seed=index, prefix=f"{thread}-"))
        async with servers(store_url, 1, tmp_path) as [server]:

            async def started() -> bool:
                return await summary_count(store) > 0

            await eventually(started, 60, "the server never started compacting", 0.2)
            assert await server.stop() == 0, server.log.read_text()
        written = await summary_count(store)
        assert await check_store(store) == []
        [cycle] = [cycle for cycle in await all_cycles(store) if cycle.job == "compaction"]
        assert cycle.errors == [STOPPED_COMPACTION], "the pass was not stopped midway (make the backlog larger)"
        assert cycle.summaries == written > 0, "the stopped cycle does not count what it wrote"
        await assert_no_lease_left(store)
        # The next process finishes what the stopped one left (leaves or escalations):
        # afterwards nothing is due and the DAG is still whole.
        config = CompactionSettings(threshold=THRESHOLD, keep_recent=KEEP_RECENT, escalation_fanin=3)
        for partition, thread in THREADS[:2]:
            await compact_thread(store, partition, thread, config, ExtractiveSummarizer())
            again = await compact_thread(store, partition, thread, config, ExtractiveSummarizer())
            assert again.status == "nothing_to_do"
        assert not await store.compaction_candidates(None, min_uncovered=THRESHOLD + KEEP_RECENT + 1, limit=5)
        assert await check_store(store) == []
    finally:
        await store.close()


def overlap(first: MaintenanceCycle, second: MaintenanceCycle) -> bool:
    return first.started_at < second.finished_at and second.started_at < first.finished_at


async def test_two_servers_compact_two_threads_at_once(store_url: str, tmp_path: Path) -> None:
    """Each thread is leased on its own: the second server takes the thread the first is not on."""
    store = await open_url(store_url)
    try:
        for index, (partition, thread) in enumerate(THREADS[:2]):
            await store.append_messages(partition, thread, transcript(2000, seed=index, prefix=f"{thread}-"))
        async with servers(store_url, 2, tmp_path, PALIMPSEST_THREADS_PER_CYCLE="1") as running:

            async def digested() -> bool:
                floor = THRESHOLD + KEEP_RECENT + 1
                return not await store.compaction_candidates(None, min_uncovered=floor, limit=5)

            await eventually(digested, 120, "the two threads were never digested", 0.2)
            codes = [await server.stop() for server in running]
            logs = [server.log.read_text() for server in running]
        assert codes == [0, 0], logs
        working = [c for c in await all_cycles(store) if c.job == "compaction" and c.summaries > 0]
        [first] = [cycle for cycle in working if running[0].ran_in([cycle])]
        [second] = [cycle for cycle in working if running[1].ran_in([cycle])]
        assert overlap(first, second), "the servers compacted one after the other"
        assert first.threads == second.threads == 1
        assert not [line for log in logs for line in log.splitlines() if "is busy" in line], logs
        assert await check_store(store) == []
    finally:
        await store.close()


async def test_a_killed_servers_thread_is_taken_up_once_its_lease_expires(store_url: str, tmp_path: Path) -> None:
    """A server killed outright (no clean stop) leaves its lease; a short one expires and another server resumes."""
    store = await open_url(store_url)
    try:
        await store.append_messages("claude", "t-a", transcript(2000, prefix="t-a-"))
        async with servers(store_url, 1, tmp_path, name="killed", PALIMPSEST_LEASE_SECONDS="3") as [doomed]:

            async def started() -> bool:
                return await summary_count(store) > 0

            await eventually(started, 60, "the first server never started compacting", 0.1)
            doomed.kill()
            await doomed.process.wait()
        assert not await store.acquire_lease("compact:claude:t-a", "checker", 30), "the killed server held no lease"
        left_behind = await store.count_uncovered("claude", "t-a")
        assert left_behind > THRESHOLD + KEEP_RECENT, "the first server finished before it was killed"
        async with servers(store_url, 1, tmp_path, name="next", PALIMPSEST_LEASE_SECONDS="3") as [successor]:

            async def resumed() -> bool:
                return await store.count_uncovered("claude", "t-a") <= THRESHOLD + KEEP_RECENT

            await eventually(resumed, 120, "the second server never took the thread up", 0.2)
            assert await successor.stop() == 0, successor.log.read_text()
        cycles = [c for c in await all_cycles(store) if c.job == "compaction" and successor.ran_in([c])]
        assert sum(cycle.summaries for cycle in cycles) > 0
        compactions = [cycle for cycle in await all_cycles(store) if cycle.job == "compaction"]
        assert not doomed.ran_in(compactions), "a server killed mid-pass recorded its pass"
        assert await check_store(store) == []
        await assert_no_lease_left(store)
    finally:
        await store.close()


#: What a clean stop must not print: a traceback, a cancelled job, a lease left to expire.
NOISE = ("Traceback", "CancelledError", "could not release", "Error running job")


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_mid_compaction_stops_the_server_cleanly(
    store_url: str, tmp_path: Path, transport: str, signum: signal.Signals
) -> None:
    """What an orchestrator (SIGTERM) or a terminal (Ctrl+C) does to a busy server.

    The server stops its background work at the next pause, records the cycle as
    stopped with what it wrote, gives its leases back and exits 0, quietly.
    """
    store = await open_url(store_url)
    try:
        for index, (partition, thread) in enumerate(THREADS[:2]):
            await store.append_messages(partition, thread, transcript(1500, seed=index, prefix=f"{thread}-"))
        async with servers(store_url, 1, tmp_path, transport=transport) as [server]:

            async def started() -> bool:
                return await summary_count(store) > 0

            await eventually(started, 60, "the server never started compacting", 0.1)
            server.process.send_signal(signum)
            code = await asyncio.wait_for(server.process.wait(), STOP_SECONDS)
        log = server.log.read_text()
        assert code == 0, log
        assert [line for line in log.splitlines() if any(word in line for word in NOISE)] == [], log
        written = await summary_count(store)
        [cycle] = [cycle for cycle in await all_cycles(store) if cycle.job == "compaction"]
        assert cycle.errors == [STOPPED_COMPACTION], "the pass was not stopped midway (make the backlog larger)"
        assert cycle.summaries == written > 0, "the stopped cycle does not count what it wrote"
        assert await check_store(store) == []
        await assert_no_lease_left(store)
    finally:
        await store.close()


async def test_maintain_runs_in_the_foreground_until_interrupted(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'maintain.db'}"
    store = await open_url(store_url)
    try:
        await store.append_messages("claude", "t-a", transcript(60, prefix="a-"))
        log = tmp_path / "maintain.log"
        with log.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                PALIMPSEST,
                "maintain",
                stdout=asyncio.subprocess.DEVNULL,
                stderr=stderr,
                env=maintenance_env(store_url),
            )
        try:

            async def cycled() -> bool:
                jobs = {cycle.job for cycle in await all_cycles(store)}
                return jobs == {"compaction", "evolution"}

            await eventually(cycled, 60, "maintain recorded no cycles", 0.2)
            process.send_signal(signal.SIGINT)
            code = await asyncio.wait_for(process.wait(), STOP_SECONDS)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert code == 0, log.read_text()
        assert await store.count_uncovered("claude", "t-a") <= THRESHOLD + KEEP_RECENT
        assert await store.acquire_lease("compact:claude:t-a", "checker", 30, now=utcnow() + timedelta(seconds=1))
        assert "compaction cycle" in log.read_text()
    finally:
        await store.close()
