"""The maintenance loop in one process: ticks, leases, pauses, shutdown, the scheduler.

Ticks run on both stores with an injected clock, so lease expiry and renewal are
tested without sleeping; the scheduler runs with one-second intervals. The foreground
gate is shown to keep a grep fast while a large compaction runs in the same server,
and ``memory_stats`` and ``palimpsest maintain --once`` are checked through their real
front doors (an in-memory MCP client, typer's runner).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from fastmcp import Client
from rich.console import Console
from rich.progress import Progress
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.errors import StoreUnavailable
from palimpsest.graph_schema.models import Message, NewMessage
from palimpsest.graph_schema.sqlite.store import SqliteStore
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.compaction import Pause
from palimpsest.scheduler.extractive import ExtractiveSummarizer
from palimpsest.scheduler.foreground import ForegroundGate
from palimpsest.scheduler.maintenance import (
    LEASE_SECONDS,
    STOPPED_EVOLUTION,
    EvolutionStep,
    Maintenance,
    backlog_floor,
    catch_up_share,
    evolution_steps,
)
from palimpsest.scheduler.summarizer import Background, SummaryDraft
from palimpsest.server.cli.main import app
from palimpsest.server.cli.output import job_bars
from palimpsest.server.mcp.app import build_server
from palimpsest.server.settings import Settings
from tests.support.transcripts import transcript

PARTITION = "claude"


def make_settings(store_url: str = "sqlite:///:memory:", **overrides: Any) -> Settings:
    """Small compaction numbers so a few dozen messages compact; no scheduler unless asked."""
    values: dict[str, Any] = {
        "store": store_url,
        "partition": None,
        "compaction_threshold": 6,
        "keep_recent": 2,
        "escalation_fanin": 3,
        "threads_per_cycle": 2,
        "scheduler": False,
        "summary_model": None,
        "tokens_file": None,
    }
    values.update(overrides)
    return Settings(**values)


class Clock:
    """An injected clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def maintenance(store: MemoryStore, clock: Clock, **options: Any) -> Maintenance:
    """A maintenance of holder ``alpha`` with small settings and the injected clock."""
    options.setdefault("holder", "alpha")
    settings = options.pop("settings", make_settings())
    return Maintenance(store, settings.maintenance, ExtractiveSummarizer(), clock=clock, **options)


async def fill(store: MemoryStore, sizes: dict[str, int]) -> None:
    """Append a realistic transcript of the given size to each thread."""
    for thread_id, size in sizes.items():
        await store.append_messages(PARTITION, thread_id, transcript(size, prefix=f"{thread_id}-"))


async def uncovered(store: MemoryStore, thread_id: str) -> int:
    return await store.count_uncovered(PARTITION, thread_id)


class FailingFor(ExtractiveSummarizer):
    """The extractive summarizer, except for messages of one thread, where it breaks."""

    def __init__(self, thread_id: str) -> None:
        super().__init__()
        self.thread_id = thread_id

    async def summarize_messages(
        self, messages: Sequence[Message], *, background: Background | None = None
    ) -> SummaryDraft:
        if messages[0].thread_id == self.thread_id:
            raise RuntimeError(f"summarizer broke on {self.thread_id}")
        return await super().summarize_messages(messages, background=background)


# -- the compaction tick -------------------------------------------------------------


async def test_compaction_tick_takes_the_largest_backlogs_and_records_a_cycle(store: MemoryStore) -> None:
    await fill(store, {"big": 60, "mid": 40, "small": 30, "tiny": 8})
    clock = Clock()
    cycle = await maintenance(store, clock).compaction_tick()

    assert cycle is not None
    assert (cycle.job, cycle.holder, cycle.threads, cycle.errors) == ("compaction", "alpha", 2, [])
    snapshot_big = await store.snapshot(PARTITION, "big")
    snapshot_mid = await store.snapshot(PARTITION, "mid")
    assert cycle.summaries == len(snapshot_big.summaries) + len(snapshot_mid.summaries) > 2
    assert any(summary.level >= 2 for summary in snapshot_big.summaries), "no escalation after the pass"
    # Only threads_per_cycle threads a tick: "small" waits for the next one.
    assert await uncovered(store, "small") == 30
    assert await uncovered(store, "big") <= 6 + 2 and await uncovered(store, "mid") <= 6 + 2
    assert await store.recent_cycles(5) == [cycle]
    assert await check_store(store) == []
    # Every lease went back: another process can take each thread at once.
    for name in (f"compact:{PARTITION}:big", f"compact:{PARTITION}:mid", f"compact:{PARTITION}:small"):
        assert await store.acquire_lease(name, "beta", 60, now=clock())
    # Every thread due is held elsewhere: nothing to do here, nothing recorded.
    assert await maintenance(store, clock, holder="gamma").compaction_tick() is None
    assert await store.recent_cycles(5) == [cycle]


