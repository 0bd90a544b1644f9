"""Context assembly: what an agent needs of one thread to rebuild its working context, under a token budget.

A coding agent forgets when its context window fills and it compacts itself. This module
hands it back "just enough" of its thread: one text that fits ``budget_tokens`` and
reads as a timeline, oldest first, in four named sections:

- ``summaries``: the thread's frontier summaries (the highest-level summaries, which
  together cover the compacted, older part), each with its id and level, since
  ``expand_summary`` turns any of them back into the original messages;
- ``facts``: the thread's current facts (superseded ones are stale by definition);
- ``recall``: with a ``query``, what `palimpsest.server.retrieval.recall` finds about it in the whole
  partition (other threads, and details of this thread folded under its summaries),
  as short snippets, leaving out anything another section already shows;
- ``recent``: the thread's uncompacted messages, verbatim, each with role and ids.

How the budget is spent. Every token counted is ``identity.estimate_tokens`` of the text
as it will be printed, headings and ids included, so ``total_tokens`` (the estimate of
the whole text) never exceeds ``budget_tokens``. The never-compacted tail is the most
valuable context, so its newest message goes in first, alone, whenever it takes at most
half the budget; then sections are filled by priority, ``recent`` first, each up to a
share of the budget (`SHARES`), and whatever is left goes round again in the same
order. Within a section, candidates are taken newest (or most relevant) first and
whole: nothing is ever cut. A candidate that does not fit pauses its section (so
``recent`` stays one contiguous tail, not a scatter of short old messages), except one
larger than the section's whole share, such as a huge tool output: that one is skipped
for now and retried once the rest has been placed, so a single blob never starves the
conversation around it. Whatever is not taken is named in ``pruned``.

Prune before dropping. When the whole thread does not fit, a second attempt replaces
the first: old tool calls and outputs in ``recent`` (all but the newest `KEEP_WHOLE`
messages) shrink to their first line and a pointer (``expand_summary`` on the message
id returns it whole; their ids are listed in ``shortened``), and the summaries covering
the oldest part of the thread are taken first (`PRUNING_SHARES`, oldest first), ahead of
the oldest recent messages, so an agent is always told what the session was for. Only
then are whole items left out; every summary and recent message left out is named in
``pruned`` by id, so each part of the thread is shown, summarized or named, and
``first_seq``..``last_seq`` says which stretch of the thread the text spans.

The result is deterministic: the same store contents and arguments give the same text,
and ``assembled_hash`` (SHA-256 of the text) lets a client tell whether anything changed.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import ExpandPage, Fact, FrontierItem, Message, Role, Summary
from palimpsest.graph_schema.prepare import page_end
from palimpsest.graph_schema.store import MemoryStore

if TYPE_CHECKING:  # recall (and the search stack under it) loads only when a query asks for it
    from palimpsest.scheduler.embedders import Embedder
    from palimpsest.server.retrieval.recall import RecallResult

#: The budget an agent gets when it names none.
DEFAULT_BUDGET = 16_000
#: Smallest and largest budgets accepted, in estimated tokens.
MIN_BUDGET = 256
MAX_BUDGET = 1_000_000
#: Current facts of the thread considered for the ``facts`` section, newest first.
MAX_FACTS = 100
#: Items asked of recall for the ``recall`` section.
RECALL_LIMIT = 10
#: Ids listed per section in ``pruned``; ``count`` says how many were left out in all.
MAX_PRUNED_IDS = 50
#: Frontier messages read from the store at a time while filling ``recent``.
MESSAGE_PAGE = 200

SectionName = Literal["summaries", "facts", "recall", "recent"]

#: Share of the budget each section may take on the first round, without and with a
#: query, in priority order; a second round hands out what is left in the same order.
SHARES: dict[bool, dict[SectionName, float]] = {
    False: {"recent": 0.5, "summaries": 0.35, "facts": 0.15},
    True: {"recent": 0.45, "summaries": 0.25, "facts": 0.1, "recall": 0.2},
}
#: Shares once pruning starts: the summaries covering the oldest part of the thread come
#: first (taken oldest first), then the recent tail with its old tool outputs shortened.
PRUNING_SHARES: dict[bool, dict[SectionName, float]] = {
    False: {"summaries": 0.6, "recent": 0.4, "facts": 0.1},
    True: {"summaries": 0.5, "recent": 0.35, "facts": 0.05, "recall": 0.1},
}
#: Ids of messages start so (`graph_schema/identity.py`); `expand_node` reads such an id whole.
MESSAGE_PREFIX = "msg_"
#: Newest recent messages always shown whole, tool output or not.
KEEP_WHOLE = 6
#: Longest first line of a shortened message, in characters.
HEAD_CHARS = 160
#: The order sections appear in the text: oldest context first, the fresh tail last.
TEXT_ORDER: tuple[SectionName, ...] = ("summaries", "facts", "recall", "recent")

HEADINGS: dict[SectionName, str] = {
    "summaries": "## Summaries of the older part (oldest first; expand_summary(id) returns the original messages)\n",
    "facts": "## Facts of this thread (current ones, oldest first)\n\n",
    "recall": "## Recalled about the query (snippets from the whole partition, most relevant first)\n\n",
    "recent": "## Recent messages (verbatim, oldest first)\n",
}
#: Ends every section: the blank line before the next heading.
SECTION_END = "\n"


class ContextSection(BaseModel):
    """One named part of the assembled text and what it holds."""

    name: SectionName
    tokens: int = Field(description="Estimated tokens of the section's text, its heading included.")
    ids: list[str] = Field(description="Ids of what the section shows (msg_, sum_, fact_), in text order.")


class PrunedSection(BaseModel):
    """What one section had to leave out to stay within the budget."""

    name: SectionName
    count: int = Field(description="How many candidates of the section were left out, in all.")
    ids: list[str] = Field(
        description="Ids left out, in the order they would have been taken: newest first for recent, "
        "newest first for facts, most relevant first for recall, in fill order for summaries. Every one "
        f"for recent and summaries (so each part of the thread is shown or named); the first "
        f"{MAX_PRUNED_IDS} for facts and recall."
    )


class AssembledContext(BaseModel):
    """A thread's context under a token budget: one text in named sections, and what was left out."""

    thread_id: str
    partition: str
    query: str | None
    text: str = Field(description="Oldest first: summaries, facts, recall, then the recent messages verbatim.")
    sections: list[ContextSection] = Field(
        description="The sections the text holds, in text order; empty ones left out."
    )
    total_tokens: int = Field(
        description="Estimated tokens of the whole text, headings included; never over the budget."
    )
    budget_tokens: int
    assembled_hash: str = Field(description="SHA-256 hex of the text: the same hash means the same context.")
    pruned: list[PrunedSection] = Field(
        description="Per section, what did not fit (left out whole, never cut); empty when everything fit."
    )
    shortened: list[str] = Field(
        default_factory=list,
        description="Recent messages (old tool calls and outputs) shown as their first line and a pointer; "
        "expand_summary(id) returns each whole.",
    )
    first_seq: int | None = Field(None, description="Lowest seq the text shows or summarizes; None when empty.")
    last_seq: int | None = Field(None, description="Highest seq the text shows or summarizes; None when empty.")


