"""The compaction engine: folds a thread's old messages into the summary DAG.

It exists so that an agent's context stays small while nothing is lost: old messages
become level-1 summaries, and runs of ``escalation_fanin`` summaries of one level become
one summary a level up, until no level has a full run left. The engine only decides
*what* to summarize (with the planner) and *who* writes the text (a `Summarizer`, given
the thread's word `Background`, counted from the messages the engine has read anyway);
the store derives everything else and writes the summaries in batches of at most
`PERSIST_BATCH`, each batch one transaction, so a crash leaves whole summaries or none,
and a server store pays one commit per batch rather than per summary.

Several processes may compact the same thread at once (every IDE runs its own server).
Summary ids are derived from their children, so two processes plan the same summary;
the store refuses the second with `Conflict` and this engine then reports ``"busy"``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from palimpsest.graph_schema.errors import Conflict
from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import Message, NewSummary, Summary
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.scheduler.planner import plan_escalation, plan_leaf_chunks
from palimpsest.scheduler.summarizer import Background, Summarizer

logger = logging.getLogger(__name__)

#: Awaited between summaries so background compaction can yield to foreground work
#: (or stop at a clean point on shutdown, by raising).
Pause = Callable[[], Awaitable[None]]

#: Told of each batch of summaries as soon as it is written, so a caller interrupted
#: mid-thread (the maintenance loop on shutdown) still knows what the call wrote.
Written = Callable[[Sequence[Summary]], None]

#: Summaries written per transaction. Why a bound: a batch is lost whole if the process
#: dies before it commits, and a tool call waiting for the store waits behind one batch.
PERSIST_BATCH = 64


class CompactionResult(BaseModel):
    """What one compaction call did, as the ``compact_thread`` tool returns it."""

    status: Literal["compacted", "nothing_to_do", "busy"] = Field(
        description="`busy` when another process covered the same messages first."
    )
    summaries_created: int = Field(description="Summaries written by this call, every level.")
    escalations: int = Field(description="How many of them are level 2 or higher.")
    summary_ids: list[str] = Field(description="Ids of the summaries written, in creation order.")


class _Progress:
    """The summaries one call has written so far, kept even when the call ends busy."""

    def __init__(self, written: Written | None = None) -> None:
        self.summary_ids: list[str] = []
        self.escalations = 0
        self.written = written

    def result(self, status: Literal["compacted", "nothing_to_do", "busy"]) -> CompactionResult:
        return CompactionResult(
            status=status,
            summaries_created=len(self.summary_ids),
            escalations=self.escalations,
            summary_ids=list(self.summary_ids),
        )


async def compact_thread(
    store: MemoryStore,
    partition: str,
    thread_id: str,
    config: CompactionSettings,
    summarizer: Summarizer,
    *,
    force: bool = False,
    pause: Pause | None = None,
    written: Written | None = None,
) -> CompactionResult:
    """Compact one thread now: leaf summaries first, then escalation level by level.

    Why both phases run every time: a call that ended ``busy`` (or a crash) may have
    left full runs of summaries behind, and the next call must finish them even when
    no new leaf chunk qualifies.

    Args:
        store: The store holding the thread.
        partition: The partition the thread belongs to.
        thread_id: The thread to compact.
        config: Threshold, fresh tail, fan-in and chunk token cap.
        summarizer: Writes each summary's text.
        force: Summarize every uncovered message outside the fresh tail, even below
            the threshold.
        pause: Awaited before each summary is drafted; the maintenance loop uses it to
            yield to tool calls, and to stop between summaries (by raising) on shutdown;
            drafts not yet written when it raises are dropped, their sources stay
            uncovered for the next call.
        written: Told of each batch as soon as it is written (see `Written`).

    Returns:
        ``compacted`` with the summaries written, ``nothing_to_do`` when nothing
        qualified, or ``busy`` (with what this call wrote before) when another process
        covered the same children first.

    Raises:
        NotFound: If the thread does not exist in the partition.
    """
    await store.get_thread(partition, thread_id)
    progress = _Progress(written)
    try:
        background = await _summarize_leaves(store, partition, thread_id, config, summarizer, force, progress, pause)
        await _escalate(store, partition, thread_id, config, summarizer, background, progress, pause)
    except Conflict as exc:
        logger.info(
            "compaction of thread %s is busy (another process got there first): %s; %d summaries written",
            thread_id,
            exc,
            len(progress.summary_ids),
        )
        return progress.result("busy")
    if not progress.summary_ids:
        logger.debug("thread %s: nothing to compact", thread_id)
        return progress.result("nothing_to_do")
    logger.info(
        "thread %s compacted: %d summaries (%d escalations)",
        thread_id,
        len(progress.summary_ids),
        progress.escalations,
    )
    return progress.result("compacted")


async def _summarize_leaves(
    store: MemoryStore,
    partition: str,
    thread_id: str,
    config: CompactionSettings,
    summarizer: Summarizer,
    force: bool,
    progress: _Progress,
    pause: Pause | None,
) -> Background:
    """Write one level-1 summary per planned chunk, oldest first, in batches.

    Returns the thread's background, counted over the uncovered messages just read
    (fresh tail included), for escalation to use too.
    """
    uncovered = await store.uncovered_messages(partition, thread_id)
    chunks = [run for chunk in plan_leaf_chunks(uncovered, config, force=force) for run in _contiguous_runs(chunk)]
    background = Background.of_messages(uncovered)  # counted once, after planning, from what was read
    if chunks:
        logger.info("thread %s: %d uncovered messages, %d leaf chunks", thread_id, len(uncovered), len(chunks))
    batch: list[NewSummary] = []
    for chunk in chunks:
        if pause is not None:
            await pause()
        source_tokens = sum(message.tokens for message in chunk)
        draft = await summarizer.summarize_messages(chunk, background=background)
        tokens = estimate_tokens(draft.text)
        if tokens >= source_tokens or not draft.text.strip():
            # A chunk too small to shrink is better left verbatim than summarized by nothing.
            logger.debug(
                "thread %s: chunk seq %d-%d left uncovered, its draft (%d tokens) is empty or not shorter than it (%d)",
                thread_id,
                chunk[0].seq,
                chunk[-1].seq,
                tokens,
                source_tokens,
            )
            continue
        batch.append(
            NewSummary(
                thread_id=thread_id,
                partition=partition,
                level=1,
                text=draft.text,
                tokens=tokens,
                summarizer=draft.summarizer,
                child_ids=[message.id for message in chunk],
            )
        )
        if len(batch) == PERSIST_BATCH:
            await _persist(store, batch, progress)
            batch = []
    if batch:
        await _persist(store, batch, progress)
    return background


async def _persist(store: MemoryStore, batch: Sequence[NewSummary], progress: _Progress) -> None:
    """Write one batch of summaries of one level in one transaction and record them.

    A caller cancelled meanwhile (shutdown abandoning a pass) still waits for the write
    in flight, which is short, so it is never cut off inside the store's driver and is
    told of it: the drafts not yet written are what a cancel abandons.
    """
    writing = asyncio.ensure_future(store.persist_summaries(batch))
    try:
        persisted = await asyncio.shield(writing)
    except asyncio.CancelledError:
        await asyncio.wait([writing])
        if not writing.cancelled() and writing.exception() is None:
            _count(progress, writing.result())
        raise
    _count(progress, persisted)


def _count(progress: _Progress, persisted: Sequence[Summary]) -> None:
    if progress.written is not None:
        progress.written(persisted)
    for summary in persisted:
        progress.summary_ids.append(summary.id)
        progress.escalations += summary.level > 1
        logger.debug(
            "thread %s: L%d %s over seq %d-%d",
            summary.thread_id,
            summary.level,
            summary.id,
            summary.first_seq,
            summary.last_seq,
        )


def _contiguous_runs(chunk: Sequence[Message]) -> list[list[Message]]:
    """Split a chunk wherever its seqs jump.

    Uncovered messages are not always contiguous: a tiny chunk whose draft was not
    shorter than itself stays uncovered between summaries, and a summary must cover a
    contiguous run.
    """
    runs: list[list[Message]] = []
    for message in chunk:
        if runs and message.seq == runs[-1][-1].seq + 1:
            runs[-1].append(message)
        else:
            runs.append([message])
    return runs


async def _escalate(
    store: MemoryStore,
    partition: str,
    thread_id: str,
    config: CompactionSettings,
    summarizer: Summarizer,
    background: Background,
    progress: _Progress,
    pause: Pause | None,
) -> None:
    """Merge full runs of uncovered summaries, level by level, until none is left.

    The highest level is read from the frontier (the top of every chain is in it), so
    runs left behind at any level by an earlier interrupted call are found too. The
    runs of one level are disjoint, so they are drafted first and written in batches.
    """
    top_level = max((item.level for item in await store.frontier(partition, thread_id)), default=0)
    level = 1
    while level <= top_level:
        pending = await store.uncovered_summaries(partition, thread_id, level)
        batch: list[NewSummary] = []
        while (run := plan_escalation(pending, config)) is not None:
            if pause is not None:
                await pause()
            merged = {child.id for child in run}
            pending = [candidate for candidate in pending if candidate.id not in merged]
            draft = await _escalation_draft(thread_id, run, level + 1, summarizer, background)
            if draft is None:
                break
            batch.append(draft)
            if len(batch) == PERSIST_BATCH:
                await _persist(store, batch, progress)
                batch = []
        if batch:
            await _persist(store, batch, progress)
            top_level = max(top_level, level + 1)
        level += 1


async def _escalation_draft(
    thread_id: str, run: Sequence[Summary], level: int, summarizer: Summarizer, background: Background
) -> NewSummary | None:
    """One summary over a run of summaries, or None when the draft is empty or not shorter."""
    source_tokens = sum(summary.tokens for summary in run)
    draft = await summarizer.summarize_summaries(run, level, background=background)
    tokens = estimate_tokens(draft.text)
    if tokens >= source_tokens or not draft.text.strip():
        logger.warning(
            "thread %s: level-%d draft over seq %d-%d is empty or not shorter than its sources (%d >= %d); "
            "escalation stops at this level",
            thread_id,
            level,
            run[0].first_seq,
            run[-1].last_seq,
            tokens,
            source_tokens,
        )
        return None
    first = run[0]
    return NewSummary(
        thread_id=first.thread_id,
        partition=first.partition,
        level=level,
        text=draft.text,
        tokens=tokens,
        summarizer=draft.summarizer,
        child_ids=[child.id for child in run],
    )
