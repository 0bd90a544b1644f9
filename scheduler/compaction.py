"""The compaction engine: folds a thread's old messages into the summary DAG.

It exists so that an agent's context stays small while nothing is lost: old messages
become level-1 summaries, and runs of ``escalation_fanin`` summaries of one level become
one summary a level up, until no level has a full run left. The engine only decides
*what* to summarize (with the planner) and *who* writes the text (a `Summarizer`); the
store derives everything else and writes each summary in its own transaction, so a
crash leaves whole summaries or none.

Several processes may compact the same thread at once (every IDE runs its own server).
Summary ids are derived from their children, so two processes plan the same summary;
the store refuses the second with `Conflict` and this engine then reports ``"busy"``.
"""

from __future__ import annotations

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
from palimpsest.scheduler.summarizer import Summarizer

logger = logging.getLogger(__name__)

#: Awaited between summaries so background compaction can yield to foreground work
#: (or stop at a clean point on shutdown, by raising).
Pause = Callable[[], Awaitable[None]]


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

    def __init__(self) -> None:
        self.summary_ids: list[str] = []
        self.escalations = 0

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
            yield to tool calls, and to stop between summaries (by raising) on shutdown.

    Returns:
        ``compacted`` with the summaries written, ``nothing_to_do`` when nothing
        qualified, or ``busy`` (with what this call wrote before) when another process
        covered the same children first.

    Raises:
        NotFound: If the thread does not exist in the partition.
    """
    await store.get_thread(partition, thread_id)
    progress = _Progress()
    try:
        await _summarize_leaves(store, partition, thread_id, config, summarizer, force, progress, pause)
        await _escalate(store, partition, thread_id, config, summarizer, progress, pause)
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
) -> None:
    """Write one level-1 summary per planned chunk, oldest first."""
    uncovered = await store.uncovered_messages(partition, thread_id)
    chunks = [run for chunk in plan_leaf_chunks(uncovered, config, force=force) for run in _contiguous_runs(chunk)]
    if chunks:
        logger.info("thread %s: %d uncovered messages, %d leaf chunks", thread_id, len(uncovered), len(chunks))
    for index, chunk in enumerate(chunks, start=1):
        if pause is not None:
            await pause()
        source_tokens = sum(message.tokens for message in chunk)
        draft = await summarizer.summarize_messages(chunk)
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
        summary = await store.persist_summary(
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
        progress.summary_ids.append(summary.id)
        logger.debug(
            "thread %s: L1 %s over seq %d-%d (%d/%d)",
            thread_id,
            summary.id,
            summary.first_seq,
            summary.last_seq,
            index,
            len(chunks),
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
    progress: _Progress,
    pause: Pause | None,
) -> None:
    """Merge full runs of uncovered summaries, level by level, until none is left.

    The highest level is read from the frontier (the top of every chain is in it), so
    runs left behind at any level by an earlier interrupted call are found too.
    """
    top_level = max((item.level for item in await store.frontier(partition, thread_id)), default=0)
    level = 1
    while level <= top_level:
        pending = await store.uncovered_summaries(partition, thread_id, level)
        while (run := plan_escalation(pending, config)) is not None:
            if pause is not None:
                await pause()
            summary = await _persist_escalation(store, partition, thread_id, run, level + 1, summarizer)
            if summary is None:
                break
            progress.summary_ids.append(summary.id)
            progress.escalations += 1
            top_level = max(top_level, summary.level)
            merged = {child.id for child in run}
            pending = [candidate for candidate in pending if candidate.id not in merged]
        level += 1


async def _persist_escalation(
    store: MemoryStore,
    partition: str,
    thread_id: str,
    run: Sequence[Summary],
    level: int,
    summarizer: Summarizer,
) -> Summary | None:
    """Write one summary over a run of summaries, or None when the draft is empty or not shorter."""
    source_tokens = sum(summary.tokens for summary in run)
    draft = await summarizer.summarize_summaries(run, level)
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
    summary = await store.persist_summary(
        NewSummary(
            thread_id=thread_id,
            partition=partition,
            level=level,
            text=draft.text,
            tokens=tokens,
            summarizer=draft.summarizer,
            child_ids=[child.id for child in run],
        )
    )
    logger.debug("thread %s: L%d %s over seq %d-%d", thread_id, level, summary.id, summary.first_seq, summary.last_seq)
    return summary