async def test_a_scheduled_run_chains_ticks_until_no_thread_is_due(store: MemoryStore) -> None:
    await fill(store, {"t-1": 60, "t-2": 50, "t-3": 40, "t-4": 30, "t-5": 20, "quiet": 8})
    worker = Maintenance(
        store, make_settings().maintenance, FailingFor("t-5"), clock=Clock(), holder="alpha"
    )  # fmt: skip

    await worker._scheduled("compaction")

    # Two threads a tick: t-1 and t-2, then t-3 and t-4, then t-5 alone, which fails and ends the run.
    cycles = await store.recent_cycles(10)  # the injected clock stands still: one moment for all three
    assert sorted((cycle.threads, len(cycle.errors)) for cycle in cycles) == [(0, 1), (2, 0), (2, 0)]
    assert all([await uncovered(store, thread) <= 6 + 2 for thread in ("t-1", "t-2", "t-3", "t-4")])
    assert (await uncovered(store, "t-5"), await uncovered(store, "quiet")) == (20, 8)
    floor = backlog_floor(make_settings().maintenance.compaction)
    [still_due] = await store.compaction_candidates(None, min_uncovered=floor, limit=10)
    assert still_due.thread_id == "t-5"


def test_fires_skipped_while_a_run_goes_on_are_not_logged() -> None:
    Maintenance(SqliteStore(":memory:"), make_settings().maintenance, ExtractiveSummarizer()).start(AsyncIOScheduler())
    scheduler_log = logging.getLogger("apscheduler.scheduler")

    def record(message: str) -> logging.LogRecord:
        return scheduler_log.makeRecord(scheduler_log.name, logging.WARNING, __file__, 1, message, (), None)

    skipped = 'Execution of job "palimpsest compaction" skipped: maximum number of running instances reached (1)'
    assert not scheduler_log.filter(record(skipped))
    assert scheduler_log.filter(record('Run time of job "palimpsest compaction" was missed by 0:00:03'))


async def test_a_thread_held_by_a_dead_process_is_compacted_once_its_short_lease_expires(
    store: MemoryStore,
) -> None:
    await fill(store, {"t-1": 40})
    clock = Clock()
    assert await store.acquire_lease(f"compact:{PARTITION}:t-1", "beta", LEASE_SECONDS, now=clock())

    assert await maintenance(store, clock).compaction_tick() is None
    assert await uncovered(store, "t-1") == 40
    assert await store.recent_cycles(5) == []

    clock.advance(LEASE_SECONDS)  # beta died without renewing: its lease expires and alpha runs
    cycle = await maintenance(store, clock).compaction_tick()
    assert cycle is not None and cycle.threads == 1
    assert await uncovered(store, "t-1") <= 8


async def test_a_thread_claimed_elsewhere_is_skipped_and_the_others_compacted(store: MemoryStore) -> None:
    await fill(store, {"t-1": 50, "t-2": 40})
    clock = Clock()
    assert await store.acquire_lease(f"compact:{PARTITION}:t-1", "beta", 300, now=clock())

    cycle = await maintenance(store, clock).compaction_tick()

    assert cycle is not None and cycle.threads == 1
    assert await uncovered(store, "t-1") == 50
    assert await uncovered(store, "t-2") <= 8
    # beta's claim is untouched by alpha's release.
    assert not await store.acquire_lease(f"compact:{PARTITION}:t-1", "gamma", 300, now=clock())


