"""Compaction planning: which messages become which level-1 summary, which summaries escalate.

Planning is kept apart from the engine (`scheduler/compaction.py`) and from the store so
that the rules docs/architecture.md states — the fresh tail is never touched, chunks respect a
message and a token cap, a tool call never leaves its result behind, runs of
``escalation_fanin`` adjacent summaries move one level up — are pure functions of the
data, tested without a database.
"""

from __future__ import annotations

from collections.abc import Sequence

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import Message, Role, Summary
from palimpsest.scheduler.config import CompactionSettings


def plan_leaf_chunks(
    uncovered: Sequence[Message], config: CompactionSettings, *, force: bool = False
) -> list[list[Message]]:
    """The runs of old messages to fold into level-1 summaries now, oldest first.

    Why progressive: cutting only while more than ``threshold`` uncovered messages lie
    outside the fresh tail keeps every thread near the threshold instead of compacting
    everything at once, and a thread below it is left alone unless ``force`` is given.

    A chunk holds at most ``config.threshold`` messages and ``config.leaf_chunk_tokens``
    tokens; a single message over the token cap is a chunk by itself, and so is an
    assistant tool call with its result when the pair alone is over the cap. A chunk
    never ends between an assistant message carrying a ``tool_call_id`` and the later
    message answering the same ``tool_call_id``: it is cut before the call instead.
    It prefers to end just before a user turn when one lies in its last third. The
    one case where a pair is split is a call left open across more than ``threshold``
    messages, which no chunk can hold whole.

    Args:
        uncovered: The thread's uncovered messages, oldest first, fresh tail included.
        config: Threshold, fresh tail size and token cap.
        force: Chunk every uncovered message outside the tail, even below the threshold.

    Returns:
        Contiguous, disjoint chunks in thread order; empty when nothing qualifies.

    Raises:
        InvalidInput: If the messages are not of one thread in increasing ``seq`` order.
    """
    _check_messages(uncovered)
    outside_end = max(0, len(uncovered) - config.keep_recent)
    if not force and outside_end <= config.threshold:
        return []
    blocked = _blocked_cuts(uncovered)
    chunks: list[list[Message]] = []
    start = 0
    while start < outside_end and (force or outside_end - start > config.threshold):
        end = _chunk_end(uncovered, start, outside_end, blocked, config)
        if end is None:
            break
        chunks.append(list(uncovered[start:end]))
        start = end
    return chunks


def plan_escalation(uncovered: Sequence[Summary], config: CompactionSettings) -> list[Summary] | None:
    """The oldest run of ``escalation_fanin`` adjacent summaries of one level, or None.

    Why adjacency: a summary one level up must cover a contiguous run of the thread
    (invariant 2), so only summaries whose seq ranges touch (``next.first_seq ==
    prev.last_seq + 1``) may be merged.

    Args:
        uncovered: The uncovered summaries of one level, in thread order.
        config: Carries ``escalation_fanin``.

    Returns:
        The first full run, oldest first, or None when no level run is complete yet.

    Raises:
        InvalidInput: If the summaries are of several levels, threads or partitions.
    """
    if not uncovered:
        return None
    first = uncovered[0]
    for summary in uncovered:
        if (summary.level, summary.thread_id, summary.partition) != (first.level, first.thread_id, first.partition):
            raise InvalidInput("plan_escalation takes the summaries of one level of one thread")
    ordered = sorted(uncovered, key=lambda summary: summary.first_seq)
    run: list[Summary] = []
    for summary in ordered:
        if run and summary.first_seq != run[-1].last_seq + 1:
            run = []
        run.append(summary)
        if len(run) == config.escalation_fanin:
            return run
    return None


def _check_messages(messages: Sequence[Message]) -> None:
    """Refuse input the planner could only mis-cut: mixed threads or out-of-order seqs."""
    for previous, current in zip(messages, messages[1:], strict=False):
        if (current.thread_id, current.partition) != (previous.thread_id, previous.partition):
            raise InvalidInput("plan_leaf_chunks takes the messages of one thread")
        if current.seq <= previous.seq:
            raise InvalidInput(
                f"uncovered messages must be in increasing seq order (seq {current.seq} after {previous.seq})"
            )


def _blocked_cuts(messages: Sequence[Message]) -> list[bool]:
    """``blocked[k]`` is True when cutting before message ``k`` would split a tool pair.

    A pair spans from the first assistant message carrying a ``tool_call_id`` to the
    last later non-assistant message carrying the same id (its result); overlapping
    pairs (parallel tool calls) block the union of their spans.
    """
    first_call: dict[str, int] = {}
    last_result: dict[str, int] = {}
    for index, message in enumerate(messages):
        call_id = message.tool_call_id
        if call_id is None:
            continue
        if message.role == Role.assistant:
            first_call.setdefault(call_id, index)
        elif call_id in first_call:
            last_result[call_id] = index
    depth = [0] * (len(messages) + 2)
    for call_id, end in last_result.items():
        depth[first_call[call_id] + 1] += 1
        depth[end + 1] -= 1
    blocked = [False] * (len(messages) + 1)
    open_spans = 0
    for cut in range(len(messages) + 1):
        open_spans += depth[cut]
        blocked[cut] = open_spans > 0
    return blocked


def _chunk_end(
    messages: Sequence[Message],
    start: int,
    outside_end: int,
    blocked: Sequence[bool],
    config: CompactionSettings,
) -> int | None:
    """Where the chunk starting at ``start`` ends (exclusive), or None to stop planning.

    None means the only cuts that keep a tool pair whole lie in the fresh tail: the
    chunk waits until the tail moves on.
    """
    limit = min(start + config.threshold, outside_end)
    end_max = start + 1
    tokens = messages[start].tokens
    while end_max < limit and tokens + messages[end_max].tokens <= config.leaf_chunk_tokens:
        tokens += messages[end_max].tokens
        end_max += 1
    allowed = [cut for cut in range(start + 1, end_max + 1) if not blocked[cut]]
    if allowed:
        return _preferred_cut(messages, start, end_max, allowed)
    next_cut = next(cut for cut in range(end_max + 1, len(messages) + 1) if not blocked[cut])
    if next_cut - start > config.threshold:
        # A call left open across more messages than a chunk may hold: split it.
        return start + config.threshold if start + config.threshold <= outside_end else None
    if next_cut <= outside_end:
        # Over the token cap only: the pair stays whole, like one oversized message.
        return next_cut
    return None


def _preferred_cut(messages: Sequence[Message], start: int, end_max: int, allowed: Sequence[int]) -> int:
    """The latest allowed cut just before a user turn in the chunk's last third, else the latest."""
    length = end_max - start
    for cut in reversed(allowed):
        if 3 * (cut - start) < 2 * length:
            break
        if cut < len(messages) and messages[cut].role == Role.user:
            return cut
    return allowed[-1]
