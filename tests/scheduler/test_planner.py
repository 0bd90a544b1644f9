"""Tests of compaction planning: leaf chunks and escalation runs, as pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import Message, NewMessage, Role, Summary
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.scheduler.planner import plan_escalation, plan_leaf_chunks
from tests.support.planned import PARTITION, THREAD, stored
from tests.support.transcripts import transcript

_AT = datetime(2026, 1, 1, tzinfo=UTC)


def plain(roles: str, *, tokens: int = 10) -> list[Message]:
    """Messages from a role string: u=user, a=assistant, t=tool, s=system."""
    names = {"u": Role.user, "a": Role.assistant, "t": Role.tool, "s": Role.system}
    new = [NewMessage(role=names[letter], content=f"message {index}") for index, letter in enumerate(roles)]
    return stored(new, tokens=[tokens] * len(new))


def config(threshold: int = 4, keep_recent: int = 2, cap: int = 20000, fanin: int = 3) -> CompactionSettings:
    return CompactionSettings(
        threshold=threshold, keep_recent=keep_recent, leaf_chunk_tokens=cap, escalation_fanin=fanin
    )


def seqs(chunks: list[list[Message]]) -> list[list[int]]:
    return [[message.seq for message in chunk] for chunk in chunks]


# -- thresholds and the fresh tail ---------------------------------------------------


def test_exactly_threshold_outside_the_tail_does_not_qualify() -> None:
    messages = plain("a" * 6)  # 4 outside a tail of 2
    assert plan_leaf_chunks(messages, config()) == []


def test_threshold_plus_one_outside_the_tail_qualifies() -> None:
    messages = plain("a" * 7)  # 5 outside the tail
    assert seqs(plan_leaf_chunks(messages, config())) == [[1, 2, 3, 4]]


def test_cutting_stops_once_at_most_threshold_remain_outside_the_tail() -> None:
    messages = plain("a" * 15)  # 13 outside the tail: 9 must go, in chunks of 4
    assert seqs(plan_leaf_chunks(messages, config())) == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]


def test_force_chunks_everything_outside_the_tail() -> None:
    messages = plain("a" * 5)  # 3 outside, below the threshold
    assert plan_leaf_chunks(messages, config()) == []
    assert seqs(plan_leaf_chunks(messages, config(), force=True)) == [[1, 2, 3]]
    assert seqs(plan_leaf_chunks(plain("a" * 11), config(), force=True)) == [[1, 2, 3, 4], [5, 6, 7, 8], [9]]


def test_the_tail_is_never_planned_even_with_force() -> None:
    messages = plain("a" * 3)
    assert plan_leaf_chunks(messages, config(keep_recent=3), force=True) == []
    assert plan_leaf_chunks(messages, config(keep_recent=10), force=True) == []
    assert plan_leaf_chunks([], config(), force=True) == []


def test_no_tail_means_every_message_may_be_planned() -> None:
    assert seqs(plan_leaf_chunks(plain("a" * 5), config(keep_recent=0))) == [[1, 2, 3, 4]]


# -- caps ----------------------------------------------------------------------------


def test_token_cap_ends_a_chunk_early() -> None:
    messages = stored([NewMessage(role=Role.assistant, content=str(i)) for i in range(9)], tokens=[40] * 9)
    chunks = plan_leaf_chunks(messages, config(cap=100), force=True)
    assert seqs(chunks) == [[1, 2], [3, 4], [5, 6], [7]]
    assert all(sum(m.tokens for m in chunk) <= 100 for chunk in chunks)


def test_a_single_message_over_the_token_cap_is_a_chunk_by_itself() -> None:
    new = [NewMessage(role=Role.assistant, content=str(i)) for i in range(6)]
    messages = stored(new, tokens=[10, 500, 10, 10, 1, 1])
    assert seqs(plan_leaf_chunks(messages, config(cap=100), force=True)) == [[1], [2], [3, 4]]


# -- tool pairs and user turns ---------------------------------------------------------


def tool_pair(call_id: str) -> list[NewMessage]:
    return [
        NewMessage(role=Role.assistant, content=f"calling {call_id}", tool_call_id=call_id),
        NewMessage(role=Role.tool, content=f"result of {call_id}", tool_call_id=call_id),
    ]


def test_a_chunk_is_cut_before_a_tool_call_rather_than_between_call_and_result() -> None:
    new = [NewMessage(role=Role.assistant, content=str(i)) for i in range(3)] + tool_pair("c1")
    new += [NewMessage(role=Role.assistant, content="after") for _ in range(4)]
    messages = stored(new)
    # Threshold 4 would end the first chunk between the call (seq 4) and its result (seq 5).
    chunks = plan_leaf_chunks(messages, config(), force=True)
    assert seqs(chunks)[0] == [1, 2, 3]
    assert seqs(chunks)[1][:2] == [4, 5]
    assert all(len(chunk) <= 4 for chunk in chunks)


def test_parallel_tool_calls_stay_in_one_chunk() -> None:
    new = [NewMessage(role=Role.user, content="go")]
    new += [NewMessage(role=Role.assistant, content=f"call {c}", tool_call_id=c) for c in ("x", "y")]
    new += [NewMessage(role=Role.tool, content=f"result {c}", tool_call_id=c) for c in ("x", "y")]
    new += [NewMessage(role=Role.assistant, content="done") for _ in range(4)]
    chunks = plan_leaf_chunks(stored(new), config(threshold=4), force=True)
    assert seqs(chunks)[:2] == [[1], [2, 3, 4, 5]]


def test_a_tool_pair_over_the_token_cap_stays_whole() -> None:
    new = [NewMessage(role=Role.assistant, content="a"), *tool_pair("big")]
    new += [NewMessage(role=Role.user, content="u")] * 3
    messages = stored(new, tokens=[10, 10, 900, 10, 10, 10])
    assert seqs(plan_leaf_chunks(messages, config(cap=100), force=True))[:2] == [[1], [2, 3]]


def test_a_pair_reaching_into_the_tail_waits() -> None:
    new = [NewMessage(role=Role.assistant, content="a")] + tool_pair("open") + [NewMessage(role=Role.user, content="u")]
    # Tail of 2 holds the result and the user turn: the call must wait with its result.
    assert seqs(plan_leaf_chunks(stored(new), config(), force=True)) == [[1]]


def test_a_call_open_longer_than_a_chunk_is_split_at_the_threshold() -> None:
    new = [NewMessage(role=Role.assistant, content="call", tool_call_id="long")]
    new += [NewMessage(role=Role.assistant, content=str(i)) for i in range(5)]
    new += [NewMessage(role=Role.tool, content="finally", tool_call_id="long")]
    new += [NewMessage(role=Role.user, content="u")] * 2
    assert seqs(plan_leaf_chunks(stored(new), config(), force=True)) == [[1, 2, 3, 4], [5, 6, 7]]


def test_a_result_without_its_call_constrains_nothing() -> None:
    new = [NewMessage(role=Role.tool, content="orphan", tool_call_id="gone")] + [
        NewMessage(role=Role.assistant, content=str(i)) for i in range(7)
    ]
    assert seqs(plan_leaf_chunks(stored(new), config(), force=True)) == [[1, 2, 3, 4], [5, 6]]


def test_a_chunk_prefers_to_end_before_a_user_turn_in_its_last_third() -> None:
    # threshold 6: the user turn at seq 6 lies in the last third of chunk 1..6, so cut before it.
    messages = plain("uaaaauaaaaaa", tokens=5)
    chunks = plan_leaf_chunks(messages, config(threshold=6, keep_recent=0), force=True)
    assert seqs(chunks)[0] == [1, 2, 3, 4, 5]
    assert chunks[1][0].role == Role.user


def test_a_user_turn_early_in_the_chunk_is_not_preferred() -> None:
    messages = plain("uauaaaaaaaaa", tokens=5)  # user at seq 3: in the first third
    chunks = plan_leaf_chunks(messages, config(threshold=6, keep_recent=0), force=True)
    assert seqs(chunks)[0] == [1, 2, 3, 4, 5, 6]


def test_planning_a_realistic_transcript_with_default_settings() -> None:
    messages = stored(transcript(75))
    chunks = plan_leaf_chunks(messages, CompactionSettings())
    flat = [message.seq for chunk in chunks for message in chunk]
    assert flat == list(range(1, len(flat) + 1))
    assert 75 - 10 - len(flat) <= 30  # at most threshold left outside the tail
    assert_pairs_whole(messages, chunks)


def test_out_of_order_or_mixed_input_is_refused() -> None:
    messages = plain("aaa")
    with pytest.raises(InvalidInput, match="increasing seq"):
        plan_leaf_chunks([messages[1], messages[0]], config())
    other = messages[2].model_copy(update={"thread_id": "elsewhere"})
    with pytest.raises(InvalidInput, match="one thread"):
        plan_leaf_chunks([messages[0], other], config())


# -- escalation ------------------------------------------------------------------------


def summary(first: int, last: int, *, level: int = 1, name: str | None = None) -> Summary:
    return Summary(
        id=name or f"sum_{level}_{first}_{last}",
        thread_id=THREAD,
        partition=PARTITION,
        level=level,
        text="s",
        tokens=1,
        source_tokens=10,
        first_seq=first,
        last_seq=last,
        earliest_at=_AT,
        latest_at=_AT,
        message_count=last - first + 1,
        digest="d",
        summarizer="extractive",
        created_at=_AT,
    )


def test_escalation_needs_a_full_run() -> None:
    assert plan_escalation([], config()) is None
    assert plan_escalation([summary(1, 4), summary(5, 8)], config(fanin=3)) is None


def test_escalation_takes_the_oldest_adjacent_run() -> None:
    run = [summary(1, 4), summary(5, 8), summary(9, 12), summary(13, 16)]
    assert [s.id for s in plan_escalation(run, config(fanin=3)) or []] == [s.id for s in run[:3]]


def test_escalation_skips_runs_broken_by_a_gap() -> None:
    summaries = [summary(1, 4), summary(6, 8), summary(9, 12), summary(13, 16), summary(17, 20)]
    chosen = plan_escalation(summaries, config(fanin=3))
    assert chosen is not None and [s.first_seq for s in chosen] == [6, 9, 13]
    assert plan_escalation([summary(1, 4), summary(6, 8), summary(10, 12)], config(fanin=2)) is None


def test_escalation_refuses_mixed_levels() -> None:
    with pytest.raises(InvalidInput, match="one level"):
        plan_escalation([summary(1, 4), summary(5, 8, level=2)], config())


# -- properties ------------------------------------------------------------------------


def assert_pairs_whole(messages: Sequence[Message], chunks: list[list[Message]]) -> None:
    """No chunk boundary lies between an assistant tool call and its result."""
    chunk_of = {message.seq: index for index, chunk in enumerate(chunks) for message in chunk}
    calls = {m.tool_call_id: m for m in messages if m.role == Role.assistant and m.tool_call_id}
    for message in messages:
        call = calls.get(message.tool_call_id) if message.role != Role.assistant else None
        if call is not None and (call.seq in chunk_of or message.seq in chunk_of):
            assert chunk_of.get(call.seq) == chunk_of.get(message.seq), f"pair {message.tool_call_id} split"


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[Message], CompactionSettings]:
    threshold = draw(st.integers(2, 8))
    cfg = CompactionSettings(
        threshold=threshold,
        keep_recent=draw(st.integers(0, 5)),
        leaf_chunk_tokens=draw(st.integers(100, 400)),
    )
    new: list[NewMessage] = []
    tokens: list[int] = []
    call = 0
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["user", "assistant", "tools"]))
        if kind == "tools":
            width = draw(st.integers(1, max(1, threshold // 2)))
            ids = [f"c{call + i}" for i in range(width)]
            call += width
            new += [NewMessage(role=Role.assistant, content="call", tool_call_id=c) for c in ids]
            new += [NewMessage(role=Role.tool, content="result", tool_call_id=c) for c in ids]
            tokens += [draw(st.integers(1, 150)) for _ in range(2 * width)]
        else:
            new.append(NewMessage(role=Role(kind), content="text"))
            tokens.append(draw(st.integers(1, 500)))
    return stored(new, tokens=tokens, first_seq=draw(st.integers(1, 100))), cfg


@settings(max_examples=150, deadline=None)
@given(conversations(), st.booleans())
def test_chunks_are_contiguous_ordered_disjoint_capped_and_keep_pairs(
    case: tuple[list[Message], CompactionSettings], force: bool
) -> None:
    messages, cfg = case
    chunks = plan_leaf_chunks(messages, cfg, force=force)
    planned = [message for chunk in chunks for message in chunk]
    assert planned == messages[: len(planned)]  # contiguous from the oldest, ordered, disjoint
    outside = max(0, len(messages) - cfg.keep_recent)
    assert len(planned) <= outside  # the tail is never planned
    if not force and outside <= cfg.threshold:
        assert chunks == []
    left = outside - len(planned)
    if (force and left > 0) or (not force and outside > cfg.threshold and left > cfg.threshold):
        # Planning only stops early at a tool call whose result lies in the tail.
        assert messages[len(planned)].role == Role.assistant and messages[len(planned)].tool_call_id
    elif not force and chunks:
        assert left <= cfg.threshold
    for chunk in chunks:
        assert 1 <= len(chunk) <= cfg.threshold
        if sum(m.tokens for m in chunk) > cfg.leaf_chunk_tokens:
            # Only one message or one whole tool-call block may be over the cap.
            assert len(chunk) == 1 or all(m.tool_call_id for m in chunk)
    assert_pairs_whole(messages, chunks)