@dataclass
class _Candidate:
    """Something a section may show: its text is rendered when first needed."""

    id: str
    #: Sort key of its place in the text (seq, time, rank).
    order: tuple[Any, ...]
    #: Tokens it costs at least, known without reading it (exact once ``text`` is set).
    floor: int
    text: str | None = None
    #: The seq range of the thread it shows (summaries and messages), for the result's span.
    span: tuple[int, int] | None = None
    #: Whether it is a message shown as its first line and a pointer.
    shortened: bool = False

    @property
    def size(self) -> int:
        """Its cost as far as known: exact once rendered, else the floor."""
        return self.floor if self.text is None else estimate_tokens(self.text)


@dataclass
class _Section:
    """One section's candidates in priority order and the walk that takes them within a budget."""

    name: SectionName
    candidates: list[_Candidate]
    #: Tokens of the first round; a candidate larger than this never pauses the walk.
    share: int
    #: Renders the candidates that have no text yet (recent messages are read lazily).
    render: Callable[[_Candidate], Awaitable[None]] | None = None
    chosen: list[_Candidate] = field(default_factory=list, init=False)
    _next: int = field(default=0, init=False)
    _deferred: list[_Candidate] = field(default_factory=list, init=False)

    @property
    def frame(self) -> int:
        """Tokens of the heading and the closing blank line, paid with the first candidate taken."""
        return estimate_tokens(HEADINGS[self.name]) + estimate_tokens(SECTION_END)

    async def fill(self, room: int, taken: set[str]) -> int:
        """Take candidates in priority order while they fit ``room``; return the tokens used.

        Resumable: a later call with more room goes on where this one paused, then
        retries the candidates skipped for being larger than the section's share. An id
        another section already took is passed over (it is shown once).
        """
        used = 0
        while self._next < len(self.candidates):
            candidate = self.candidates[self._next]
            if candidate.id not in taken:
                cost = await self._cost(candidate, room - used)
                if cost is not None:
                    used += self._take(candidate, cost, taken)
                elif candidate.size > self.share:
                    self._deferred.append(candidate)
                else:
                    break
            self._next += 1
        for candidate in list(self._deferred):
            if candidate.id in taken:
                self._deferred.remove(candidate)
                continue
            cost = await self._cost(candidate, room - used)
            if cost is not None:
                self._deferred.remove(candidate)
                used += self._take(candidate, cost, taken)
        return used

    async def lead(self, room: int, taken: set[str]) -> int:
        """Take the first candidate alone if it fits ``room``; return the tokens used.

        The newest message is what an agent needs most: it goes in before any share is
        handed out, so a summary or a recalled snippet never crowds it out.
        """
        if self._next or not self.candidates:
            return 0
        cost = await self._cost(self.candidates[0], room)
        if cost is None:
            return 0
        self._next = 1
        return self._take(self.candidates[0], cost, taken)

    async def _cost(self, candidate: _Candidate, room: int) -> int | None:
        """What taking the candidate costs now (its frame too, if it is the first), or None if over ``room``."""
        frame = 0 if self.chosen else self.frame
        if frame + candidate.floor > room:
            return None
        if candidate.text is None and self.render is not None:
            await self.render(candidate)
        cost = frame + candidate.size
        return cost if cost <= room else None

    def _take(self, candidate: _Candidate, cost: int, taken: set[str]) -> int:
        self.chosen.append(candidate)
        taken.add(candidate.id)
        return cost

    def block(self) -> str:
        """The section's text: heading, the chosen candidates in text order, a closing blank line."""
        items = sorted(self.chosen, key=lambda candidate: candidate.order)
        return HEADINGS[self.name] + "".join(candidate.text or "" for candidate in items) + SECTION_END

    def pruned(self, taken: set[str]) -> PrunedSection | None:
        """The candidates neither taken here nor shown by another section, or None when there are none."""
        chosen = {candidate.id for candidate in self.chosen}
        left = [c.id for c in self.candidates if c.id not in chosen and c.id not in taken]
        if not left:
            return None
        listed = left if self.name in ("recent", "summaries") else left[:MAX_PRUNED_IDS]
        return PrunedSection(name=self.name, count=len(left), ids=listed)


