"""Memory handed back when an agent's session starts, so a new session does not start blank.

An agent only searches memory if it thinks to; a session-start hook hands it what the
project's earlier sessions left without being asked. Two cases:

- a new or cleared session (`project_memory`): the project's current facts, the newest
  sessions' top summaries (each with its id, so ``expand_summary`` gives back the
  messages), their open next steps, and one line on how to grep and expand;
- a resumed session, or one the agent just compacted itself (`session_memory` with
  ``resume``): that thread's ``assemble_context``, so the agent gets exact pointers back
  to what its own compaction dropped.

Both fit ``PALIMPSEST_STARTUP_BUDGET`` estimated tokens (and, for a rules file, a cap in
characters). Items are whole or left out, never cut mid-way, and everything is ordered
by stored values only, so the same memory gives the same bytes: the agent's prompt
cache, which keys on the exact prefix, stays warm from one session to the next.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from palimpsest.graph_schema.errors import NotFound
from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import Fact, Role, Summary, Thread
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.extractive import parse_checkpoint

#: Earlier sessions looked at, newest first.
STARTUP_SESSIONS = 5
#: Current facts looked at, newest first.
STARTUP_FACTS = 30
#: Threads of the partition listed to find the project's sessions.
THREADS_LISTED = 500
#: Longest one-line digest of a session or fact, in characters (its id leads to the rest).
LINE_CHARS = 300
#: Next steps taken from each session's top summary.
STEPS_PER_SESSION = 3
#: A Windsurf rules file is cut off past 6,000 characters; stay under.
RULES_CHARS = 5_800
HOW_TO = (
    "Search all of it with grep_memories(query) or recall(query); expand_summary(id) gives back "
    "the exact messages a summary covers, describe_summary(id) says what it spans.\n"
)


def _one_line(text: str, limit: int = LINE_CHARS) -> str:
    """Text on one line, at most ``limit`` characters, cut at a word with an ellipsis."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rsplit(" ", 1)[0] + "…"


def _digest(summary: Summary) -> tuple[str, list[str]]:
    """What a top summary says in one line, and its next steps."""
    checkpoint = parse_checkpoint(summary.text)
    parts = [
        item for name in ("Objective", "Current state", "Completed") for item in checkpoint.sections.get(name, [])[:1]
    ]
    line = " — ".join(parts) if parts else (checkpoint.lead or summary.text)
    return _one_line(line), checkpoint.sections.get("Next steps", [])[:STEPS_PER_SESSION]


async def _top_summary(store: MemoryStore, partition: str, thread: Thread) -> Summary | None:
    """The thread's highest, newest frontier summary."""
    frontier = [item for item in await store.frontier(partition, thread.id) if item.kind == "summary"]
    if not frontier:
        return None
    top = max(frontier, key=lambda item: (item.level, item.last_seq))
    return await store.get_summary(partition, top.id)


async def _first_request(store: MemoryStore, partition: str, thread: Thread) -> str | None:
    """A session nothing summarizes yet, by its first user message."""
    for message in await store.get_messages(partition, thread.id, limit=20):
        if message.role is Role.user and not message.metadata.get("meta") and not message.metadata.get("injected"):
            return f"first request: {_one_line(message.content, 200)} (message {message.id})"
    return None


class _Budget:
    """Adds whole lines while the text stays within the token budget and character cap."""

    def __init__(self, tokens: int, chars: int | None) -> None:
        self.tokens, self.chars = tokens, chars
        self.text = ""
        self.left_out = 0

    def fits(self, more: str) -> bool:
        candidate = self.text + more
        return estimate_tokens(candidate) <= self.tokens and (self.chars is None or len(candidate) <= self.chars)

    def add(self, line: str) -> bool:
        if self.fits(line):
            self.text += line
            return True
        self.left_out += 1
        return False

    def section(self, heading: str, lines: Sequence[str]) -> None:
        """A heading and as many of its lines, in order, as fit (none: no heading)."""
        if not lines or not self.fits(heading + lines[0]):
            self.left_out += len(lines)
            return
        self.text += heading
        for index, line in enumerate(lines):
            if not self.add(line):
                self.left_out += len(lines) - index - 1
                return


