"""`doctor`: proves, rather than trusts, that a store keeps the lossless contract.

Every invariant of docs/architecture.md is recomputed from what the store hands back through two
protocol verbs only (``list_threads`` and ``snapshot``), so the same check runs on every
backend and catches damage done behind the store's back (an edited row, a deleted
edge, a node moved to another partition). Hashes are recomputed from message fields
and digests from the messages up, so a forged ``sha256`` or ``digest`` column does not
hide anything; a message's id is derived again from its partition, thread and source
id, so an id planted for another partition's message does not either.

Each breach names the invariant (numbered as in docs/architecture.md), the thread, the node and what is
wrong in one sentence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator

from pydantic import BaseModel, Field

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.graph_schema.identity import message_id_matches, message_sha256, summary_digest
from palimpsest.graph_schema.models import ArchivedRange, Message, Summary, Thread, ThreadSnapshot
from palimpsest.graph_schema.store import MemoryStore

#: ``list_threads`` has no cursor: ask for more threads than any store holds.
MAX_THREADS = 10_000_000


class Breach(BaseModel):
    """One broken invariant at one node."""

    invariant: int = Field(ge=1, le=7, description="The invariant broken, numbered as in docs/architecture.md.")
    thread_id: str
    node_id: str | None = Field(description="The message or summary at fault; None for the thread itself.")
    message: str = Field(description="What is wrong, in one sentence.")


#: Reads the originals of an archived run from its file, checked against the recorded
#: digest; raises a `PalimpsestError` saying what is wrong when it cannot.
ArchiveReader = Callable[[ArchivedRange], list[Message]]


async def check_store(
    store: MemoryStore,
    *,
    partition: str | None = None,
    thread_id: str | None = None,
    read_archived: ArchiveReader | None = None,
) -> list[Breach]:
    """Check every invariant on every thread (of a partition, or one thread).

    Why through the protocol only: ``doctor`` must judge both backends by the same
    rules and must not share a blind spot with the code that wrote the data.

    Args:
        store: An initialized store.
        partition: Only threads of this partition; None checks every partition.
        thread_id: Only this thread.
        read_archived: How to read archived messages back (archived messages are moved,
            not lost: they are checked like live ones); without it an archived run is a
            breach of invariant 1, since nothing here can vouch for it.

    Returns:
        Every breach found, thread by thread; empty when the store is sound.

    Raises:
        NotFound: If ``thread_id`` names no thread (in ``partition`` when given).
        InvalidInput: If ``thread_id`` is given without ``partition`` and several
            partitions have a thread of that id.
    """
    # A thread is (partition, id): two partitions may each have a thread of one id, so
    # each snapshot names its thread's partition. A node moved out of that partition is
    # then missing from the thread, which the checks report (invariant 7).
    if thread_id is not None:
        return _check_with_archived(await store.snapshot(partition, thread_id), read_archived)
    breaches: list[Breach] = []
    for thread in await store.list_threads(partition, limit=MAX_THREADS):
        breaches.extend(_check_with_archived(await store.snapshot(thread.partition, thread.id), read_archived))
    return breaches


def _check_with_archived(snapshot: ThreadSnapshot, read_archived: ArchiveReader | None) -> list[Breach]:
    """Check a thread with its archived messages read back in place; an unreadable run is the breach."""
    if not snapshot.archived:
        return check_snapshot(snapshot)
    messages = list(snapshot.messages)
    breaches: list[Breach] = []
    for run in snapshot.archived:
        where = f"archived messages seq {run.first_seq}-{run.last_seq} ({run.path})"
        if read_archived is None:
            breaches.append(
                Breach(invariant=1, thread_id=snapshot.thread.id, node_id=None, message=f"{where} cannot be read here")
            )
            continue
        try:
            messages.extend(read_archived(run))
        except PalimpsestError as exc:
            breaches.append(Breach(invariant=1, thread_id=snapshot.thread.id, node_id=None, message=f"{where}: {exc}"))
    if breaches:
        return breaches
    return check_snapshot(snapshot.model_copy(update={"messages": sorted(messages, key=lambda m: m.seq)}))


def check_snapshot(snapshot: ThreadSnapshot) -> list[Breach]:
    """Every breach in one thread's snapshot, invariants in their numbered order."""
    return list(_ThreadCheck(snapshot).run())