async def assemble_context(
    store: MemoryStore,
    thread_id: str,
    *,
    partition: str,
    budget_tokens: int = DEFAULT_BUDGET,
    query: str | None = None,
    embedder: Embedder | None = None,
) -> AssembledContext:
    """Assemble what an agent needs of a thread, within ``budget_tokens``, as one timeline text.

    When everything fits, everything is shown verbatim. Otherwise the text prunes before
    it drops (see the module docstring): old tool calls and outputs in ``recent`` shrink
    to their first line and a pointer, the summaries covering the oldest part of the
    thread go ahead of the oldest recent messages, and only then are whole items left
    out, each named in ``pruned``.

    Args:
        store: The store to read (nothing is written).
        thread_id: The thread whose context is rebuilt.
        partition: The partition the thread lives in; recall searches all of it.
        budget_tokens: Most estimated tokens the text may take, headings included.
        query: What the agent is working on; adds a ``recall`` section about it.
        embedder: Makes that recall hybrid where vectors exist (None: text).

    Returns:
        The text, its sections with their tokens and ids, what was shortened and what
        was pruned. A budget too small for anything gives an empty text with everything
        in ``pruned``; an empty thread gives no sections.

    Raises:
        NotFound: if the thread does not exist in the partition.
        InvalidInput: for a budget outside ``MIN_BUDGET``..``MAX_BUDGET``, or an empty
            or over-long query.
    """
    if not MIN_BUDGET <= budget_tokens <= MAX_BUDGET:
        raise InvalidInput(f"budget_tokens must be between {MIN_BUDGET} and {MAX_BUDGET}, got {budget_tokens}")
    # One round of reads: under load every read waits its turn for the store, so a
    # call's latency grows with its count of sequential reads. ``context_frontier``
    # brings the frontier with its summaries and the newest messages ``recent`` shows
    # first, and refuses a thread the partition does not have.
    view, facts = await asyncio.gather(
        store.context_frontier(partition, thread_id, budget_tokens=budget_tokens, limit=MESSAGE_PAGE),
        store.list_facts(partition, thread_id=thread_id, current_only=True, limit=MAX_FACTS),
    )
    frontier, summaries = view.items, view.summaries
    pages = _MessagePages(
        store, partition, thread_id, [item for item in frontier if item.kind == "message"], budget_tokens, view.newest
    )
    recalled = None
    if query is not None:
        from palimpsest.server.retrieval.recall import recall

        recalled = await recall(store, query, partition=partition, limit=RECALL_LIMIT, embedder=embedder)
    fact_candidates = [
        _fact_candidate(fact) for fact in sorted(facts, key=lambda f: (f.created_at, f.id), reverse=True)
    ]
    recall_candidates = None if recalled is None else _recall_candidates(recalled, shown={i.id for i in frontier})

    async def attempt(pruning: bool) -> AssembledContext:
        summary_candidates = [_summary_candidate(summary) for summary in summaries]
        candidates: dict[SectionName, list[_Candidate]] = {
            "recent": pages.candidates(shorten=pruning),
            # Pruning keeps the start of the thread: the oldest summaries first.
            "summaries": summary_candidates if pruning else list(reversed(summary_candidates)),
            "facts": fact_candidates,
        }
        if recall_candidates is not None:
            candidates["recall"] = recall_candidates
        shares = (PRUNING_SHARES if pruning and summaries else SHARES)[recalled is not None]
        return await _fill(thread_id, partition, query, budget_tokens, candidates, shares, pages)

    whole = await attempt(pruning=False)
    if not any(item.name in ("recent", "summaries") for item in whole.pruned):
        return whole
    return await attempt(pruning=True)