async def project_memory(
    store: MemoryStore,
    *,
    partition: str,
    project: str | None,
    budget_tokens: int,
    max_chars: int | None = None,
    exclude_thread: str | None = None,
) -> str:
    """What the project's earlier sessions left, within the budget; empty when they left nothing.

    Args:
        store: The store to read (nothing is written).
        partition: The agent's partition.
        project: The project (``None``: every session of the partition).
        budget_tokens: Most estimated tokens of the whole text.
        max_chars: Most characters of the whole text, if capped.
        exclude_thread: The session starting now, left out of its own memory.
    """
    threads = [
        thread
        for thread in await store.list_threads(partition, limit=THREADS_LISTED)
        if (project is None or thread.project == project) and thread.id != exclude_thread and thread.message_count
    ]
    threads.sort(key=lambda thread: (thread.updated_at, thread.id), reverse=True)
    facts: list[Fact] = []
    if threads:
        facts = await store.list_facts(partition, project=project, current_only=True, limit=STARTUP_FACTS)
    facts.sort(key=lambda fact: (fact.created_at, fact.id), reverse=True)
    sessions: list[str] = []
    steps: list[str] = []
    for thread in threads[:STARTUP_SESSIONS]:
        when = thread.updated_at.strftime("%Y-%m-%d %H:%M")
        summary = await _top_summary(store, partition, thread)
        if summary is not None:
            line, next_steps = _digest(summary)
            sessions.append(f"- {thread.id} ({when}, {thread.message_count} messages): {line} [summary {summary.id}]\n")
            steps += [f"- {_one_line(step)} (session {thread.id})\n" for step in next_steps if step not in steps]
        elif (request := await _first_request(store, partition, thread)) is not None:
            sessions.append(f"- {thread.id} ({when}, {thread.message_count} messages): {request}\n")
    if not sessions and not facts:
        return ""
    where = f" of project {project}" if project else ""
    budget = _Budget(budget_tokens, max_chars)
    if not budget.add(f"# Memory{where} from earlier sessions (Palimpsest)\n" + HOW_TO):
        return ""
    budget.section("\n## Current facts\n", [f"- {_one_line(fact.text)} (fact {fact.id})\n" for fact in facts])
    budget.section("\n## Newest sessions, newest first\n", sessions)
    budget.section("\n## Open next steps\n", steps)
    return budget.text


async def session_memory(
    store: MemoryStore, *, partition: str, thread_id: str, project: str | None, resume: bool, budget_tokens: int
) -> str:
    """The memory a starting session gets: its own thread's context when resuming, else the project's.

    A resumed or self-compacted session whose thread holds nothing yet gets the
    project's memory instead, like a new one.
    """
    if resume:
        from palimpsest.server.retrieval.context import MAX_BUDGET, MIN_BUDGET, assemble_context

        try:
            assembled = await assemble_context(
                store, thread_id, partition=partition, budget_tokens=min(max(budget_tokens, MIN_BUDGET), MAX_BUDGET)
            )
        except NotFound:
            assembled = None
        if assembled is not None and assembled.text:
            return assembled.text
    return await project_memory(
        store, partition=partition, project=project, budget_tokens=budget_tokens, exclude_thread=thread_id
    )


def write_rules(path: Path, memory: str) -> bool:
    """Write memory as an always-on Windsurf rule, only when it changed; whether it wrote.

    Replaced atomically (a temporary file renamed over it), so Cascade never reads half a file.
    """
    text = "---\ntrigger: always_on\n---\n\n" + (
        memory or "# Memory from earlier sessions (Palimpsest)\n\nNothing yet.\n"
    )
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".palimpsest-", suffix=".md")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, path)
    return True
