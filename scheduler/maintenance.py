"""The maintenance loop: memory kept digested in the background, safely across processes.

Users never call ``compact_thread`` by hand: every server process runs two jobs on an
APScheduler ``AsyncIOScheduler``. The compaction tick folds the threads with the
largest backlog (a few a tick, escalating each after its pass); the evolution tick
runs the fact-layer and embedding upkeep steps registered in `evolution_steps`.

Every IDE starts its own stdio server, so several processes share one store. Each job
first takes a lease in the store (``job:compaction``, ``job:evolution``) and each
thread is claimed with its own lease (``compact:{partition}:{thread_id}``); a process
that loses skips. Leases are renewed at every pause point and released in ``finally``,
and a lease whose holder died simply expires. Underneath, the store refuses a second
summary over the same children, so even a lease lost to a long stall cannot fold a
message twice.

Between summaries the work pauses: it yields to tool calls in flight (the in-process
`ForegroundGate`), renews its leases, and stops there on shutdown, so a stopped server
leaves whole summaries only. Every cycle that ran is recorded as a `MaintenanceCycle`,
errors as sentences; nothing a job raises stops the loop.
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

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.graph_schema.models import MaintenanceCycle, utcnow
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.compaction import Pause, compact_thread
from palimpsest.scheduler.config import CompactionSettings, MaintenanceSettings, StoreBudget
from palimpsest.scheduler.embedders import Embedder
from palimpsest.scheduler.embedding import backfill_embeddings
from palimpsest.scheduler.facts import evolve_facts
from palimpsest.scheduler.foreground import ForegroundGate
from palimpsest.scheduler.portability.archive import archive_to_budget
from palimpsest.scheduler.summarizer import Summarizer

logger = logging.getLogger(__name__)

COMPACTION = "compaction"
EVOLUTION = "evolution"
#: How long a job's or a thread's lease lives without renewal. Renewed at every pause
#: (between summaries), so only a process stalled or dead this long loses it.
LEASE_SECONDS = 300.0
#: How long shutdown waits for a running tick to reach its next pause point before
#: cancelling it (each summary is one transaction, so cancelling is safe too).
STOP_SECONDS = 10.0

#: Reports progress to a caller (the CLI's bar): job name, items done, items in all.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class EvolutionStep:
    """One upkeep step of the evolution tick.

    Attributes:
        name: Shown in the cycle's ``steps`` counts (``facts``, ``embeddings``).
        run: Does the step's work and says how many items it handled. It is given the
            tick's pause point: a step working in batches awaits it between them, to
            yield to tool calls, keep the job's lease and stop cleanly on shutdown.
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
) -> list[EvolutionStep]:
    """The evolution tick's steps, in the order they run: facts first, then embeddings, then archiving.

    Why a factory: a step needs the store and embedder of the process that runs it (the
    server's lifespan or ``palimpsest maintain``), and both build their steps here.
    Embedding last means the facts extracted this tick are embedded in the same tick.
    With a size ``budget`` (``PALIMPSEST_MAX_STORE_MB``), the oldest threads are
    archived until the store fits it. ``facts`` off (``PALIMPSEST_FACTS=off``) leaves the
    fact step out, so no thread's facts are extracted. ``progress`` (the CLI's bars)
    also hears the embedding backfill, as job ``embeddings``: nodes embedded of those missing.
    """
    steps = [EvolutionStep("facts", lambda pause: evolve_facts(store, pause=pause), counts_facts=True)] if facts else []
    if embedder is not None:
        embedded = None if progress is None else partial(progress, "embeddings")
        steps.append(
            EvolutionStep(
                "embeddings", lambda pause: backfill_embeddings(store, embedder, pause=pause, progress=embedded)
            )
        )
    if budget is not None:
        steps.append(EvolutionStep("archived", lambda pause: archive_to_budget(store, budget, pause=pause)))
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


def backlog_floor(config: CompactionSettings) -> int:
    """The fewest uncovered messages at which a thread qualifies for compaction.

    The planner compacts a thread only when more than ``threshold`` uncovered messages
    lie outside the fresh tail of ``keep_recent``.
    """
    return config.threshold + config.keep_recent + 1