async def _fill(
    thread_id: str,
    partition: str,
    query: str | None,
    budget_tokens: int,
    candidates: dict[SectionName, list[_Candidate]],
    shares: dict[SectionName, float],
    pages: _MessagePages,
) -> AssembledContext:
    """Fill the sections in ``shares`` order within the budget, then write the result."""
    reserve = estimate_tokens(_header(thread_id, {name: len(c) for name, c in candidates.items()}, _total(candidates)))
    available = budget_tokens - reserve
    sections = [
        _Section(name, candidates[name], int(available * share), pages.render if name == "recent" else None)
        for name, share in shares.items()
    ]
    taken: set[str] = set()
    used = 0
    by_name = {section.name: section for section in sections}
    if available > 0:
        used += await by_name["recent"].lead(min(available, budget_tokens // 2), taken)
        for section in sections:
            used += await section.fill(min(section.share, available - used), taken)
        for section in sections:
            used += await section.fill(available - used, taken)

    shown = [by_name[name] for name in TEXT_ORDER if name in by_name and by_name[name].chosen]
    pruned = [found for section in sections if (found := section.pruned(taken)) is not None]
    text = ""
    if shown:
        counts = {section.name: len(section.chosen) for section in shown}
        text = _header(thread_id, counts, sum(item.count for item in pruned)) + "".join(s.block() for s in shown)
    spans = [c.span for name in ("summaries", "recent") if name in by_name for c in by_name[name].chosen if c.span]
    return AssembledContext(
        thread_id=thread_id,
        partition=partition,
        query=query,
        text=text,
        sections=[
            ContextSection(
                name=section.name,
                tokens=estimate_tokens(section.block()),
                ids=[candidate.id for candidate in sorted(section.chosen, key=lambda c: c.order)],
            )
            for section in shown
        ],
        total_tokens=estimate_tokens(text),
        budget_tokens=budget_tokens,
        assembled_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        pruned=pruned,
        shortened=[c.id for c in sorted(by_name["recent"].chosen, key=lambda c: c.order) if c.shortened],
        first_seq=min((span[0] for span in spans), default=None),
        last_seq=max((span[1] for span in spans), default=None),
    )


async def expand_node(
    store: MemoryStore,
    partition: str | None,
    node_id: str,
    *,
    depth: int | None = None,
    limit: int = 200,
    cursor: str | None = None,
) -> ExpandPage:
    """What ``expand_summary`` (and ``palimpsest expand``) returns: a summary expanded, or a message whole.

    Why a message id too: the context shortens old tool outputs to a line and names
    their message id as the way back (see the module docstring).

    Raises:
        NotFound: if no such summary or message exists in the partition.
        InvalidInput: for a cursor this store did not hand out, or depth < 1.
    """
    if node_id.startswith(MESSAGE_PREFIX):
        message = await store.get_message(partition, node_id)
        return ExpandPage(summary_id=node_id, items=[message], total=1)
    return await store.expand(partition, node_id, depth=depth, limit=limit, cursor=cursor)


# -- rendering: how each kind of candidate reads in the text ------------------------------

_NOUNS: dict[SectionName, tuple[str, str]] = {
    "summaries": ("summary", "summaries"),
    "facts": ("fact", "facts"),
    "recall": ("recalled item", "recalled items"),
    "recent": ("recent message", "recent messages"),
}


def _header(thread_id: str, counts: dict[SectionName, int], left_out: int) -> str:
    """The first line: which thread, how much of each section, how much was left out.

    Never longer with smaller counts, so rendering it with every candidate counted
    gives the tokens to reserve before knowing what will be taken.
    """
    parts = [f"{counts[name]} {_NOUNS[name][counts[name] != 1]}" for name in TEXT_ORDER if counts.get(name, 0) > 0]
    if left_out:
        parts.append(f"{left_out} left out")
    return f"# Context of thread {thread_id}: {', '.join(parts)}\n\n"


def _total(candidates: dict[SectionName, list[_Candidate]]) -> int:
    return sum(len(group) for group in candidates.values())


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _summary_candidate(summary: Summary) -> _Candidate:
    count = "message" if summary.message_count == 1 else "messages"
    text = (
        f"\n### {summary.id} · level {summary.level} · seq {summary.first_seq}–{summary.last_seq} "
        f"({summary.message_count} {count}) · {_when(summary.earliest_at)} → {_when(summary.latest_at)}\n"
        f"{summary.text}\n"
    )
    span = (summary.first_seq, summary.last_seq)
    return _Candidate(id=summary.id, order=(summary.first_seq,), floor=estimate_tokens(text), text=text, span=span)


def _fact_candidate(fact: Fact) -> _Candidate:
    text = f"- {_one_line(fact.text)} ({fact.kind}, {fact.id})\n"
    return _Candidate(id=fact.id, order=(fact.created_at, fact.id), floor=estimate_tokens(text), text=text)


def _message_heading(message: Message) -> str:
    call = f" · tool call {message.tool_call_id}" if message.tool_call_id else ""
    return (
        f"\n### {message.role.value} · {message.id} (source {message.source_id}) · seq {message.seq} · "
        f"{_when(message.created_at)}{call}\n"
    )


def _message_text(message: Message) -> str:
    return f"{_message_heading(message)}{message.content}\n"


def _short_text(message: Message) -> str | None:
    """A tool call or output as its first line and a pointer to the rest, or None when that is no shorter."""
    if message.role != Role.tool and message.metadata.get("kind") != "tool_use":
        return None
    head = next((line.strip() for line in message.content.splitlines() if line.strip()), "")
    head = head if len(head) <= HEAD_CHARS else head[: HEAD_CHARS - 1] + "…"
    text = (
        f"{_message_heading(message)}{head}\n"
        f'[shortened: {message.tokens} tokens in all; expand_summary("{message.id}") returns the whole message]\n'
    )
    return text if estimate_tokens(text) < estimate_tokens(_message_text(message)) else None


def _recall_candidates(recalled: RecallResult, shown: set[str]) -> list[_Candidate]:
    """Recall's items by rank, one line each, leaving out what the thread's own sections show."""
    lines: list[tuple[int, str, str]] = []
    for fact in recalled.facts:
        where = f", thread {fact.thread_id}" if fact.thread_id else ""
        lines.append((fact.rank, fact.id, f"fact {fact.id} ({fact.kind}{where}): {fact.text}"))
    for summary in recalled.summaries:
        about = f"level {summary.level}, thread {summary.thread_id}"
        lines.append((summary.rank, summary.id, f"summary {summary.id} ({about}): {summary.snippet}"))
    for message in recalled.messages:
        about = f"{message.role.value if message.role else 'message'}, thread {message.thread_id}"
        about += f", source {message.source_id}"
        lines.append((message.rank, message.id, f"message {message.id} ({about}): {message.snippet}"))
    candidates: list[_Candidate] = []
    for rank, node_id, line in sorted(lines):
        if node_id not in shown:
            text = f"- {_one_line(line)}\n"
            candidates.append(_Candidate(id=node_id, order=(rank,), floor=estimate_tokens(text), text=text))
    return candidates


class _MessagePages:
    """The thread's uncovered messages as ``recent`` candidates, newest first, read a page at a time.

    Their token counts come with the frontier, so the walk can tell what cannot fit
    without reading it; the content is only read for candidates that might, a page
    (`page_end`) never more than could fit ``budget_tokens`` together, and read once for
    both attempts (whole, then pruning). The newest page comes read with the frontier.
    """

    def __init__(
        self,
        store: MemoryStore,
        partition: str,
        thread_id: str,
        items: Sequence[FrontierItem],
        budget_tokens: int,
        newest: Sequence[Message],
    ) -> None:
        self._store = store
        self._budget = budget_tokens
        self._partition = partition
        self._thread_id = thread_id
        self._items = list(reversed(items))
        self._seqs = [item.first_seq for item in self._items]
        self._position = {item.id: index for index, item in enumerate(self._items)}
        self._read: dict[str, Message] = {message.id: message for message in newest}
        self._current: list[_Candidate] = []
        self._shorten = False

    def candidates(self, *, shorten: bool) -> list[_Candidate]:
        """Fresh candidates, newest first; with ``shorten``, tool traffic past the newest few may shrink."""
        self._shorten = shorten
        self._current = [
            _Candidate(
                id=item.id,
                order=(item.first_seq,),
                floor=min(item.tokens, 1) if shorten and index >= KEEP_WHOLE else item.tokens,
                span=(item.first_seq, item.first_seq),
            )
            for index, item in enumerate(self._items)
        ]
        return self._current

    async def _read_range(self, start: int, end: int) -> None:
        """Read the messages of ``self._items[start:end]`` (newest first, gap free) in one range read."""
        wanted = {item.id for item in self._items[start:end]}
        for message in await self._store.get_messages(
            self._partition, self._thread_id, first_seq=self._seqs[end - 1], last_seq=self._seqs[start]
        ):
            if message.id in wanted:
                self._read[message.id] = message

    async def render(self, candidate: _Candidate) -> None:
        """Read the page of messages from this candidate back in time (`page_end`) and render them.

        One range read, of the page's messages not read yet (the newest page came with
        the frontier).
        """
        start = self._position[candidate.id]
        end = page_end(self._items, start, self._budget, MESSAGE_PAGE)
        unread = next((index for index in range(start, end) if self._items[index].id not in self._read), None)
        if unread is not None:
            await self._read_range(unread, end)
        for index in range(start, end):
            target = self._current[index]
            message = self._read[target.id]
            short = _short_text(message) if self._shorten and index >= KEEP_WHOLE else None
            target.text = short or _message_text(message)
            target.shortened = short is not None