async def test_a_failing_thread_is_recorded_and_the_tick_goes_on(store: MemoryStore) -> None:
    await fill(store, {"t-bad": 50, "t-good": 40})
    clock = Clock()
    tick = Maintenance(
        store, make_settings().maintenance, FailingFor("t-bad"), clock=clock, holder="alpha"
    ).compaction_tick()

    cycle = await tick

    assert cycle is not None
    assert cycle.errors == ["thread t-bad: RuntimeError: summarizer broke on t-bad"]
    assert (cycle.threads, await uncovered(store, "t-bad")) == (1, 50)
    assert await uncovered(store, "t-good") <= 8
    assert await store.recent_cycles(1) == [cycle]
    assert await store.acquire_lease(f"compact:{PARTITION}:t-bad", "beta", 60, now=clock())
    assert await store.acquire_lease(f"compact:{PARTITION}:t-good", "beta", 60, now=clock())


async def test_a_store_outage_is_recorded_not_raised(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "m.db"))
    await store.initialize()
    await fill(store, {"t-1": 40})
    worker = maintenance(store, Clock())

    async def close_the_store(_pause: Pause) -> int:
        await store.close()
        return 0

    async def read_the_store(_pause: Pause) -> int:
        return (await store.stats(None)).messages

    worker.steps = [EvolutionStep("outage", close_the_store), EvolutionStep("read", read_the_store)]
    cycle = await worker.evolution_tick()
    assert cycle is not None and cycle.steps == {"outage": 0}
    # The outage ends the tick when the next step asks for its lease; the read never runs.
    assert cycle.errors == ["the SQLite store is not open: call initialize() first"]
    # A tick that cannot even read the backlog raises; the scheduled job logs and goes on.
    with pytest.raises(StoreUnavailable):
        await worker.compaction_tick()
    await worker._scheduled("compaction")


# -- the evolution tick --------------------------------------------------------------


async def test_evolution_runs_every_step_and_records_their_counts(store: MemoryStore) -> None:
    ran: list[str] = []

    def step(name: str, count: int) -> EvolutionStep:
        async def run(_pause: Pause) -> int:
            ran.append(name)
            if count < 0:
                raise ValueError(f"{name} cannot parse its batch")
            return count

        return EvolutionStep(name, run, counts_facts=name.startswith("facts"))

    steps = [step("facts", 7), step("broken", -1), step("embeddings", 120), step("facts-superseded", 2)]
    cycle = await maintenance(store, Clock(), steps=steps).evolution_tick()

    assert ran == ["facts", "broken", "embeddings", "facts-superseded"]
    assert cycle is not None
    assert (cycle.job, cycle.facts, cycle.threads, cycle.summaries) == ("evolution", 9, 0, 0)
    assert cycle.steps == {"facts": 7, "embeddings": 120, "facts-superseded": 2}
    assert cycle.errors == ["step broken: ValueError: broken cannot parse its batch"]
    assert await store.recent_cycles(5) == [cycle]


async def test_leases_are_renewed_during_a_long_step_and_a_lost_one_ends_only_that_step(store: MemoryStore) -> None:
    clock = Clock()
    seen: list[bool] = []

    def slow_batches(name: str) -> EvolutionStep:
        async def run(pause: Pause) -> int:
            for _ in range(4):
                clock.advance(80)  # each batch takes most of a 100 s lease
                seen.append(await store.acquire_lease(f"evolve:{name}", "beta", 100, now=clock()))
                await pause()
            return 4

        return EvolutionStep(name, run)

    steps = [slow_batches("batches"), slow_batches("more")]
    cycle = await maintenance(store, clock, steps=steps, lease_seconds=100).evolution_tick()
    assert cycle is not None and cycle.errors == [] and cycle.steps == {"batches": 4, "more": 4}
    assert seen == [False] * 8, "beta got the lease of a live step"

    async def stall(pause: Pause) -> int:
        clock.advance(101)
        assert await store.acquire_lease("evolve:stall", "beta", 100, now=clock())
        await pause()
        return 1

    after: list[int] = []

    async def next_step(_pause: Pause) -> int:
        after.append(1)
        return 1

    steps = [EvolutionStep("stall", stall), EvolutionStep("after", next_step)]
    cycle = await maintenance(store, clock, steps=steps, lease_seconds=100).evolution_tick()
    assert cycle is not None and after == [1]
    assert cycle.steps == {"after": 1}
    assert cycle.errors == [
        "step stall: lease evolve:stall was taken over by another process (this one stalled past its expiry)"
    ]
    # beta holds it still: alpha's release on the way out did not touch beta's lease.
    assert not await store.acquire_lease("evolve:stall", "gamma", 100, now=clock())
    assert await store.acquire_lease("evolve:after", "gamma", 100, now=clock())


