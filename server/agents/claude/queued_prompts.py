"""Prompts typed while Claude Code worked, kept where the transcript holds them only as queue operations.

A prompt typed while the agent works goes to a queue, and the transcript records the
queue's steps as ``queue-operation`` lines: ``enqueue`` (with the prompt as ``content``),
then ``dequeue`` (the turn ended; the prompt follows as a user line of its own) or
``remove`` (the running turn absorbed it), each taking the oldest prompt, or the one whose
text it repeats as ``content`` (later versions do). What Claude Code writes after a ``remove``
changed over its versions:

- 2.1.17 and 2.1.76 (sessions of others seen here) write nothing more: the model answers
  the prompt ("The user wants me to add a comment to PR #91") and the ``enqueue`` is the
  only line holding the user's words. Skipped as bookkeeping, they were lost.
- Later ones write an ``attachment`` of type ``queued_command`` with the prompt right after
  the ``remove``, which `transcript` reads as the user's line.

So a removed prompt becomes a user line (marked ``queued``) unless the line right after
the ``remove`` is that attachment. Its id is built from the session and the ``enqueue``'s
timestamp, the same on every read, so reading the file again adds nothing. A read that
ends before a prompt's fate is known ends at its ``enqueue`` instead: the next read
starts there and decides (the lines read meanwhile are stored already, under their own
ids), unless `SETTLED_WITHIN` lines passed without it: then it is given up. ``popAll``
takes the queue back into the input box, to be sent again. Queued texts that are no
person's prompt stay bookkeeping: a background task's notice (``<task-notification>``,
or the JSON one of early 2.1 versions) and a slash command, which runs as lines of its
own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from palimpsest.server.feeds.transcripts import FilePosition

#: The ``type`` of the lines recording the prompt queue.
QUEUE_OPERATION = "queue-operation"
#: Lines within which a queued prompt leaves the queue (a long command's progress lines come between: one a
#: second); a read that ends sooner waits for it, one that goes on longer gives it up.
SETTLED_WITHIN = 2000


@dataclass
class _Typed:
    """A prompt put in the queue, and where its ``enqueue`` line starts."""

    text: str
    session: str
    timestamp: str | None
    at: FilePosition
    #: Whether a person typed it (a task's notice or a slash command is queued too, and leaves the queue in turn).
    person: bool
    #: How many lines the read had passed when it was queued.
    line: int

    def as_user_line(self, cwd: str | None) -> dict[str, Any]:
        """The user line the prompt would have been, in the shape `transcript` reads."""
        line: dict[str, Any] = {
            "type": "user",
            "uuid": f"{self.session}:queued:{self.timestamp or self.at.line}",
            "sessionId": self.session,
            "message": {"role": "user", "content": self.text},
        }
        if self.timestamp is not None:
            line["timestamp"] = self.timestamp
        if cwd is not None:
            line["cwd"] = cwd
        return line


@dataclass
class QueuedPrompts:
    """The queue's state over one read of a transcript, oldest prompt first."""

    waiting: list[_Typed] = field(default_factory=list)
    absorbed: list[_Typed] = field(default_factory=list)
    lines: int = 0

    def operation(self, value: dict[str, Any], at: FilePosition) -> None:
        """A ``queue-operation`` line starting at ``at``."""
        kind = value.get("operation")
        if kind == "enqueue":
            text, session, timestamp = value.get("content"), value.get("sessionId"), value.get("timestamp")
            text = text if isinstance(text, str) else ""
            person = _typed_by_a_person(text) and isinstance(session, str) and bool(session)
            stamp = timestamp if isinstance(timestamp, str) else None
            session = session if isinstance(session, str) else ""
            self.waiting.append(_Typed(text, session, stamp, at, person, self.lines))
        elif kind == "popAll":  # taken back into the input box, to be sent again as a prompt of its own
            self.waiting = []
        elif kind in ("dequeue", "remove") and self.waiting:
            text = value.get("content")
            named = next((index for index, typed in enumerate(self.waiting) if typed.text == text), 0)
            first = self.waiting.pop(named)  # the prompt it names (later versions), else the oldest
            if kind == "remove" and first.person:
                self.absorbed.append(first)

    def before(self, held: object, cwd: str | None) -> list[dict[str, Any]]:
        """The absorbed prompts to read as user lines before the line after their ``remove``.

        ``held`` is the prompt that line holds as the user's (the attachment of later
        versions), which is not read twice. A prompt still waiting after `SETTLED_WITHIN`
        lines is given up: a queue step this reader does not know took it, and no later read
        should start that far back.
        """
        self.lines += 1
        self.waiting = [typed for typed in self.waiting if self.lines - typed.line <= SETTLED_WITHIN]
        if not self.absorbed:
            return []
        found = [typed.as_user_line(cwd) for typed in self.absorbed if typed.text != held]
        self.absorbed = []
        return found

    def unsettled(self) -> FilePosition | None:
        """Where the oldest prompt whose fate this read did not see starts, if any: the next read starts there."""
        starts = [typed.at for typed in (*self.absorbed, *self.waiting) if typed.person]
        return min(starts, key=lambda position: position.offset) if starts else None


def _typed_by_a_person(text: str) -> bool:
    """Whether a queued text is a person's prompt, not a task's notice or a slash command."""
    stripped = text.strip()
    if not stripped or stripped.startswith(("<task-notification>", "/")):
        return False
    if stripped.startswith("{"):
        try:
            return not isinstance(json.loads(stripped), dict)
        except ValueError:
            return True
    return True
