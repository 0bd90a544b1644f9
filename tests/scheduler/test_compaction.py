"""The compaction engine end to end on both stores: plan, summarize, persist, escalate.

What matters is the lossless contract: whatever the engine folds, expanding the top
summaries gives back every compacted message byte for byte, the fresh tail is left
alone, and `doctor` finds nothing wrong afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.errors import NotFound
from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import Message, NewMessage, NewSummary, Role, Summary
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.compaction import CompactionResult, compact_thread
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.scheduler.extractive import ExtractiveSummarizer
from palimpsest.scheduler.summarizer import Background, SummaryDraft
from tests.support.transcripts import transcript

PARTITION = "claude-code"
DEFAULTS = CompactionSettings()


async def expand_all(store: MemoryStore, summary_id: str) -> list[Message]:
    """Every message under a summary, following cursors page by page."""
    messages: list[Message] = []
    cursor: str | None = None
    while True:
        page = await store.expand(PARTITION, summary_id, depth=None, limit=97, cursor=cursor)
        for item in page.items:
            assert isinstance(item, Message), f"depth=None gave a {type(item).__name__}"
            messages.append(item)
        cursor = page.next_cursor
        if cursor is None:
            assert len(messages) == page.total
            return messages


async def test_a_long_thread_becomes_a_lossless_dag(store: MemoryStore) -> None:
    originals = transcript(1000)
    await store.append_messages(PARTITION, "t-long", originals, project="auth-service")

    result = await compact_thread(store, PARTITION, "t-long", DEFAULTS, ExtractiveSummarizer())

    assert result.status == "compacted"
    assert result.summaries_created == len(result.summary_ids) == len(set(result.summary_ids))
    snapshot = await store.snapshot(PARTITION, "t-long")
    assert sorted(summary.id for summary in snapshot.summaries) == sorted(result.summary_ids)
    levels = {summary.level for summary in snapshot.summaries}
    assert max(levels) >= 3, f"levels {sorted(levels)}"
    assert result.escalations == sum(1 for summary in snapshot.summaries if summary.level >= 2)
    for summary in snapshot.summaries:
        assert summary.text.strip()
        assert summary.summarizer == "extractive"
        assert summary.tokens < summary.source_tokens, summary.id
    assert await check_store(store) == []

    frontier = await store.frontier(PARTITION, "t-long")
    roots = [item for item in frontier if item.kind == "summary"]
    uncovered = [item for item in frontier if item.kind == "message"]
    # The fresh tail stays verbatim, and no more than `threshold` others wait beside it.
    tail = await store.get_messages(PARTITION, "t-long", first_seq=1000 - DEFAULTS.keep_recent)
    assert {message.id for message in tail} <= {item.id for item in uncovered}
    assert len(uncovered) <= DEFAULTS.keep_recent + DEFAULTS.threshold

    expanded: list[Message] = []
    for root in roots:
        expanded.extend(await expand_all(store, root.id))
    compacted_count = len(expanded)
    assert compacted_count >= 1000 - DEFAULTS.keep_recent - DEFAULTS.threshold
    assert [message.seq for message in expanded] == list(range(compacted_count))
    for message, original in zip(expanded, originals, strict=False):
        assert message.content.encode() == original.content.encode()
        assert (message.role, message.source_id, message.tool_call_id) == (
            original.role,
            original.message_id,
            original.tool_call_id,
        )
    assert uncovered[0].first_seq == compacted_count


async def test_running_again_has_nothing_to_do(store: MemoryStore) -> None:
    await store.append_messages(PARTITION, "t-again", transcript(200))
    first = await compact_thread(store, PARTITION, "t-again", DEFAULTS, ExtractiveSummarizer())
    assert first.status == "compacted"

    again = await compact_thread(store, PARTITION, "t-again", DEFAULTS, ExtractiveSummarizer())

    assert again == CompactionResult(status="nothing_to_do", summaries_created=0, escalations=0, summary_ids=[])
    assert len((await store.snapshot(PARTITION, "t-again")).summaries) == first.summaries_created


async def test_new_messages_are_compacted_on_top_of_the_old_dag(store: MemoryStore) -> None:
    await store.append_messages(PARTITION, "t-grow", transcript(300, prefix="a"))
    first = await compact_thread(store, PARTITION, "t-grow", DEFAULTS, ExtractiveSummarizer())
    await store.append_messages(PARTITION, "t-grow", transcript(300, seed=11, prefix="b"))

    second = await compact_thread(store, PARTITION, "t-grow", DEFAULTS, ExtractiveSummarizer())

    assert second.status == "compacted"
    assert not set(first.summary_ids) & set(second.summary_ids)
    assert await check_store(store) == []
    assert await store.count_uncovered(PARTITION, "t-grow") <= DEFAULTS.keep_recent + DEFAULTS.threshold


async def test_a_thread_below_the_threshold_is_left_alone(store: MemoryStore) -> None:
    await store.append_messages(PARTITION, "t-short", transcript(DEFAULTS.threshold + DEFAULTS.keep_recent))

    result = await compact_thread(store, PARTITION, "t-short", DEFAULTS, ExtractiveSummarizer())

    assert result.status == "nothing_to_do"
    assert result.summary_ids == []
    assert await store.count_uncovered(PARTITION, "t-short") == DEFAULTS.threshold + DEFAULTS.keep_recent


async def test_force_compacts_everything_outside_the_tail(store: MemoryStore) -> None:
    count = 25
    await store.append_messages(PARTITION, "t-force", transcript(count))

    result = await compact_thread(store, PARTITION, "t-force", DEFAULTS, ExtractiveSummarizer(), force=True)

    assert result.status == "compacted"
    uncovered = await store.uncovered_messages(PARTITION, "t-force")
    first = count - DEFAULTS.keep_recent
    if uncovered[0].seq == first - 1:  # a tool call waits with its result in the tail
        assert uncovered[0].tool_call_id == uncovered[1].tool_call_id is not None
        first -= 1
    assert [message.seq for message in uncovered] == list(range(first, count))
    assert await check_store(store) == []


async def test_escalation_finishes_runs_left_by_an_earlier_call(store: MemoryStore) -> None:
    """Leaf summaries alone (as an interrupted call leaves them) are escalated by the next call."""
    config = CompactionSettings(threshold=5, keep_recent=2, escalation_fanin=3)
    await store.append_messages(PARTITION, "t-left", transcript(60))
    summarizer = ExtractiveSummarizer()
    messages = await store.uncovered_messages(PARTITION, "t-left")
    for start in range(0, 30, 5):
        chunk = messages[start : start + 5]
        draft = await summarizer.summarize_messages(chunk)
        await store.persist_summary(
            NewSummary(
                thread_id="t-left",
                partition=PARTITION,
                level=1,
                text=draft.text,
                tokens=estimate_tokens(draft.text),
                summarizer=draft.summarizer,
                child_ids=[message.id for message in chunk],
            )
        )

    result = await compact_thread(store, PARTITION, "t-left", config, summarizer)

    assert result.status == "compacted"
    assert result.escalations >= 2
    assert await store.uncovered_summaries(PARTITION, "t-left", 1) == []
    assert await check_store(store) == []


class VerbatimWhenSmall(ExtractiveSummarizer):
    """A summarizer that cannot shrink small chunks: it echoes them (as a weak model would)."""

    async def summarize_messages(
        self, messages: Sequence[Message], *, background: Background | None = None
    ) -> SummaryDraft:
        if len(messages) < 3:
            return SummaryDraft(text="\n".join(m.content for m in messages), summarizer="verbatim")
        return await super().summarize_messages(messages, background=background)


async def test_chunks_whose_draft_is_not_shorter_stay_uncovered(store: MemoryStore) -> None:
    """A draft as long as its chunk is skipped, the other chunks are still compacted."""
    messages = [
        NewMessage(role=Role.user, content=f"question {index}: " + "why does the build fail? " * 8)
        for index in range(9)
    ]
    await store.append_messages(PARTITION, "t-verbatim", messages)
    config = CompactionSettings(threshold=4, keep_recent=0)

    result = await compact_thread(store, PARTITION, "t-verbatim", config, VerbatimWhenSmall(), force=True)

    assert result.status == "compacted"
    summaries = (await store.snapshot(PARTITION, "t-verbatim")).summaries
    assert [(s.first_seq, s.last_seq) for s in summaries] == [(0, 3), (4, 7)]
    uncovered = await store.uncovered_messages(PARTITION, "t-verbatim")
    assert [message.seq for message in uncovered] == [8]
    assert await check_store(store) == []


async def test_tiny_chunks_are_left_verbatim(store: MemoryStore) -> None:
    """Two one-token messages cannot be summarized into anything; no empty summary is written."""
    tiny = [NewMessage(role=Role.user, content="ok", message_id=f"k{index}") for index in range(6)]
    await store.append_messages(PARTITION, "t-tiny", tiny)
    config = CompactionSettings(threshold=2, keep_recent=0, leaf_chunk_tokens=100)

    result = await compact_thread(store, PARTITION, "t-tiny", config, ExtractiveSummarizer(), force=True)

    assert result.status in ("compacted", "nothing_to_do")
    assert await check_store(store) == []
    summaries = (await store.snapshot(PARTITION, "t-tiny")).summaries
    assert len(summaries) == result.summaries_created
    for summary in summaries:
        assert summary.text.strip()
        assert summary.tokens < summary.source_tokens
    assert await store.count_uncovered(PARTITION, "t-tiny") == 6 - 2 * result.summaries_created


async def test_an_unknown_thread_is_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFound, match="no-such-thread"):
        await compact_thread(store, PARTITION, "no-such-thread", DEFAULTS, ExtractiveSummarizer())


async def test_a_thread_of_another_partition_is_not_found(store: MemoryStore) -> None:
    await store.append_messages("windsurf", "t-other", transcript(100))
    with pytest.raises(NotFound):
        await compact_thread(store, PARTITION, "t-other", DEFAULTS, ExtractiveSummarizer())
    assert await store.count_uncovered("windsurf", "t-other") == 100


class WaitingSummarizer(ExtractiveSummarizer):
    """The extractive summarizer, held before its first draft until ``go`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()
        self.go = asyncio.Event()

    async def summarize_messages(
        self, messages: Sequence[Message], *, background: Background | None = None
    ) -> SummaryDraft:
        self.waiting.set()
        await self.go.wait()
        return await super().summarize_messages(messages, background=background)


class RecordingBackground(ExtractiveSummarizer):
    """The extractive summarizer, noting the background of every draft it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, Background | None]] = []

    async def summarize_messages(
        self, messages: Sequence[Message], *, background: Background | None = None
    ) -> SummaryDraft:
        self.seen.append((1, background))
        return await super().summarize_messages(messages, background=background)

    async def summarize_summaries(
        self, summaries: Sequence[Summary], level: int, *, background: Background | None = None
    ) -> SummaryDraft:
        self.seen.append((level, background))
        return await super().summarize_summaries(summaries, level, background=background)


async def test_every_draft_gets_the_threads_background(store: MemoryStore) -> None:
    """The engine counts words once over the messages it read and hands that to every level."""
    await store.append_messages(PARTITION, "t-background", transcript(200))
    summarizer = RecordingBackground()

    result = await compact_thread(store, PARTITION, "t-background", DEFAULTS, summarizer)

    assert result.escalations >= 1
    levels = {level for level, _ in summarizer.seen}
    assert levels >= {1, 2}
    backgrounds = {id(background) for _, background in summarizer.seen}
    assert len(backgrounds) == 1, "one background per compaction call"
    background = summarizer.seen[0][1]
    messages = await store.get_messages(PARTITION, "t-background")
    said = [m for m in messages if m.tool_call_id is None and m.role != Role.tool]
    assert 0 < len(said) < 200 and background is not None and background.documents == len(said)
    assert background == Background.of_messages(messages)


async def test_a_second_process_on_the_same_thread_is_busy(store: MemoryStore, store_url: str) -> None:
    """Two servers plan the same chunks; the one that persists second backs off as busy."""
    await store.append_messages(PARTITION, "t-race", transcript(150))
    other = open_store(store_url, Neo4jCredentials())
    await other.initialize()
    try:
        late = WaitingSummarizer()
        late_call = asyncio.create_task(compact_thread(other, PARTITION, "t-race", DEFAULTS, late))
        await asyncio.wait_for(late.waiting.wait(), timeout=30)  # it has planned its chunks
        first = await compact_thread(store, PARTITION, "t-race", DEFAULTS, ExtractiveSummarizer())
        late.go.set()
        second = await late_call
    finally:
        await other.close()

    assert first.status == "compacted"
    assert second == CompactionResult(status="busy", summaries_created=0, escalations=0, summary_ids=[])
    assert len((await store.snapshot(PARTITION, "t-race")).summaries) == first.summaries_created
    assert await check_store(store) == []