class _ThreadCheck:
    """The checks of one thread, sharing the indexes built once from its snapshot."""

    def __init__(self, snapshot: ThreadSnapshot) -> None:
        self.thread: Thread = snapshot.thread
        self.messages = sorted(snapshot.messages, key=lambda message: message.seq)
        self.summaries = sorted(snapshot.summaries, key=lambda summary: (summary.level, summary.first_seq))
        self.message_by_id = {message.id: message for message in self.messages}
        self.summary_by_id = {summary.id: summary for summary in self.summaries}
        self.parents: dict[str, list[str]] = defaultdict(list)
        for summary in self.summaries:
            for child_id in summary.child_ids:
                self.parents[child_id].append(summary.id)
        self.sha256 = {
            message.id: message_sha256(
                message.partition,
                message.thread_id,
                message.source_id,
                message.role.value,
                message.content,
                message.tool_call_id,
            )
            for message in self.messages
        }
        self.cyclic: set[str] = set()
        self._digests: dict[str, str | None] = {}
        self._leaves: dict[str, list[int] | None] = {}

    def breach(self, invariant: int, node_id: str | None, message: str) -> Breach:
        return Breach(invariant=invariant, thread_id=self.thread.id, node_id=node_id, message=message)

    def run(self) -> Iterator[Breach]:
        yield from self.check_messages_immutable()
        yield from self.check_structure()
        yield from self.check_expansion()
        yield from self.check_digests()
        yield from self.check_frontier()
        yield from self.check_shorter()
        yield from self.check_partition()

    # -- 1: messages are immutable ----------------------------------------------------

    def check_messages_immutable(self) -> Iterator[Breach]:
        for message in self.messages:
            if self.sha256[message.id] != message.sha256:
                yield self.breach(
                    1,
                    message.id,
                    f"message seq {message.seq} no longer matches its sha256 (edited after it was written)",
                )
            if not message_id_matches(message.id, message.partition, message.thread_id, message.source_id):
                yield self.breach(
                    1,
                    message.id,
                    f"message seq {message.seq} has an id its partition, thread and source id do not give "
                    "(planted or rewritten)",
                )

    # -- 2: one parent each, contiguous runs, no overlap, levels, no cycle -----------------

    def check_structure(self) -> Iterator[Breach]:
        self.cyclic = self._find_cycles()
        for node_id in sorted(self.cyclic):
            yield self.breach(2, node_id, f"summary {node_id} lies on a cycle of SUMMARIZES edges")
        for child_id, parent_ids in self.parents.items():
            if len(parent_ids) > 1:
                yield self.breach(
                    2,
                    child_id,
                    f"{child_id} is covered by {len(parent_ids)} summaries ({', '.join(sorted(parent_ids))})",
                )
        for summary in self.summaries:
            yield from self._check_children(summary)
            expected_parent = self.parents.get(summary.id, [None])[0]
            if summary.parent_id != expected_parent:
                yield self.breach(
                    2, summary.id, f"summary records parent {summary.parent_id} but its edges say {expected_parent}"
                )
        by_level: dict[int, list[Summary]] = defaultdict(list)
        for summary in self.summaries:
            by_level[summary.level].append(summary)
        for level, summaries in by_level.items():
            ordered = sorted(summaries, key=lambda summary: summary.first_seq)
            for previous, current in zip(ordered, ordered[1:], strict=False):
                if current.first_seq <= previous.last_seq:
                    yield self.breach(
                        2,
                        current.id,
                        f"level-{level} summary over seq {current.first_seq}-{current.last_seq} overlaps "
                        f"{previous.id} over seq {previous.first_seq}-{previous.last_seq}",
                    )

    def _check_children(self, summary: Summary) -> Iterator[Breach]:
        """Level, contiguity and the derived fields of one summary against its children."""
        if summary.level < 1:
            yield self.breach(2, summary.id, f"summary has level {summary.level}, below 1")
            return
        ranges: list[tuple[int, int]] = []
        count = 0
        for child_id in summary.child_ids:
            if summary.level == 1:
                message = self.message_by_id.get(child_id)
                if message is None:
                    wrong = self.summary_by_id.get(child_id)
                    if wrong is not None:
                        yield self.breach(2, summary.id, f"level-1 summary covers summary {child_id}, not a message")
                    return
                ranges.append((message.seq, message.seq))
                count += 1
            else:
                child = self.summary_by_id.get(child_id)
                if child is None:
                    if child_id in self.message_by_id:
                        yield self.breach(
                            2, summary.id, f"level-{summary.level} summary covers message {child_id} directly"
                        )
                    return
                if child.level != summary.level - 1:
                    yield self.breach(
                        2,
                        summary.id,
                        f"level-{summary.level} summary covers level-{child.level} summary {child_id}",
                    )
                ranges.append((child.first_seq, child.last_seq))
                count += child.message_count
        if not ranges:
            yield self.breach(2, summary.id, "summary covers nothing")
            return
        for (_, previous_last), (next_first, _) in zip(ranges, ranges[1:], strict=False):
            if next_first != previous_last + 1:
                yield self.breach(
                    2,
                    summary.id,
                    f"children are not a contiguous run (seq {previous_last} is followed by seq {next_first})",
                )
                break
        derived = (ranges[0][0], ranges[-1][1], count)
        recorded = (summary.first_seq, summary.last_seq, summary.message_count)
        if derived != recorded:
            yield self.breach(
                2,
                summary.id,
                f"summary records seq {recorded[0]}-{recorded[1]} over {recorded[2]} messages but its "
                f"children give seq {derived[0]}-{derived[1]} over {derived[2]}",
            )

    def _find_cycles(self) -> set[str]:
        """Summaries on a cycle of summary-to-summary edges (iterative DFS, no recursion limit)."""
        white, grey, black = 0, 1, 2
        colour = dict.fromkeys(self.summary_by_id, white)
        on_cycle: set[str] = set()
        for root in self.summary_by_id:
            if colour[root] != white:
                continue
            stack: list[tuple[str, Iterator[str]]] = [(root, iter(self.summary_by_id[root].child_ids))]
            path = [root]
            colour[root] = grey
            while stack:
                node, children = stack[-1]
                child = next(children, None)
                if child is None:
                    colour[node] = black
                    stack.pop()
                    path.pop()
                elif child in colour:
                    if colour[child] == grey:
                        on_cycle.update(path[path.index(child) :])
                    elif colour[child] == white:
                        colour[child] = grey
                        stack.append((child, iter(self.summary_by_id[child].child_ids)))
                        path.append(child)
        return on_cycle

    # -- 3: expansion gives back exactly the covered messages ------------------------------

    def check_expansion(self) -> Iterator[Breach]:
        for summary in self.summaries:
            leaves = self.leaves(summary.id)
            if leaves is None:
                missing = [
                    child_id
                    for child_id in summary.child_ids
                    if child_id not in self.message_by_id and child_id not in self.summary_by_id
                ]
                detail = f"child {missing[0]} is not in the thread" if missing else "its edges form a cycle"
                yield self.breach(3, summary.id, f"summary cannot be expanded to messages: {detail}")
                continue
            expected = list(range(summary.first_seq, summary.last_seq + 1))
            if leaves != expected:
                yield self.breach(
                    3,
                    summary.id,
                    f"expanding the summary gives {len(leaves)} messages, not the {len(expected)} of seq "
                    f"{summary.first_seq}-{summary.last_seq} in order",
                )

    def leaves(self, node_id: str) -> list[int] | None:
        """The seqs an expansion of a summary reaches, in order; None if it cannot reach them."""
        if node_id in self.message_by_id:
            return [self.message_by_id[node_id].seq]
        if node_id in self._leaves:
            return self._leaves[node_id]
        summary = self.summary_by_id.get(node_id)
        if summary is None or node_id in self.cyclic:
            return None
        self._leaves[node_id] = None
        seqs: list[int] = []
        for child_id in summary.child_ids:
            child_seqs = self.leaves(child_id)
            if child_seqs is None:
                return None
            seqs.extend(child_seqs)
        self._leaves[node_id] = seqs
        return seqs

    # -- 4: the Merkle digests ---------------------------------------------------------------

    def check_digests(self) -> Iterator[Breach]:
        for summary in self.summaries:
            digest = self.digest(summary.id)
            if digest is not None and digest != summary.digest:
                yield self.breach(
                    4, summary.id, f"level-{summary.level} summary's digest does not match the digest of its children"
                )

    def digest(self, node_id: str) -> str | None:
        """A node's digest recomputed from the messages' fields up; None if unreachable."""
        if node_id in self.message_by_id:
            return self.sha256[node_id]
        if node_id in self._digests:
            return self._digests[node_id]
        summary = self.summary_by_id.get(node_id)
        if summary is None or node_id in self.cyclic:
            return None
        self._digests[node_id] = None
        child_digests: list[str] = []
        for child_id in summary.child_ids:
            child_digest = self.digest(child_id)
            if child_digest is None:
                return None
            child_digests.append(child_digest)
        self._digests[node_id] = summary_digest(summary.level, child_digests)
        return self._digests[node_id]

    # -- 5: the frontier partitions the thread ------------------------------------------------

    def check_frontier(self) -> Iterator[Breach]:
        seqs = [message.seq for message in self.messages]
        if seqs != list(range(len(seqs))):
            gap = next(index for index, seq in enumerate(seqs) if seq != index)
            yield self.breach(5, None, f"message seqs are not 0..{len(seqs) - 1}: seq {gap} is missing or repeated")
        if self.thread.message_count != len(self.messages):
            yield self.breach(
                5,
                None,
                f"thread counts {self.thread.message_count} messages but holds {len(self.messages)}",
            )
        frontier = [
            (summary.first_seq, summary.last_seq, summary.id)
            for summary in self.summaries
            if summary.id not in self.parents
        ]
        frontier.extend(
            (message.seq, message.seq, message.id) for message in self.messages if message.id not in self.parents
        )
        frontier.sort()
        expected_first = 0
        for first, last, node_id in frontier:
            if first != expected_first:
                what = (
                    "overlaps the previous frontier node"
                    if first < expected_first
                    else f"leaves seq {expected_first}-{first - 1} uncovered"
                )
                yield self.breach(5, node_id, f"frontier node over seq {first}-{last} {what}")
            expected_first = max(expected_first, last + 1)
        if seqs and expected_first != seqs[-1] + 1:
            yield self.breach(5, None, f"the frontier ends at seq {expected_first - 1}, not at the last message")

    # -- 6: summaries are shorter ------------------------------------------------------------

    def check_shorter(self) -> Iterator[Breach]:
        for summary in self.summaries:
            if summary.tokens >= summary.source_tokens:
                yield self.breach(
                    6,
                    summary.id,
                    f"summary has {summary.tokens} tokens, not fewer than its {summary.source_tokens} source tokens",
                )
            children: list[Message | Summary | None] = [
                self.message_by_id.get(child_id) or self.summary_by_id.get(child_id) for child_id in summary.child_ids
            ]
            if all(child is not None for child in children):
                total = sum(child.tokens for child in children if child is not None)
                if total != summary.source_tokens:
                    yield self.breach(
                        6,
                        summary.id,
                        f"summary records {summary.source_tokens} source tokens but its children hold {total}",
                    )

    # -- 7: partitions ---------------------------------------------------------------------------

    def check_partition(self) -> Iterator[Breach]:
        home = (self.thread.id, self.thread.partition)
        nodes: list[Message | Summary] = [*self.messages, *self.summaries]
        for node in nodes:
            if (node.thread_id, node.partition) != home:
                yield self.breach(
                    7,
                    node.id,
                    f"{node.id} is in thread {node.thread_id} partition {node.partition}, not thread "
                    f"{self.thread.id} partition {self.thread.partition}",
                )
        for summary in self.summaries:
            for child_id in summary.child_ids:
                if child_id not in self.message_by_id and child_id not in self.summary_by_id:
                    yield self.breach(
                        7,
                        summary.id,
                        f"child {child_id} is not a node of thread {self.thread.id} "
                        f"in partition {self.thread.partition}",
                    )