async def test_the_heartbeat_keeps_a_lease_through_a_pause_longer_than_its_life(store: MemoryStore) -> None:
    """A step that never pauses (a summary drafted by a slow model) keeps its lease.

    Real time here: a 0.6 s lease, renewed every 0.2 s, outlives a 2 s step with no
    pause point in it; once the tick is over, the lease is free at once.
    """
    seen: list[bool] = []

    async def long_draft(_pause: Pause) -> int:
        for _ in range(10):
            await asyncio.sleep(0.2)
            seen.append(await store.acquire_lease("evolve:draft", "beta", 0.6))
        return 1

    worker = Maintenance(
        store,
        make_settings().maintenance,
        ExtractiveSummarizer(),
        steps=[EvolutionStep("draft", long_draft)],
        lease_seconds=0.6,
        heartbeat_seconds=0.2,
    )
    cycle = await worker.evolution_tick()
    assert cycle is not None and cycle.errors == [] and cycle.steps == {"draft": 1}
    assert seen == [False] * 10, "the lease expired while its holder worked"
    assert await store.acquire_lease("evolve:draft", "beta", 0.6)


# -- shutdown and the scheduler ------------------------------------------------------


async def test_shutdown_stops_a_tick_at_its_next_pause_and_releases_its_leases(store: MemoryStore) -> None:
    clock = Clock()
    started = asyncio.Event()
    release = asyncio.Event()
    ran: list[str] = []

    async def long_batch(_pause: Pause) -> int:
        ran.append("long")
        started.set()
        await release.wait()
        return 5

    async def next_batch(_pause: Pause) -> int:
        ran.append("next")
        return 1

    worker = maintenance(store, clock, steps=[EvolutionStep("long", long_batch), EvolutionStep("next", next_batch)])
    tick = asyncio.create_task(worker._scheduled("evolution"))
    await started.wait()
    stopping = asyncio.create_task(worker.shutdown(timeout=5))
    await asyncio.sleep(0.05)
    assert not stopping.done(), "shutdown did not wait for the running batch"
    release.set()
    await asyncio.wait_for(stopping, 5)
    await tick

    assert ran == ["long"]
    [cycle] = await store.recent_cycles(5)
    assert cycle.steps == {"long": 5} and cycle.errors == [STOPPED_EVOLUTION]
    assert await store.acquire_lease("evolve:long", "beta", 60, now=clock())
    # Once stopped, a scheduled tick does nothing at all.
    await worker._scheduled("compaction")
    assert len(await store.recent_cycles(5)) == 1


async def test_the_scheduler_runs_both_jobs_on_their_intervals(store: MemoryStore) -> None:
    await fill(store, {"t-1": 40})
    ran: list[int] = []

    async def step(_pause: Pause) -> int:
        ran.append(1)
        return 1

    settings = make_settings(compaction_interval=1, evolution_interval=1)
    worker = Maintenance(store, settings.maintenance, ExtractiveSummarizer(), steps=[EvolutionStep("count", step)])
    scheduler = AsyncIOScheduler()
    worker.start(scheduler)
    jobs = {job.id: job for job in scheduler.get_jobs()}
    assert set(jobs) == {"palimpsest-compaction", "palimpsest-evolution"}
    assert all(job.coalesce and job.max_instances == 1 for job in jobs.values())
    scheduler.start()
    try:
        for _ in range(100):
            cycles = await store.recent_cycles(10)
            if {cycle.job for cycle in cycles} == {"compaction", "evolution"}:
                break
            await asyncio.sleep(0.05)
    finally:
        await worker.shutdown(scheduler)
    assert {cycle.job for cycle in cycles} == {"compaction", "evolution"}
    assert await uncovered(store, "t-1") <= 8 and ran
    assert not scheduler.running


# -- foreground first ----------------------------------------------------------------


