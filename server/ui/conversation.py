"""A thread's conversation as a person reads it: one page of messages in seq order, each as a turn.

Why turns and not raw messages: a coding session stores a tool call, its result, the
model's thinking and the context an agent injected as messages of their own, and read
one after the other they bury what was said. So each message becomes a turn that
knows what it is (from the metadata the feeds write: ``kind``, ``tool_name``, the
flags ``meta``, ``injected``, ``synthetic``, ``sidechain``, ``compact_summary``,
``is_error``, and ``blocks`` for images and documents); a tool call carries the results
answering it on the same page, and the template folds calls, thinking and marked turns
into ``<details>``.

A page is a fixed range of seqs (`PAGE_SIZE` of them), read with one ``get_messages``
call, so a page of a 10,000-message thread costs what a page of a short one does, and
a message's page follows from its seq alone (a search hit or a fact links straight to
it). Text is rendered by markdown-it with only fenced code enabled and raw HTML off:
every other character stays text, escaped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import Message, Role, Summary, Thread
from palimpsest.graph_schema.store import MemoryStore

#: Messages on one page of a conversation.
PAGE_SIZE = 100
#: Marks a message's metadata flags put on its turn, and the words shown for them.
MARKS = {
    "meta": "injected",
    "injected": "injected",
    "synthetic": "never reached the model",
    "api_error": "never reached the model",
    "compact_summary": "compaction summary",
    "sidechain": "subagent",
    "is_error": "error",
}
#: Marks that fold a turn away (what the agent added, not what was said).
FOLDING_MARKS = frozenset({"injected", "never reached the model", "compaction summary"})

_MARKDOWN = MarkdownIt("zero", {"html": False}).enable("fence")


@dataclass
class Turn:
    """One message as shown: what it is, its marks, its text rendered, and a call's results."""

    message: Message
    #: text, tool_call, tool_result, thinking or system.
    kind: str
    marks: list[str]
    attachments: list[str]
    tool_name: str | None = None
    results: list[Turn] = field(default_factory=list)

    @property
    def folded(self) -> bool:
        """Whether the page folds it into ``<details>``: calls, thinking, system and marked turns."""
        return self.kind != "text" or any(mark in FOLDING_MARKS for mark in self.marks)

    @property
    def html(self) -> Markup:
        """The text, escaped, with fenced code as ``<pre><code>``; tool input and output stay preformatted."""
        return Markup(_MARKDOWN.render(self.message.content))  # noqa: S704 - markdown-it escapes, html off

    @property
    def call_input(self) -> str:
        """A tool call's arguments, without the tool's name leading the content."""
        content = self.message.content
        if self.tool_name and content.startswith(self.tool_name):
            return content[len(self.tool_name) :].strip()
        return content


def page_of(seq: int) -> int:
    """The page (from 1) holding a seq."""
    return seq // PAGE_SIZE + 1


def page_count(thread: Thread) -> int:
    """How many pages a thread's messages fill (one, for an empty thread)."""
    return max(1, -(-thread.message_count // PAGE_SIZE))


def parse_page(raw: str | None, thread: Thread) -> int:
    """The page a query names; the first when none.

    Raises:
        InvalidInput: for anything but a whole number from 1 to the last page.
    """
    last = page_count(thread)
    if raw is None or raw == "":
        return 1
    if not raw.isdigit() or not 1 <= int(raw) <= last:
        raise InvalidInput(f"page must be a whole number from 1 to {last}")
    return int(raw)


def _kind(message: Message) -> str:
    kind = message.metadata.get("kind")
    if message.role is Role.system:
        return "system"
    if message.role is Role.tool or kind == "tool_result":
        return "tool_result"
    if kind == "thinking":
        return "thinking"
    if message.role is Role.assistant and (kind == "tool_use" or (kind is None and message.tool_call_id)):
        return "tool_call"
    return "text"


def _marks(metadata: dict[str, Any]) -> list[str]:
    marks: list[str] = []
    for flag, word in MARKS.items():
        if metadata.get(flag) and word not in marks:
            marks.append(word)
    return marks


def _attachments(metadata: dict[str, Any]) -> list[str]:
    """Images, documents and other blocks a message held, named (their data stays in the store)."""
    named = []
    for block in metadata.get("blocks") or []:
        if not isinstance(block, dict):
            continue
        source = block.get("source")
        detail = (
            block.get("title")
            or block.get("tool_name")
            or block.get("name")
            or (source.get("media_type") if isinstance(source, dict) else None)
        )
        kind = str(block.get("type") or "block")
        named.append(f"{kind} ({detail})" if isinstance(detail, str) and detail else kind)
    return named


def _tool_name(message: Message) -> str | None:
    name = message.metadata.get("tool_name") or message.metadata.get("tool")
    if isinstance(name, str) and name:
        return name
    head = message.content.split(None, 1)
    return head[0] if head and head[0].isidentifier() else None


def turns(messages: list[Message]) -> list[Turn]:
    """The messages of a page as turns, each tool result placed under the call it answers on the page."""
    shown: list[Turn] = []
    calls: dict[str, Turn] = {}
    for message in messages:
        kind = _kind(message)
        turn = Turn(message, kind, _marks(message.metadata), _attachments(message.metadata))
        if kind == "tool_call":
            turn.tool_name = _tool_name(message)
            if message.tool_call_id:
                calls[message.tool_call_id] = turn
        elif kind == "tool_result" and message.tool_call_id in calls:
            calls[message.tool_call_id].results.append(turn)
            continue
        shown.append(turn)
    return shown


@dataclass
class ConversationPage:
    """One page of a thread's conversation, and what it highlights."""

    thread: Thread
    page: int
    pages: int
    turns: list[Turn]
    #: The seq range of the summary whose messages are highlighted, if one is.
    highlight: tuple[int, int] | None = None
    #: The message the page was opened at (its details open), if any.
    focus: str | None = None

    def highlighted(self, message: Message) -> bool:
        """Whether a message lies in the highlighted summary's range."""
        return self.highlight is not None and self.highlight[0] <= message.seq <= self.highlight[1]

    def opened(self, turn: Turn) -> bool:
        """Whether a folded turn is shown open: the page was opened at it or at one of its results."""
        return self.focus is not None and (
            turn.message.id == self.focus or any(result.message.id == self.focus for result in turn.results)
        )


async def conversation_page(
    store: MemoryStore,
    partition: str,
    thread: Thread,
    page: int,
    *,
    summary: Summary | None = None,
    focus: str | None = None,
) -> ConversationPage:
    """Read one page of ``thread`` (`PAGE_SIZE` seqs), highlighting ``summary``'s messages."""
    first = (page - 1) * PAGE_SIZE
    messages = await store.get_messages(partition, thread.id, first_seq=first, last_seq=first + PAGE_SIZE - 1)
    return ConversationPage(
        thread=thread,
        page=page,
        pages=page_count(thread),
        turns=turns(messages),
        highlight=(summary.first_seq, summary.last_seq) if summary is not None else None,
        focus=focus,
    )
