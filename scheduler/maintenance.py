"""The maintenance loop: memory kept digested in the background, safely across processes.

Users never call ``compact_thread`` by hand: every server process runs two jobs on an
APScheduler ``AsyncIOScheduler``. The compaction tick folds the threads with the
largest backlog (a few a tick, escalating each after its pass); the evolution tick
runs the fact-layer and embedding upkeep steps registered in `evolution_steps`.

Every IDE starts its own stdio server, and a team runs several servers on one Neo4j, so
many processes share one store. What must be exclusive is claimed with a lease in the
store, as small as the work allows, so N processes do N pieces of work at once: each
thread is compacted under ``compact:{partition}:{thread_id}`` and each evolution step
runs under ``evolve:{step}``; a process that finds one held goes on to the next. A
lease lives `LEASE_SECONDS` (15 s) and its holder renews it every third of that while it
works (a `LeaseKeeper` beats in the background, and every pause point renews too), so
the work of a process that died without a word is taken up by another within one
lease's life, and a clean stop releases at once. Underneath, the store refuses a second
summary over the same children, so even a lease lost to a long stall cannot fold a
message twice.

Between summaries the work pauses: it yields to tool calls in flight (the in-process
`ForegroundGate`), renews its leases, and stops there on shutdown; shutdown abandons a
draft still unfinished after a few seconds (a batch is one transaction, so whole
summaries only are left). Every cycle that ran is recorded as a `MaintenanceCycle`
with what it wrote, errors (and an interruption) as sentences; nothing a job raises
stops the loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from types import TracebackType
from typing import TypeVar

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.graph_schema.models import MaintenanceCycle, Summary, utcnow
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.compaction import Pause, compact_thread
from palimpsest.scheduler.config import CompactionSettings, LlmSettings, MaintenanceSettings, StoreBudget
from palimpsest.scheduler.embedders import Embedder
from palimpsest.scheduler.embedding import backfill_embeddings
from palimpsest.scheduler.facts import evolve_facts
from palimpsest.scheduler.foreground import ForegroundGate
from palimpsest.scheduler.model_reading import ModelReader, read_quiet_sessions
from palimpsest.scheduler.portability.archive import archive_to_budget
from palimpsest.scheduler.search_text import fill_search_texts
from palimpsest.scheduler.summarizer import Summarizer

logger = logging.getLogger(__name__)

T = TypeVar("T")

COMPACTION = "compaction"
EVOLUTION = "evolution"
#: How long a lease lives without renewal by default (``PALIMPSEST_LEASE_SECONDS``):
#: the longest a dead holder's work waits. Its holder renews it every third of that
#: while it works, so two beats may be late before it expires.
LEASE_SECONDS = MaintenanceSettings().lease_seconds
#: How long shutdown waits for a running tick to reach its next pause point before
#: cancelling it (each batch of summaries is one transaction, so cancelling is safe).
STOP_SECONDS = 5.0
#: Candidates read per thread a tick may compact: threads other processes hold are
#: skipped, and the tick goes on down the list.
CANDIDATES_PER_THREAD = 4
#: A thread this many times its compaction floor behind (`backlog_floor`) is compacted
#: with a larger share of a busy process's time (`catch_up_share`).
BEHIND_FACTOR = 2
#: Compaction ticks one scheduled run chains at most while threads stay due
#: (`Maintenance.compaction_run`): a bound on one run, the next interval goes on.
CATCH_UP_TICKS = 50
#: What a compaction cycle stopped by shutdown records.
STOPPED_COMPACTION = "stopped by shutdown; the thread in progress is finished next tick"
#: What an evolution cycle stopped by shutdown records.
STOPPED_EVOLUTION = "stopped by shutdown; the step in progress goes on next tick"

#: Reports progress to a caller (the CLI's bar): job name, items done, items in all.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class EvolutionStep:
    """One upkeep step of the evolution tick.

    Attributes:
        name: Shown in the cycle's ``steps`` counts (``facts``, ``embeddings``); the
            step runs under the lease ``evolve:{name}``.
        run: Does the step's work and says how many items it handled. It is given the
            tick's pause point: a step working in batches awaits it between them, to
            yield to tool calls, renew the step's lease and stop cleanly on shutdown.
        counts_facts: Whether its count is added to the cycle's ``facts``.
    """

    name: str
    run: Callable[[Pause], Awaitable[int]]
    counts_facts: bool = False


def evolution_steps(
    store: MemoryStore,
    embedder: Embedder | None,
    budget: StoreBudget | None = None,
    *,
    facts: bool = True,
    progress: Progress | None = None,
    llm: LlmSettings | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> list[EvolutionStep]:
    """The evolution tick's steps, in the order they run: facts, search text, readings, embeddings, archiving, upkeep.

    Why a factory: a step needs the store and embedder of the process that runs it (the
    server's lifespan or ``palimpsest maintain``), and both build their steps here.
    Embedding last means the facts extracted this tick are embedded in the same tick.
    The ``search_text`` step writes what tool messages are about where no embedder did
    (`fill_search_texts`), with or without an embedder, and drops the vectors made from
    their raw content before that text existed: the embeddings step after it makes them
    again in the same tick (``progress`` hears it as job ``search_text``).
    With a size ``budget`` (``PALIMPSEST_MAX_STORE_MB``), the oldest threads are
    archived until the store fits it. ``facts`` off (``PALIMPSEST_FACTS=off``) leaves the
    fact step out, so no thread's facts are extracted. ``progress`` (the CLI's bars)
    also hears the embedding backfill, as job ``embeddings``: nodes embedded of those missing.
    Vector upkeep runs last, so the vectors written and the runs archived this tick are
    laid out and reclaimed in it, under the evolution lease rather than inside a search.
    With a model configured (``llm``), the ``readings`` step has it read the sessions
    that went quiet since they were last read (`read_quiet_sessions`; ``clock`` says
    when now is), for the start-of-session memory; without one, it is left out.
    """
    steps = [EvolutionStep("facts", lambda pause: evolve_facts(store, pause=pause), counts_facts=True)] if facts else []
    derived = None if progress is None else partial(progress, "search_text")
    steps.append(EvolutionStep("search_text", lambda pause: fill_search_texts(store, pause=pause, progress=derived)))
    if llm is not None and llm.configured:
        reader = ModelReader(llm)
        steps.append(
            EvolutionStep("readings", lambda pause: read_quiet_sessions(store, reader, pause=pause, now=clock()))
        )
    if embedder is not None:
        embedded = None if progress is None else partial(progress, "embeddings")
        steps.append(
            EvolutionStep(
                "embeddings", lambda pause: backfill_embeddings(store, embedder, pause=pause, progress=embedded)
            )
        )
    if budget is not None:
        steps.append(EvolutionStep("archived", lambda pause: archive_to_budget(store, budget, pause=pause)))
    steps.append(EvolutionStep("vector_upkeep", lambda pause: store.maintain_vectors()))
    return steps


class Stopping(Exception):
    """Raised at a pause point once shutdown has begun, to end a tick between summaries."""


class LeaseLost(Exception):
    """Raised at a pause point when another process has taken over a lease of this one."""

    def __init__(self, name: str) -> None:
        super().__init__(f"lease {name} was taken over by another process (this one stalled past its expiry)")


def make_holder() -> str:
    """A holder id unique to this process: ``host:pid:random`` (a pid can be reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def compaction_lease(partition: str, thread_id: str) -> str:
    """The lease a thread is compacted under: one thread, one process at a time."""
    return f"compact:{partition}:{thread_id}"


def evolution_lease(step: str) -> str:
    """The lease an evolution step runs under: one step, one process at a time."""
    return f"evolve:{step}"


def backlog_floor(config: CompactionSettings) -> int:
    """The fewest uncovered messages at which a thread qualifies for compaction.

    The planner compacts a thread only when more than ``threshold`` uncovered messages
    lie outside the fresh tail of ``keep_recent``.
    """
    return config.threshold + config.keep_recent + 1


class _NotSkippedFires(logging.Filter):
    """Drops APScheduler's "skipped: maximum number of running instances reached" lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances" not in record.getMessage()


def _quiet_skipped_fires() -> None:
    """Keep a job's fires skipped while it still runs (by design here) out of the log, once per process."""
    scheduler_log = logging.getLogger("apscheduler.scheduler")
    if not any(isinstance(known, _NotSkippedFires) for known in scheduler_log.filters):
        scheduler_log.addFilter(_NotSkippedFires())


def catch_up_share(base: float, uncovered: int, floor: int) -> float | None:
    """The share of a busy process owed to compacting a thread ``uncovered`` messages behind.

    None (the gate's own share) until the thread is `BEHIND_FACTOR` times its floor
    behind; then twice the base share, at most all of it. Why: with the base share alone
    a process under constant calls compacts at a fixed rate, and appends faster than
    that rate grow a thread's backlog without bound; a thread far behind is owed more,
    and each wait still lets the calls in flight go first.
    """
    if uncovered < BEHIND_FACTOR * floor:
        return None
    return min(1.0, 2 * base)


def _describe(exc: BaseException) -> str:
    """An error as one sentence for a cycle record: domain errors say it all already."""
    return str(exc) if isinstance(exc, PalimpsestError | LeaseLost) else f"{type(exc).__name__}: {exc}"


async def _to_the_end(call: asyncio.Future[T]) -> T:
    """Await a store call; cancelled meanwhile, let it finish first, then be cancelled.

    Why: a lease request cut off inside the store's driver may still be applied by
    the server after the caller moved on (a lease taken, or renewed, after its
    release), and leave the lease behind until it expires.
    """
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        await asyncio.wait([call])
        raise


class LeaseKeeper:
    """The leases one tick holds, renewed by a heartbeat while the tick works.

    Why a heartbeat and not only the pause points: a summary drafted by a slow model,
    or a tick waiting behind tool calls, may go longer than a lease lives between two
    pauses. Used as an async context manager: the heartbeat runs inside it, and every
    lease still held is released on the way out (cancelled or not).

    Args:
        store: Where the leases live.
        holder: This process's holder id.
        seconds: A lease's life without renewal.
        heartbeat: Seconds between renewals.
        clock: The current time (tests inject one).
    """

    def __init__(
        self,
        store: MemoryStore,
        holder: str,
        *,
        seconds: float,
        heartbeat: float,
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.holder = holder
        self.seconds = seconds
        self.heartbeat = heartbeat
        self.clock = clock
        self._held: dict[str, datetime] = {}
        self._lost: set[str] = set()
        # Renewals, takes and releases one at a time: a renewal in flight must never
        # take back a lease released meanwhile.
        self._lock = asyncio.Lock()
        self._beat: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LeaseKeeper:
        self._beat = asyncio.create_task(self._beating())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._beat is not None:
            self._beat.cancel()
            await asyncio.gather(self._beat, return_exceptions=True)
        for name in list(self._held):
            await self.give_back(name)

    async def take(self, name: str) -> bool:
        """Take ``name`` if it is free or expired; False when another holder has it.

        Cancelled meanwhile (shutdown), the request still completes, and a lease it
        got is kept track of, so that it is released on the way out, not left behind.
        """
        async with self._lock:
            now = self.clock()
            asking = asyncio.ensure_future(self.store.acquire_lease(name, self.holder, self.seconds, now=now))
            try:
                taken = await _to_the_end(asking)
            finally:
                if asking.done() and not asking.cancelled() and asking.exception() is None and asking.result():
                    self._held[name] = now
                    self._lost.discard(name)
            return taken

    async def give_back(self, name: str) -> None:
        """Release a lease; if the store is down, it expires on its own."""
        async with self._lock:
            if self._held.pop(name, None) is None:
                return
            try:
                await _to_the_end(asyncio.ensure_future(self.store.release_lease(name, self.holder)))
            except PalimpsestError as exc:
                logger.warning("could not release lease %s (it expires on its own): %s", name, exc)

    async def renew(self, *, every: bool = False) -> None:
        """Renew the leases held a heartbeat or longer (``every``: all of them).

        A lease another holder took meanwhile is dropped and marked lost, for `check`.

        Raises:
            PalimpsestError: if the store cannot be asked.
        """
        async with self._lock:
            now = self.clock()
            due = timedelta(seconds=self.heartbeat)
            for name, taken in list(self._held.items()):
                if not every and now - taken < due:
                    continue
                renewing = asyncio.ensure_future(self.store.acquire_lease(name, self.holder, self.seconds, now=now))
                if await _to_the_end(renewing):
                    self._held[name] = now
                else:
                    del self._held[name]
                    self._lost.add(name)
                    logger.warning("lost lease %s to another process", name)

    def check(self, name: str) -> None:
        """Raise `LeaseLost` if ``name`` was taken over by another holder."""
        if name in self._lost:
            raise LeaseLost(name)

    async def _beating(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat)
            try:
                await self.renew(every=True)
            except PalimpsestError as exc:  # the next beat, or a pause point, tries again
                logger.warning("could not renew leases (they expire unless a later renewal works): %s", exc)


class _Tally:
    """What one thread's compaction wrote so far, kept when the compaction is interrupted."""

    def __init__(self) -> None:
        self.summaries = 0

    def add(self, written: Sequence[Summary]) -> None:
        self.summaries += len(written)


class Maintenance:
    """The background jobs of one process, over one store.

    Args:
        store: The initialized store to maintain.
        settings: Compaction knobs, intervals and ``threads_per_cycle``.
        summarizer: Writes summaries' text.
        gate: Tool calls of this process; background work yields to them. None: no
            foreground to yield to (``palimpsest maintain``).
        steps: The evolution steps (`evolution_steps` builds the standard ones).
        clock: The current time, for leases and cycle records (tests inject one).
        holder: This process's lease holder id; default `make_holder`.
        lease_seconds: Lease lifetime without renewal; default the settings'.
        heartbeat_seconds: How often held leases are renewed; default a third of
            ``lease_seconds``.
    """

    def __init__(
        self,
        store: MemoryStore,
        settings: MaintenanceSettings,
        summarizer: Summarizer,
        *,
        gate: ForegroundGate | None = None,
        steps: Sequence[EvolutionStep] = (),
        clock: Callable[[], datetime] = utcnow,
        holder: str | None = None,
        lease_seconds: float | None = None,
        heartbeat_seconds: float | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.summarizer = summarizer
        self.gate = gate
        self.clock = clock
        self.holder = holder or make_holder()
        self.lease_seconds = lease_seconds if lease_seconds is not None else settings.lease_seconds
        self.heartbeat_seconds = heartbeat_seconds if heartbeat_seconds is not None else self.lease_seconds / 3
        self.steps = list(steps)
        self._stopping = False
        self._running: set[asyncio.Task[object]] = set()

    @property
    def stopping(self) -> bool:
        """Whether `shutdown` has begun: no tick starts, running ones end at a pause."""
        return self._stopping

    def _keeper(self) -> LeaseKeeper:
        return LeaseKeeper(
            self.store, self.holder, seconds=self.lease_seconds, heartbeat=self.heartbeat_seconds, clock=self.clock
        )

    async def _checkpoint(self, leases: LeaseKeeper, name: str, share: float | None = None) -> None:
        """A pause point of the work under lease ``name``: stop, yield (within ``share``), renew, check.

        Raises:
            Stopping: once `shutdown` has begun.
            LeaseLost: if another process took over ``name``.
        """
        if self._stopping:
            raise Stopping
        if self.gate is not None:
            await self.gate.wait_idle(share)
            if self._stopping:
                raise Stopping
        await leases.renew()
        leases.check(name)

    def _pause(self, leases: LeaseKeeper, name: str, share: float | None = None) -> Pause:
        async def pause() -> None:
            await self._checkpoint(leases, name, share)

        return pause

    # -- the ticks ----------------------------------------------------------------

    async def compaction_tick(self, progress: Progress | None = None) -> MaintenanceCycle | None:
        """Compact the threads with the largest backlog, at most ``threads_per_cycle``.

        Threads another process is compacting are skipped for the next ones down the
        list, so several processes compact several threads at once.

        Returns:
            The recorded cycle, or None when every thread due was held by other
            processes (nothing for this one to do, nothing recorded).

        Raises:
            PalimpsestError: if the store cannot even list the backlog.
        """
        config = self.settings.compaction
        per_cycle = self.settings.threads_per_cycle
        backlog = await self.store.compaction_candidates(
            None, min_uncovered=backlog_floor(config), limit=per_cycle * CANDIDATES_PER_THREAD
        )
        started = self.clock()
        threads = summaries = claimed = 0
        errors: list[str] = []
        cancelled = False
        total = min(len(backlog), per_cycle)
        if progress is not None:
            progress(COMPACTION, 0, total)
        async with self._keeper() as leases:
            try:
                for candidate in backlog:
                    if claimed == per_cycle:
                        break
                    if self._stopping:
                        raise Stopping
                    name = compaction_lease(candidate.partition, candidate.thread_id)
                    if not await leases.take(name):
                        logger.debug("thread %s skipped: another process holds %s", candidate.thread_id, name)
                        continue
                    claimed += 1
                    tally = _Tally()
                    try:
                        await compact_thread(
                            self.store,
                            candidate.partition,
                            candidate.thread_id,
                            config,
                            self.summarizer,
                            pause=self._pause(leases, name, self._share_for(candidate.uncovered)),
                            written=tally.add,
                        )
                    except (Stopping, asyncio.CancelledError):
                        raise
                    except Exception as exc:  # recorded in the cycle; the next thread still runs
                        if not isinstance(exc, LeaseLost):
                            logger.exception("compaction of thread %s failed", candidate.thread_id)
                        errors.append(f"thread {candidate.thread_id}: {_describe(exc)}")
                    finally:
                        threads += tally.summaries > 0
                        summaries += tally.summaries
                        await leases.give_back(name)
                    if progress is not None:
                        progress(COMPACTION, claimed, total)
            except Stopping:
                errors.append(STOPPED_COMPACTION)
            except asyncio.CancelledError:
                errors.append(STOPPED_COMPACTION)
                cancelled = True
            except Exception as exc:  # a store outage ends the tick, not the loop
                logger.warning("compaction tick ended early: %s", _describe(exc))
                errors.append(_describe(exc))
        if backlog and not claimed and not errors:
            logger.debug("compaction tick skipped: other processes hold every thread due")
            return None
        cycle = await self._record(COMPACTION, started, threads=threads, summaries=summaries, errors=errors)
        if cancelled:
            raise asyncio.CancelledError
        return cycle

    def _share_for(self, uncovered: int) -> float | None:
        """The share owed to compacting a thread this far behind (None: the gate's own)."""
        if self.gate is None:
            return None
        return catch_up_share(self.gate.background_share, uncovered, backlog_floor(self.settings.compaction))

    async def compaction_run(self) -> None:
        """Compaction ticks back to back while each one writes summaries and a thread is still due.

        One tick folds ``threads_per_cycle`` threads. Under sustained appends, or with many
        threads due after a quiet spell, waiting a whole interval between ticks lets a
        backlog grow without bound, so a scheduled run goes on while its last tick wrote
        something and the backlog still holds a thread due. Tool calls keep their
        priority: every tick yields to them at each pause, within background work's share
        (`ForegroundGate`). A run ends when every thread due is held by other processes,
        when a tick writes nothing (a failing thread is not retried at once), on shutdown,
        or after `CATCH_UP_TICKS` ticks.
        """
        floor = backlog_floor(self.settings.compaction)
        for _ in range(CATCH_UP_TICKS):
            cycle = await self.compaction_tick()
            if cycle is None or cycle.summaries == 0 or self._stopping:
                return
            if not await self.store.compaction_candidates(None, min_uncovered=floor, limit=1):
                return

    async def evolution_tick(self, progress: Progress | None = None) -> MaintenanceCycle | None:
        """Run every registered evolution step once, each under its own lease.

        A step another process is running is skipped (so several processes run
        different steps at once); a failing step is recorded and the next one still runs.

        Returns:
            The recorded cycle, or None when every step was held by other processes.
        """
        started = self.clock()
        counts: dict[str, int] = {}
        facts = claimed = 0
        errors: list[str] = []
        cancelled = False
        if progress is not None:
            progress(EVOLUTION, 0, len(self.steps))
        async with self._keeper() as leases:
            try:
                for done, step in enumerate(self.steps, start=1):
                    if self._stopping:
                        raise Stopping
                    name = evolution_lease(step.name)
                    if not await leases.take(name):
                        logger.debug("evolution step %s skipped: another process holds %s", step.name, name)
                        continue
                    claimed += 1
                    pause = self._pause(leases, name)
                    try:
                        await pause()
                        counts[step.name] = count = await step.run(pause)
                        facts += count if step.counts_facts else 0
                    except (Stopping, asyncio.CancelledError):
                        raise
                    except Exception as exc:  # recorded in the cycle; the next step still runs
                        if not isinstance(exc, LeaseLost):
                            logger.exception("evolution step %s failed", step.name)
                        errors.append(f"step {step.name}: {_describe(exc)}")
                    finally:
                        await leases.give_back(name)
                    if progress is not None:
                        progress(EVOLUTION, done, len(self.steps))
            except Stopping:
                errors.append(STOPPED_EVOLUTION)
            except asyncio.CancelledError:
                errors.append(STOPPED_EVOLUTION)
                cancelled = True
            except Exception as exc:  # a store outage ends the tick, not the loop
                logger.warning("evolution tick ended early: %s", _describe(exc))
                errors.append(_describe(exc))
        if self.steps and not claimed and not errors:
            logger.debug("evolution tick skipped: other processes hold every step")
            return None
        cycle = await self._record(EVOLUTION, started, facts=facts, steps=counts, errors=errors)
        if cancelled:
            raise asyncio.CancelledError
        return cycle

    async def _record(
        self,
        job: str,
        started: datetime,
        *,
        threads: int = 0,
        summaries: int = 0,
        facts: int = 0,
        steps: dict[str, int] | None = None,
        errors: list[str],
    ) -> MaintenanceCycle:
        cycle = MaintenanceCycle(
            id=f"cyc_{uuid.uuid4().hex}",
            job=job,
            holder=self.holder,
            started_at=started,
            finished_at=self.clock(),
            threads=threads,
            summaries=summaries,
            facts=facts,
            steps=steps or {},
            errors=errors,
        )
        try:
            await self.store.record_cycle(cycle)
        except PalimpsestError as exc:
            logger.warning("could not record the %s cycle: %s", job, exc)
        logger.info(
            "%s cycle: %d threads, %d summaries, %d facts, %d errors",
            job,
            threads,
            summaries,
            facts,
            len(errors),
        )
        return cycle

    async def run_once(self, progress: Progress | None = None) -> dict[str, MaintenanceCycle | None]:
        """Run every tick now, one after the other (``palimpsest maintain --once``).

        Returns:
            Each job's recorded cycle, None for a job another process was running.
        """
        return {
            COMPACTION: await self.compaction_tick(progress),
            EVOLUTION: await self.evolution_tick(progress),
        }

    # -- the scheduler ------------------------------------------------------------

    def start(self, scheduler: AsyncIOScheduler, *, immediately: bool = False) -> None:
        """Add both jobs to a scheduler (the caller starts it).

        Interval triggers from settings; ``coalesce`` folds runs missed while the loop
        was busy into one, ``max_instances=1`` never overlaps a job with itself, and no
        misfire grace limit means a late run still happens. A fire that finds the job
        still running (a compaction run catching up) is skipped by design, so
        APScheduler's warning about it is not logged: on stdio every stderr line shows
        as an error of the server.

        Args:
            scheduler: The scheduler to add the jobs to.
            immediately: Run both jobs once as soon as the scheduler starts (the
                foreground ``palimpsest maintain``); a server waits one interval, so an
                IDE starting several servers does not pay for maintenance at startup.
        """
        _quiet_skipped_fires()
        first_run = {"next_run_time": datetime.now(UTC)} if immediately else {}
        for job, seconds in (
            (COMPACTION, self.settings.compaction_interval),
            (EVOLUTION, self.settings.evolution_interval),
        ):
            scheduler.add_job(
                self._scheduled,
                "interval",
                seconds=seconds,
                args=[job],
                id=f"palimpsest-{job}",
                name=f"palimpsest {job}",
                coalesce=True,
                max_instances=1,
                misfire_grace_time=None,
                replace_existing=True,
                **first_run,
            )

    async def _scheduled(self, job: str) -> None:
        """One scheduled tick, tracked so shutdown can wait for it."""
        if self._stopping:
            return
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        try:
            await (self.compaction_run() if job == COMPACTION else self.evolution_tick())
        except PalimpsestError as exc:  # the backlog could not even be read: store down
            logger.warning("%s tick skipped: %s", job, exc)
        except asyncio.CancelledError:
            if not self.stopping:
                raise
            # Cancelled by `shutdown`, the tick recorded its cycle and released its
            # leases: the job ends quietly rather than as an error of the scheduler.
            logger.info("%s tick abandoned its unfinished batch at shutdown", job)
        finally:
            if task is not None:
                self._running.discard(task)

    async def run_until(self, stop: asyncio.Event) -> None:
        """Run both jobs now, then on their intervals, until ``stop`` is set; then shut down.

        The foreground loop of ``palimpsest maintain``; a server uses `start` and
        `shutdown` from its lifespan instead.
        """
        scheduler = AsyncIOScheduler()
        self.start(scheduler, immediately=True)
        scheduler.start()
        logger.info(
            "maintaining the %s store as %s: compaction every %ds, evolution every %ds",
            self.store.kind,
            self.holder,
            self.settings.compaction_interval,
            self.settings.evolution_interval,
        )
        try:
            await stop.wait()
        finally:
            await self.shutdown(scheduler)

    async def shutdown(self, scheduler: AsyncIOScheduler | None = None, *, timeout: float = STOP_SECONDS) -> None:
        """Stop: no new tick starts, running ones end at their next pause point.

        A tick still running after ``timeout`` (a summary still being drafted) is
        cancelled, abandoning its unwritten batch; either way it records its cycle as
        stopped, with what it wrote, and releases its leases (they expire on their own
        if the store is gone). Call it before the store closes.
        """
        self._stopping = True
        if self.gate is not None:
            self.gate.stop_waiting()
        if scheduler is not None and scheduler.running:
            scheduler.pause()  # not shut down yet: that would cancel the running ticks at once
        running = set(self._running)
        if running:
            _, late = await asyncio.wait(running, timeout=timeout)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        if scheduler is not None and scheduler.running:
            scheduler.shutdown(wait=False)
            await asyncio.sleep(0)  # the scheduler stops on the loop's next turn
