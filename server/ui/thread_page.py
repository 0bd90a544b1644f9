"""A thread's page: the session named and dated, one page of its conversation, its summary DAG beside.

Why the digests are checked only on threads up to `VERIFY_INLINE` messages: the
check recomputes every message's sha256 and every summary's digest from the whole
thread (``doctor``'s invariant 4), about 35 ms per thousand messages on SQLite, and a
page must stay quick at ten thousand. A longer thread's DAG is drawn from the stored
summaries alone (one ``summary_dag`` read) and says its digests were not checked
there, and its side table lists only the summaries over the page shown; its
``/ui/verify`` page runs the full check and lists them all.

Opened at a summary (``s``), the page shows the summary's checkpoint in the side panel
and highlights its messages on the page its first one is on; opened at a message
(``m``), on that message's page with its folded call open.
"""

from __future__ import annotations

from dataclasses import dataclass

from palimpsest.graph_schema.errors import NotFound
from palimpsest.graph_schema.models import Summary
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.ui.conversation import PAGE_SIZE, ConversationPage, conversation_page, page_of, parse_page
from palimpsest.server.ui.links import summary_url
from palimpsest.server.ui.sessions import SessionCache, SessionRow
from palimpsest.server.ui.views import SummaryDetail, SummaryNode, ThreadDag, thread_dag

#: Threads of at most this many messages have their digests checked on their page.
VERIFY_INLINE = 2_000


@dataclass
class ThreadPage:
    """What the thread page shows."""

    partition: str
    session: SessionRow
    dag: ThreadDag
    conversation: ConversationPage
    opened: SummaryDetail | None

    def table_levels(self) -> dict[int, list[SummaryNode]]:
        """The summaries the side table lists: all of them, or on a long thread those over this page."""
        if self.dag.checked:
            return self.dag.levels
        first = (self.conversation.page - 1) * PAGE_SIZE
        last = first + PAGE_SIZE - 1
        over = {
            level: [node for node in nodes if node.summary.first_seq <= last and node.summary.last_seq >= first]
            for level, nodes in self.dag.levels.items()
        }
        return {level: nodes for level, nodes in over.items() if nodes}

    def summary_urls(self) -> dict[str, str]:
        """Where each drawn summary leads: its messages highlighted, its checkpoint beside."""
        return {node.summary.id: summary_url(node.summary) for nodes in self.dag.levels.values() for node in nodes}


async def drawn_dag(store: MemoryStore, partition: str, thread_id: str, message_count: int) -> ThreadDag:
    """A thread's DAG from its stored summaries only, digests not checked (see the module docstring)."""
    dag = await store.summary_dag(partition, thread_id)
    thread = await store.get_thread(partition, thread_id)
    levels: dict[int, list[SummaryNode]] = {}
    for summary in sorted(dag.nodes, key=lambda node: (-node.level, node.first_seq)):
        levels.setdefault(summary.level, []).append(SummaryNode(summary=summary, verified=True))
    covered = sorted((node.first_seq, node.last_seq) for node in dag.nodes if node.level == 1)
    uncovered: list[tuple[int, int]] = []
    next_seq = 0
    for first, last in covered:
        if first > next_seq:
            uncovered.append((next_seq, first - 1))
        next_seq = max(next_seq, last + 1)
    if next_seq < message_count:
        uncovered.append((next_seq, message_count - 1))
    return ThreadDag(thread=thread, levels=levels, uncovered=uncovered, message_count=message_count, checked=False)


def _detail(dag: ThreadDag, summary: Summary) -> SummaryDetail:
    nodes = {node.summary.id: node for level in dag.levels.values() for node in level}
    node = nodes.get(summary.id, SummaryNode(summary=summary, verified=True))
    children = sorted(
        (nodes[child].summary for child in summary.child_ids if child in nodes), key=lambda child: child.first_seq
    )
    return SummaryDetail(node=node, child_summaries=children)


async def thread_page(
    store: MemoryStore,
    cache: SessionCache,
    partition: str,
    thread_id: str,
    *,
    page: str | None,
    summary_id: str | None,
    focus: str | None,
) -> ThreadPage:
    """The page of a thread, at a page, a summary or a message.

    Raises:
        NotFound: if the thread, or the summary or message named, is not in it.
        InvalidInput: for a page that is not one of the thread's.
    """
    thread = await store.get_thread(partition, thread_id)
    session = await cache.row(store, thread)
    if thread.message_count <= VERIFY_INLINE:
        dag = await thread_dag(store, partition, thread_id)
    else:
        dag = await drawn_dag(store, partition, thread_id, thread.message_count)
    summary = None
    number = parse_page(page, thread)
    if summary_id:
        summary = await store.get_summary(partition, summary_id)
        if summary.thread_id != thread.id:
            raise NotFound("summary", summary_id)
        number = number if page else page_of(summary.first_seq)
    if focus:
        message = await store.get_message(partition, focus)
        if message.thread_id != thread.id:
            raise NotFound("message", focus)
        number = number if page or summary else page_of(message.seq)
    conversation = await conversation_page(store, partition, thread, number, summary=summary, focus=focus)
    return ThreadPage(partition, session, dag, conversation, _detail(dag, summary) if summary else None)
