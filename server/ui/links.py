"""Where things are in the viewer: the URL of a thread's page, a message on it, a summary's messages.

Kept apart from the routes so every page builder links the same way. Names travel in
the query string (``p`` partition, ``t`` thread, ``page``, ``s`` summary, ``m`` the
message opened at), since thread ids may hold any character; the fragment
(``#msg-<id>``, ``#seq-<n>``) scrolls the browser to the message, with no script.
"""

from __future__ import annotations

from urllib.parse import urlencode

from palimpsest.graph_schema.models import MessageRef, Summary
from palimpsest.server.ui.conversation import page_of


def thread_url(
    partition: str,
    thread_id: str,
    anchor: str | None = None,
    *,
    page: int | None = None,
    summary: str | None = None,
    focus: str | None = None,
) -> str:
    """A thread's page: at a page, with a summary's messages highlighted, opened at a message."""
    query = {"p": partition, "t": thread_id}
    if page is not None and page > 1:
        query["page"] = str(page)
    if summary is not None:
        query["s"] = summary
    if focus is not None:
        query["m"] = focus
    return f"/ui/thread?{urlencode(query)}" + (f"#{anchor}" if anchor else "")


def message_url(partition: str, thread_id: str, seq: int, message_id: str) -> str:
    """A message on its page of the conversation, opened (a folded call shows its result) and scrolled to."""
    return thread_url(partition, thread_id, f"msg-{message_id}", page=page_of(seq), focus=message_id)


def ref_url(ref: MessageRef) -> str:
    """`message_url` of a message known by its ref."""
    return message_url(ref.partition, ref.thread_id, ref.seq, ref.id)


def summary_url(summary: Summary) -> str:
    """A summary's messages highlighted in the conversation, scrolled to its first one, its checkpoint beside."""
    return thread_url(
        summary.partition,
        summary.thread_id,
        f"seq-{summary.first_seq}",
        page=page_of(summary.first_seq),
        summary=summary.id,
    )


def partition_url(partition: str) -> str:
    """A partition's page."""
    return f"/ui/partition?{urlencode({'p': partition})}"


def project_url(partition: str, project: str | None) -> str:
    """A project's facts and start memory (``project`` None: the whole partition's)."""
    return f"/ui/project?{urlencode({'p': partition, 'project': project or ''})}"
