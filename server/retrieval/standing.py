"""Where an earlier session stands: when it happened, what it set out to do, what it did, how it ended, what is open.

Read from the session's own messages, its last part included (a summary covers only
what compaction has reached, and a session's last messages say how it ended), by the
structure `scheduler/session_facts.py` reads: the user's requests, the files written,
the commands and how their last run ended, the todo list in its last state. Rules:

- Only work counts: messages an agent injected, turns that never reached the model
  (`session_facts.is_not_work`) are left out; a session with no reply from the model and
  no tool call is no work at all (`Standing.is_work` is false), and is never presented
  as earlier work, though it stays in the store.
- Times are the messages' own (the source's), never when they were stored.
- A step is open only if nothing later finished it: the todo list is read to its last
  state; a command is a failure only if its last run failed; a checkpoint's next steps
  count only when nothing happened after the checkpoint. `close_finished` then drops
  what a later session of the project finished (a todo it marked done, a command it ran
  to a pass).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from palimpsest.graph_schema.models import Message, Role, Summary, Thread
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.extractive import parse_checkpoint
from palimpsest.scheduler.session_facts import (
    CommandRun,
    FileChange,
    clip,
    extract_facts,
    is_not_work,
    tool_call,
)

#: Most messages read from the end of a session (about 30 ms on SQLite; an older first request
#: then comes from its summary, and a todo list older than them is not read).
MESSAGES_READ = 800
#: Longest line of a session's digest, in characters.
LINE_CHARS = 240
#: Files named in "did" before "and N more".
FILES_NAMED = 5
#: Open steps named per session.
OPEN_NAMED = 5
#: Statuses of a command whose last run failed.
_PASSED = ("ok", "exit 0", "running in the background", "no result yet")


@dataclass
class Standing:
    """Where one session stands."""

    thread: Thread
    first_at: datetime | None = None
    last_at: datetime | None = None
    branch: str | None = None
    cwd: str | None = None
    goal: str | None = None
    did: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    ended: str | None = None
    open_steps: list[str] = field(default_factory=list)
    #: Todo items this session marked done and commands whose last run passed (to close older steps).
    finished: set[str] = field(default_factory=set)
    tokens: int = 0
    summary_id: str | None = None
    replies: int = 0
    tool_calls: int = 0
    last_message_id: str | None = None

    @property
    def is_work(self) -> bool:
        """Whether the session did anything: a reply from the model, or a tool call."""
        return self.replies > 0 or self.tool_calls > 0


def _key(text: str) -> str:
    """How two steps are compared: case and spacing aside."""
    return " ".join(text.lower().split())


async def read_standing(store: MemoryStore, partition: str, thread: Thread) -> Standing:
    """Where ``thread`` stands, from its last `MESSAGES_READ` messages and the summaries above its ends.

    The highest summary over its first message gives its objective when the first
    request is older than the messages read; the one over its last message (if
    compaction reached it) gives the id to expand and, without a todo list, the
    checkpoint's next steps: nothing happened after them.
    """
    first = max(0, thread.message_count - MESSAGES_READ)
    messages = await store.get_messages(partition, thread.id, first_seq=first, limit=MESSAGES_READ)
    work = [message for message in messages if not is_not_work(message)]
    standing = Standing(thread)
    standing.tokens = sum(message.tokens for message in messages)
    if not work:
        return standing
    standing.first_at, standing.last_at = work[0].created_at, work[-1].created_at
    standing.last_message_id = work[-1].id
    for message in reversed(work):
        branch, cwd = message.metadata.get("git_branch"), message.metadata.get("cwd")
        if isinstance(branch, str) and branch and standing.branch is None:
            standing.branch = branch
        if isinstance(cwd, str) and cwd and standing.cwd is None:
            standing.cwd = cwd
    facts = extract_facts(work)
    standing.tool_calls = facts.tool_calls
    replies = [message for message in work if _is_reply(message)]
    standing.replies = len(replies)
    opening = messages[0] if first == 0 else (await store.get_messages(partition, thread.id, limit=1))[0]
    chains = await store.covered_by([opening.id, work[-1].id])
    head = await _summary(store, partition, chains.get(opening.id, []))
    tail = await _summary(store, partition, chains.get(work[-1].id, []))
    pointer = tail or head
    standing.summary_id = pointer.id if pointer is not None else None
    if first == 0 and facts.requests:
        standing.goal = clip(facts.requests[0], LINE_CHARS)
    elif head is not None and parse_checkpoint(head.text).sections.get("Objective"):
        standing.goal = clip(parse_checkpoint(head.text).sections["Objective"][0], LINE_CHARS)
    elif facts.requests:
        standing.goal = clip(facts.requests[0], LINE_CHARS)
    standing.modified = list(facts.modified)
    standing.did = _did(facts.modified, facts.commands, facts.todo_done)
    if replies:
        standing.ended = clip(replies[-1].content, LINE_CHARS)
    if facts.test_state:
        standing.ended = (standing.ended + " " if standing.ended else "") + f"(last test run: {facts.test_state})"
    failing = _still_failing(list(facts.commands.values()))
    standing.open_steps = [f"todo: {item}" for item in facts.todo_open]
    standing.open_steps += [f"`{run.command}` last ended {run.status}" for run in failing]
    if not facts.todo_open and not facts.todo_done and tail is not None:  # nothing happened after the checkpoint
        standing.open_steps += parse_checkpoint(tail.text).sections.get("Next steps", [])
    standing.finished = {_key(item) for item in facts.todo_done}
    standing.finished |= {_key(f"`{run.command}`") for run in facts.commands.values() if run.status in _PASSED[:2]}
    return standing


def _still_failing(runs: list[CommandRun]) -> list[CommandRun]:
    """Commands whose last run failed and that no later passing command redid.

    ``runs`` are in the order of their last run. A later pass of the same arguments
    under another program (``python x.py`` failing, ``python3 x.py`` passing) redid it.
    """
    failing: list[CommandRun] = []
    for index, run in enumerate(runs):
        if run.status in _PASSED:
            continue
        arguments = run.command.split()[1:]
        redone = any(
            later.status in _PASSED[:2] and arguments and later.command.split()[1:] == arguments
            for later in runs[index + 1 :]
        )
        if not redone:
            failing.append(run)
    return failing


def close_finished(standings: Sequence[Standing]) -> None:
    """Drop the open steps a later session finished (``standings`` newest first)."""
    finished: set[str] = set()
    for standing in standings:
        standing.open_steps = [step for step in standing.open_steps if not _done(step, finished)]
        finished |= standing.finished


def _done(step: str, finished: set[str]) -> bool:
    key = _key(step.removeprefix("todo: "))
    command = key.split(" last ended ", 1)[0]
    return key in finished or command in finished


def _is_reply(message: Message) -> bool:
    """The assistant's own words to the user (not a tool call, not thinking)."""
    if message.role is not Role.assistant or message.metadata.get("kind") not in (None, "text"):
        return False
    return tool_call(message) is None and bool(message.content.strip())


def _did(modified: dict[str, FileChange], commands: dict[str, CommandRun], todo_done: list[str]) -> list[str]:
    """What the session did, in a few phrases: files changed, commands run, todos finished."""
    parts: list[str] = []
    if modified:
        names = [path.rsplit("/", 1)[-1] for path in modified]
        more = f" and {len(names) - FILES_NAMED} more" if len(names) > FILES_NAMED else ""
        parts.append(
            f"changed {len(names)} file{'s' if len(names) > 1 else ''} ({', '.join(names[:FILES_NAMED])}{more})"
        )
    if commands:
        parts.append(f"ran {len(commands)} distinct command{'s' if len(commands) > 1 else ''}")
    if todo_done:
        parts.append(f"finished {len(todo_done)} todo{'s' if len(todo_done) > 1 else ''}")
    return parts


async def _summary(store: MemoryStore, partition: str, chain: list[str]) -> Summary | None:
    """The highest summary of a ``covered_by`` chain (lowest level first), if any."""
    return await store.get_summary(partition, chain[-1]) if chain else None
