"""Where an earlier session stands: when it happened, what was asked, what was done, how it ended, what is open.

Read from the session's own messages, its last part included (a summary covers only
what compaction has reached, and a session's last messages say how it ended), as a
conversation (`scheduler/session_reading.py`): each distinct request of the user and what
was done for it, the files really changed, the true end state with the last substantive
conclusion, and what is still open. Rules:

- Only work counts: messages an agent injected, turns that never reached the model
  (`session_facts.is_not_work`) are left out; a session with no reply from the model and
  no tool call is no work at all (`Standing.is_work` is false), and is never presented
  as earlier work, though it stays in the store.
- Times are the messages' own (the source's), never when they were stored.
- A long session is read from its last `MESSAGES_READ` messages; its first requests then
  come from its first `OPENING_READ` messages, or, failing them, from the objective of the
  summary over its first message.
- A step is open only if nothing later finished it: the reader reconciles the todo list
  with what followed it; a checkpoint's next steps count only when nothing happened after
  the checkpoint. `close_finished` then drops what a later session of the project finished
  (a todo it marked done, a check it ran to a pass, a commit or a push for work an earlier
  one left uncommitted or unpushed).
- With a model configured, maintenance may have stored a model's reading of the session
  (`scheduler/model_reading.py`); when it covers the thread's last message, its sections
  replace the reader's (`_model_reading`). Nothing here calls a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from palimpsest.graph_schema.models import Message, Summary, Thread
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.extractive import parse_checkpoint
from palimpsest.scheduler.git_progress import UNCOMMITTED, UNPUSHED
from palimpsest.scheduler.model_reading import stored_reading
from palimpsest.scheduler.session_facts import clip, is_not_work
from palimpsest.scheduler.session_reading import BRIEF_CHARS, Ask, Ending, read_session

#: Most messages read from the end of a session (an older todo list is not read; about 0.3 s on SQLite).
MESSAGES_READ = 2000
#: Messages read from the start of a session longer than that, for its first requests.
OPENING_READ = 60
#: Longest objective taken from a summary, in characters.
LINE_CHARS = 240


@dataclass
class Standing:
    """Where one session stands."""

    thread: Thread
    first_at: datetime | None = None
    last_at: datetime | None = None
    branch: str | None = None
    cwd: str | None = None
    asks: list[Ask] = field(default_factory=list)
    did: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    ending: Ending | None = None
    open_steps: list[str] = field(default_factory=list)
    #: Todo items this session marked done and checks whose last run passed (to close older steps).
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


#: Marks of a later session's commit and push: they settle an earlier session's work left out of git.
COMMITTED, PUSHED = "\x00committed", "\x00pushed"


def _key(text: str) -> str:
    """How two steps are compared: case and spacing aside."""
    return " ".join(text.lower().split())


async def read_standing(store: MemoryStore, partition: str, thread: Thread) -> Standing:
    """Where ``thread`` stands, from its last `MESSAGES_READ` messages and the summaries above its ends.

    The highest summary over its first message gives its objective when its first
    requests are older than the messages read and not in its first `OPENING_READ`; the
    one over its last message (if compaction reached it) gives the id to expand and, when
    the session kept no todo list, the checkpoint's next steps: nothing happened after them.
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
    reading = read_session(messages)
    standing.tool_calls, standing.replies = reading.tool_calls, reading.replies
    opening = messages[0] if first == 0 else (await store.get_messages(partition, thread.id, limit=1))[0]
    chains = await store.covered_by([opening.id, work[-1].id])
    head = await _summary(store, partition, chains.get(opening.id, []))
    tail = await _summary(store, partition, chains.get(work[-1].id, []))
    pointer = tail or head
    standing.summary_id = pointer.id if pointer is not None else None
    standing.asks = reading.asks
    if first > 0:
        standing.asks = await _opening_asks(store, partition, thread, head) + standing.asks
        standing.first_at = min(standing.first_at, opening.created_at) if standing.first_at else opening.created_at
    standing.modified = list(reading.changed)
    standing.did = reading.did
    standing.ending = reading.ending
    standing.open_steps = list(reading.open_items)
    todo_kept = any(step.startswith("todo: ") for step in reading.open_items) or bool(reading.finished)
    if not todo_kept and tail is not None:  # the summary covers the last message: nothing happened after it
        standing.open_steps += parse_checkpoint(tail.text).sections.get("Next steps", [])
    standing.finished = {_key(item) for item in reading.finished}
    standing.finished |= {marker for marker, done in ((COMMITTED, reading.committed), (PUSHED, reading.pushed)) if done}
    return await _model_reading(store, partition, standing, messages)


async def _model_reading(store: MemoryStore, partition: str, standing: Standing, messages: list[Message]) -> Standing:
    """The model's reading in place of the deterministic one, when maintenance stored one that covers the last message.

    Its requests, what it did (decisions and failed attempts included), its end state,
    files and open items and next steps replace the reader's; times, branch, size and
    the steps it finished stay read from the messages.
    """
    thread = standing.thread
    reading = stored_reading(await store.session_reading(partition, thread.id), thread.message_count - 1)
    if reading is None:
        return standing
    ids = {message.seq: message.id for message in messages}
    for request in reading.requests:
        if request.seq not in ids:  # a long session's first request, before the messages read
            found = await store.get_messages(partition, thread.id, first_seq=request.seq, limit=1)
            ids.update((message.seq, message.id) for message in found)
    asks = [Ask(r.text, ids.get(r.seq, ""), r.seq, outcome=r.outcome) for r in reading.requests]
    standing.asks = asks or [Ask(reading.objective, standing.last_message_id or "", 0)]
    standing.did = reading.done + [f"decided: {d}" for d in reading.decisions]
    standing.did += [f"failed attempt: {f}" for f in reading.failed_attempts]
    standing.modified = [file.path for file in reading.files]
    end = reading.end_state
    standing.ending = Ending(end.kind, end.conclusion, standing.last_message_id, clip(end.conclusion, BRIEF_CHARS))
    standing.open_steps = list(dict.fromkeys(reading.open_items + reading.next_steps))
    return standing


async def _opening_asks(store: MemoryStore, partition: str, thread: Thread, head: Summary | None) -> list[Ask]:
    """The first requests of a session longer than the messages read: its first messages', else its objective."""
    opening = await store.get_messages(partition, thread.id, limit=OPENING_READ)
    asks = read_session(opening).asks
    if asks:
        return asks
    objective = parse_checkpoint(head.text).sections.get("Objective") if head is not None else None
    return [Ask(clip(objective[0], LINE_CHARS), head.id, 0)] if objective and head is not None else []


def close_finished(standings: Sequence[Standing]) -> None:
    """Drop the open steps a later session finished (``standings`` newest first)."""
    finished: set[str] = set()
    for standing in standings:
        standing.open_steps = [step for step in standing.open_steps if not _done(step, finished)]
        finished |= standing.finished


def _done(step: str, finished: set[str]) -> bool:
    if step.startswith(UNCOMMITTED):
        return COMMITTED in finished
    if step.startswith(UNPUSHED):
        return PUSHED in finished
    key = _key(step.removeprefix("todo: "))
    command = key.split(" still failing", 1)[0].strip("`")
    return key in finished or command in finished


async def _summary(store: MemoryStore, partition: str, chain: list[str]) -> Summary | None:
    """The highest summary of a ``covered_by`` chain (lowest level first), if any."""
    return await store.get_summary(partition, chain[-1]) if chain else None