def _describe(exc: BaseException) -> str:
    """An error as one sentence for a cycle record: domain errors say it all already."""
    return str(exc) if isinstance(exc, PalimpsestError | LeaseLost) else f"{type(exc).__name__}: {exc}"


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
        lease_seconds: Lease lifetime without renewal.
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
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.store = store
        self.settings = settings
        self.summarizer = summarizer
        self.gate = gate
        self.clock = clock
        self.holder = holder or make_holder()
        self.lease_seconds = lease_seconds
        self.steps = list(steps)
        self._stopping = False
        self._running: set[asyncio.Task[object]] = set()

    # -- leases and pause points ------------------------------------------------
    #
    # Each tick keeps its own leases (name -> when last taken), so the two jobs, which
    # may run at once in one process, never renew or lose each other's.

    async def _take(self, held: dict[str, datetime], name: str) -> bool:
        now = self.clock()
        if not await self.store.acquire_lease(name, self.holder, self.lease_seconds, now=now):
            return False
        held[name] = now
        return True

    async def _give_back(self, held: dict[str, datetime], name: str) -> None:
        """Release a lease; if the store is down, it expires on its own."""
        if held.pop(name, None) is None:
            return
        try:
            await self.store.release_lease(name, self.holder)
        except PalimpsestError as exc:
            logger.warning("could not release lease %s (it expires on its own): %s", name, exc)

    async def _checkpoint(self, held: dict[str, datetime]) -> None:
        """A tick's pause point: stop if shutting down, yield to tool calls, renew leases.

        Leases held for a third of their lifetime or more are renewed.

        Raises:
            Stopping: once `shutdown` has begun.
            LeaseLost: if another process took over a lease of this tick.
        """
        if self._stopping:
            raise Stopping
        if self.gate is not None:
            await self.gate.wait_idle()
            if self._stopping:
                raise Stopping
        now = self.clock()
        due = timedelta(seconds=self.lease_seconds / 3)
        for name, taken in list(held.items()):
            if now - taken < due:
                continue
            if not await self.store.acquire_lease(name, self.holder, self.lease_seconds, now=now):
                held.pop(name, None)
                raise LeaseLost(name)
            held[name] = now

    # -- the ticks ----------------------------------------------------------------

    async def compaction_tick(self, progress: Progress | None = None) -> MaintenanceCycle | None:
        """Compact the threads with the largest backlog, at most ``threads_per_cycle``.

        Returns:
            The recorded cycle, or None when another process holds the job's lease.
        """
        job_lease = f"job:{COMPACTION}"
        held: dict[str, datetime] = {}
        if not await self._take(held, job_lease):
            logger.debug("compaction tick skipped: another process holds %s", job_lease)
            return None
        pause = partial(self._checkpoint, held)
        started = self.clock()
        threads = summaries = 0
        errors: list[str] = []
        config = self.settings.compaction
        try:
            backlog = await self.store.compaction_candidates(
                None, min_uncovered=backlog_floor(config), limit=self.settings.threads_per_cycle
            )
            if progress is not None:
                progress(COMPACTION, 0, len(backlog))
            for done, candidate in enumerate(backlog, start=1):
                await pause()
                thread_lease = f"compact:{candidate.partition}:{candidate.thread_id}"
                if await self._take(held, thread_lease):
                    try:
                        result = await compact_thread(
                            self.store,
                            candidate.partition,
                            candidate.thread_id,
                            config,
                            self.summarizer,
                            pause=pause,
                        )
                        if result.summaries_created:
                            threads += 1
                            summaries += result.summaries_created
                    except (Stopping, LeaseLost):
                        raise
                    except Exception as exc:  # recorded in the cycle; the next thread still runs
                        logger.exception("compaction of thread %s failed", candidate.thread_id)
                        errors.append(f"thread {candidate.thread_id}: {_describe(exc)}")
                    finally:
                        await self._give_back(held, thread_lease)
                if progress is not None:
                    progress(COMPACTION, done, len(backlog))
        except Stopping:
            errors.append("stopped between summaries by shutdown; the thread in progress is finished next tick")
        except Exception as exc:  # a store outage or a lost lease ends the tick, not the loop
            logger.warning("compaction tick ended early: %s", _describe(exc))
            errors.append(_describe(exc))
        finally:
            await self._give_back(held, job_lease)
        return await self._record(COMPACTION, started, threads=threads, summaries=summaries, errors=errors)

    async def evolution_tick(self, progress: Progress | None = None) -> MaintenanceCycle | None:
        """Run every registered evolution step once, each after a pause point.

        A failing step is recorded and the next one still runs.

        Returns:
            The recorded cycle, or None when another process holds the job's lease.
        """
        job_lease = f"job:{EVOLUTION}"
        held: dict[str, datetime] = {}
        if not await self._take(held, job_lease):
            logger.debug("evolution tick skipped: another process holds %s", job_lease)
            return None
        pause = partial(self._checkpoint, held)
        started = self.clock()
        counts: dict[str, int] = {}
        facts = 0
        errors: list[str] = []
        try:
            if progress is not None:
                progress(EVOLUTION, 0, len(self.steps))
            for done, step in enumerate(self.steps, start=1):
                await pause()
                try:
                    counts[step.name] = count = await step.run(pause)
                    facts += count if step.counts_facts else 0
                except (Stopping, LeaseLost):
                    raise
                except Exception as exc:  # recorded in the cycle; the next step still runs
                    logger.exception("evolution step %s failed", step.name)
                    errors.append(f"step {step.name}: {_describe(exc)}")
                if progress is not None:
                    progress(EVOLUTION, done, len(self.steps))
        except Stopping:
            errors.append("stopped between steps by shutdown")
        except Exception as exc:  # a store outage or a lost lease ends the tick, not the loop
            logger.warning("evolution tick ended early: %s", _describe(exc))
            errors.append(_describe(exc))
        finally:
            await self._give_back(held, job_lease)
        return await self._record(EVOLUTION, started, facts=facts, steps=counts, errors=errors)

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
        misfire grace limit means a late run still happens.

        Args:
            scheduler: The scheduler to add the jobs to.
            immediately: Run both jobs once as soon as the scheduler starts (the
                foreground ``palimpsest maintain``); a server waits one interval, so an
                IDE starting several servers does not pay for maintenance at startup.
        """
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
            await (self.compaction_tick() if job == COMPACTION else self.evolution_tick())
        except PalimpsestError as exc:  # the lease could not even be asked for: store down
            logger.warning("%s tick skipped: %s", job, exc)
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
        """Stop: running ticks end at their next pause point, then the scheduler stops.

        A tick still running after ``timeout`` is cancelled; either way its leases are
        released in its ``finally`` (or expire, if the store is gone).
        """
        self._stopping = True
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