async def test_the_gate_waits_for_calls_in_flight_within_its_cap() -> None:
    """A background task's first wait (a tick starting) is bounded by the cap alone."""
    gate = ForegroundGate(quiet_seconds=0.02, max_wait_seconds=0.3)

    def first_wait() -> asyncio.Task[bool]:
        return asyncio.create_task(gate.wait_idle())

    assert await first_wait() is True

    async def call(seconds: float) -> None:
        async with gate.foreground():
            await asyncio.sleep(seconds)

    in_flight = asyncio.create_task(call(0.1))
    await asyncio.sleep(0)
    assert gate.active == 1
    assert await first_wait() is True
    assert in_flight.done() and gate.active == 0

    # A steady stream of calls: the wait ends at the cap while calls are still in flight,
    # so background work never starves.
    stream = [asyncio.create_task(call(0.05 * (i + 1))) for i in range(20)]
    await asyncio.sleep(0)
    assert await first_wait() is False
    assert gate.active > 0 and not all(task.done() for task in stream)
    for task in stream:
        task.cancel()
    await asyncio.gather(*stream, return_exceptions=True)
    assert gate.active == 0


async def test_under_constant_load_background_work_gets_its_share() -> None:
    """After a slice of work, a background task waits for the foreground in proportion.

    A call holds the gate from the first slice on; without the share, every wait would
    run to the 30 s cap. With a share of one half, a 0.2 s slice owes about 0.2 s of
    waiting (the 10 s bound below only guards against that cap).
    """
    gate = ForegroundGate(quiet_seconds=0.02, max_wait_seconds=30, background_share=0.5)
    release = asyncio.Event()
    busy = asyncio.Event()
    calls: list[asyncio.Task[None]] = []

    async def endless_call() -> None:
        async with gate.foreground():
            busy.set()
            await release.wait()

    async def background() -> list[bool]:
        waits = [await gate.wait_idle()]  # the tick starts while the server is idle
        calls.append(asyncio.create_task(endless_call()))
        await busy.wait()
        for _ in range(3):
            await asyncio.sleep(0.2)  # one slice of work
            waits.append(await gate.wait_idle())
        return waits

    try:
        assert await asyncio.wait_for(background(), 10) == [True, False, False, False]
    finally:
        release.set()
        await asyncio.gather(*calls)
    with pytest.raises(ValueError, match="background_share"):
        ForegroundGate(background_share=0)


async def test_a_wait_that_asks_for_a_larger_share_is_held_less() -> None:
    """Work far behind asks for all of the time: after its slice it owes no wait at all.

    The gate's own share (a hundredth) would hold each wait to the 30 s cap while a call
    is in flight; asked with a share of 1, the wait ends at once, and the call is still
    in flight when it does.
    """
    gate = ForegroundGate(quiet_seconds=0.02, max_wait_seconds=30, background_share=0.01)
    release = asyncio.Event()
    busy = asyncio.Event()

    async def endless_call() -> None:
        async with gate.foreground():
            busy.set()
            await release.wait()

    calls: list[asyncio.Task[None]] = []

    async def background() -> list[bool]:
        waits = [await gate.wait_idle()]  # the tick starts while the server is idle
        calls.append(asyncio.create_task(endless_call()))
        await busy.wait()
        await asyncio.sleep(0.05)  # one slice of work
        waits.append(await gate.wait_idle(share=1.0))
        return waits

    try:
        assert await asyncio.wait_for(background(), 10) == [True, False]
        assert gate.active == 1
        with pytest.raises(ValueError, match="share must be in"):
            await gate.wait_idle(share=0)
    finally:
        release.set()
        await asyncio.gather(*calls)


def test_a_thread_twice_its_floor_behind_is_owed_twice_the_share() -> None:
    floor = backlog_floor(make_settings().maintenance.compaction)  # 6 + 2 + 1
    assert catch_up_share(0.25, 2 * floor - 1, floor) is None
    assert catch_up_share(0.25, 2 * floor, floor) == 0.5
    assert catch_up_share(0.75, 10 * floor, floor) == 1.0


async def test_a_stopping_process_ends_background_waits_at_once() -> None:
    gate = ForegroundGate(max_wait_seconds=30)
    release = asyncio.Event()

    async def endless_call() -> None:
        async with gate.foreground():
            await release.wait()

    call = asyncio.create_task(endless_call())
    await asyncio.sleep(0)
    waiting = asyncio.create_task(gate.wait_idle())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    gate.stop_waiting()
    try:
        assert await asyncio.wait_for(waiting, 10) is False  # not the 30 s cap
        assert await asyncio.wait_for(gate.wait_idle(), 10) is False
    finally:
        release.set()
        await call


async def test_a_grep_never_waits_behind_more_than_one_write_of_a_running_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction pass yields to tool calls before each summary (the foreground gate).

    So while one grep is in flight, at most the one write (a batch of summaries, one
    transaction) already under way when it arrived is persisted; without the gate, the
    pass would keep writing batches while the grep waits behind them.
    """
    url = f"sqlite:///{tmp_path / 'busy.db'}"
    seeding = open_store(url)
    await seeding.initialize()
    sizes = {f"t-{i}": 500 for i in range(4)}
    await fill(seeding, sizes)
    persisted = 0
    persist = seeding.persist_summaries

    async def counting_persist(*args: Any, **kwargs: Any) -> Any:
        nonlocal persisted
        result = await persist(*args, **kwargs)
        persisted += 1
        return result

    monkeypatch.setattr(seeding, "persist_summaries", counting_persist)
    # Writes of summaries while each tool call held the gate, counted in the server.
    overlaps: list[int] = []

    class CountingGate(ForegroundGate):
        @asynccontextmanager
        async def foreground(self) -> AsyncIterator[None]:
            async with super().foreground():
                entered = persisted
                try:
                    yield
                finally:
                    overlaps.append(persisted - entered)

    monkeypatch.setattr("palimpsest.server.mcp.app.ForegroundGate", CountingGate)
    settings = make_settings(
        url, scheduler=True, compaction_interval=1, compaction_threshold=20, keep_recent=5, threads_per_cycle=4
    )
    server = build_server(settings, store=seeding)

    async def grep_overlaps(session: Client, count: int) -> list[int]:
        """For each grep, how many writes of summaries happened while it was in flight."""
        del overlaps[:]
        for _ in range(count):
            result = await session.call_tool("grep_memories", {"query": "refresh token", "limit": 5})
            assert result.structured_content is not None and result.structured_content["hits"]
        return list(overlaps)

    async def summaries() -> int:
        return sum((await seeding.stats(PARTITION)).summaries_by_level.values())

    try:
        async with Client(server, client_info=mcp_types.Implementation(name="claude-code", version="1")) as session:
            await grep_overlaps(session, 5)  # warm up
            for _ in range(200):
                if await summaries() > 0:
                    break
                await asyncio.sleep(0.02)
            before = await summaries()
            assert before > 0, "the background compaction did not start"
            busy = await grep_overlaps(session, 40)
            for _ in range(600):
                stats = (await session.call_tool("memory_stats", {})).structured_content
                assert stats is not None
                if not stats["pending"] and any(c["summaries"] for c in stats["last_cycles"]):
                    break
                await asyncio.sleep(0.1)
            after = await summaries()
    finally:
        await seeding.close()
    assert after > before, "the greps were not sent during the compaction pass"
    assert max(busy) <= 1, busy


async def test_memory_stats_shows_last_cycles_and_pending(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'stats.db'}"
    seeding = open_store(url)
    await seeding.initialize()
    try:
        await fill(seeding, {"t-big": 40, "t-small": 5})
        await seeding.append_messages("windsurf", "t-other", transcript(40, prefix="o-"))
        clock = Clock()
        settings = make_settings(url)
        await seeding.record_cycle(
            (await Maintenance(seeding, settings.maintenance, ExtractiveSummarizer(), clock=clock).evolution_tick())
            or pytest.fail("no evolution cycle")
        )
        server = build_server(settings)
        async with Client(server, client_info=mcp_types.Implementation(name="claude-code", version="1")) as session:
            before = (await session.call_tool("memory_stats", {})).structured_content
            await Maintenance(
                seeding,
                settings.model_copy(update={"threads_per_cycle": 3}).maintenance,
                ExtractiveSummarizer(),
                clock=clock,
            ).compaction_tick()
            after = (await session.call_tool("memory_stats", {})).structured_content
    finally:
        await seeding.close()
    assert before is not None and after is not None
    assert before["pending"] == [{"thread_id": "t-big", "partition": PARTITION, "uncovered": 40}]
    assert [cycle["job"] for cycle in before["last_cycles"]] == ["evolution"]
    assert (before["messages"], before["threads"]) == (45, 2)
    assert after["pending"] == []
    assert [cycle["job"] for cycle in after["last_cycles"]] == ["compaction", "evolution"]
    assert after["last_cycles"][0]["threads"] == 2  # t-big here, t-other in windsurf: cycles are global
    assert backlog_floor(settings.compaction) == 9


# -- palimpsest maintain --once ------------------------------------------------------


def test_maintain_once_compacts_and_reports(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"

    async def seed() -> None:
        store = open_store(url)
        await store.initialize()
        try:
            await fill(store, {"t-1": 60, "t-2": 20})
        finally:
            await store.close()

    asyncio.run(seed())
    env = {"PALIMPSEST_STORE": None, "PALIMPSEST_COMPACTION_THRESHOLD": "6", "PALIMPSEST_KEEP_RECENT": "2"}
    runner = CliRunner()

    result = runner.invoke(app, ["maintain", "--once", "--store", url, "--json"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) == {"compaction", "evolution"}
    assert (report["compaction"]["threads"], report["compaction"]["errors"]) == (2, [])
    assert report["compaction"]["summaries"] >= 4
    assert report["evolution"]["job"] == "evolution"

    table = runner.invoke(app, ["maintain", "--once", "--store", url], env=env)
    assert table.exit_code == 0, table.output
    assert "compaction" in table.stdout and "evolution" in table.stdout

    async def inspect() -> tuple[int, list[str]]:
        store = open_store(url)
        await store.initialize()
        try:
            breaches = await check_store(store)
            free = await store.acquire_lease(f"compact:{PARTITION}:t-1", "other-process", 600)
            left = await store.count_uncovered(PARTITION, "t-1")
            # A new backlog, on a thread another process is compacting.
            await fill(store, {"t-3": 40})
            held = await store.acquire_lease(f"compact:{PARTITION}:t-3", "other-process", 600)
            return left, [breach.message for breach in breaches] + ([] if free and held else ["lease left behind"])
        finally:
            await store.close()

    left, problems = asyncio.run(inspect())
    assert left <= 8 and problems == []
    # Another process holds the only thread due: this run skips the compaction job.
    skipped = runner.invoke(app, ["maintain", "--once", "--store", url, "--json"], env=env)
    assert skipped.exit_code == 0, skipped.output
    assert json.loads(skipped.stdout)["compaction"] is None
    shown = runner.invoke(app, ["maintain", "--once", "--store", url], env=env)
    [row] = [line for line in shown.stdout.splitlines() if "compaction" in line]
    assert "skipped" in row


async def test_run_once_drives_one_progress_bar_per_job(store: MemoryStore) -> None:
    await fill(store, {"t-1": 40, "t-2": 30, "t-3": 5})

    async def step(pause: Pause) -> int:
        await pause()
        return 2

    worker = maintenance(store, Clock(), steps=[EvolutionStep("a", step), EvolutionStep("b", step)])
    bars = Progress(console=Console(file=io.StringIO()))
    with bars:
        cycles = await worker.run_once(job_bars(bars))
    assert [(task.description, task.completed, task.total) for task in bars.tasks] == [
        ("compaction", 2, 2),
        ("evolution", 2, 2),
    ]
    assert cycles["compaction"] is not None and cycles["compaction"].threads == 2
    assert cycles["evolution"] is not None and cycles["evolution"].steps == {"a": 2, "b": 2}


async def test_the_standard_evolution_extracts_the_facts_of_threads_whose_layer_is_on(store: MemoryStore) -> None:
    decision = "Decision: the API uses JWT access tokens signed with RS256 keys rotated weekly."
    for thread_id in ("t-on", "t-off"):
        await store.append_messages(PARTITION, thread_id, [NewMessage(role="assistant", content=decision)])
    await store.set_fact_layer(PARTITION, "t-off", False)  # on by default: `kg off` turns one off
    # PALIMPSEST_FACTS=off: no fact step; tool messages' search text always, vector upkeep always last.
    assert [step.name for step in evolution_steps(store, None, facts=False)] == ["search_text", "vector_upkeep"]
    steps = evolution_steps(store, None)
    assert [step.name for step in steps] == ["facts", "search_text", "vector_upkeep"]

    cycle = await Maintenance(
        store, make_settings().maintenance, ExtractiveSummarizer(), steps=steps, holder="alpha"
    ).evolution_tick()

    assert cycle is not None and cycle.facts == 1 and cycle.steps == {"facts": 1, "search_text": 0, "vector_upkeep": 0}
    facts = await store.list_facts(PARTITION)
    assert [fact.thread_id for fact in facts] == ["t-on"]
    assert "JWT" in facts[0].text
