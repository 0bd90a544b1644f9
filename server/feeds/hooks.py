"""The one hook runner every agent shares: stdin JSON in, the session's new messages stored, memory out.

Why one runner: ``palimpsest hook claude|codex|windsurf|antigravity|cursor|gemini`` differ only
in what the agent sends and how it wants context back; what a hook promises is the same
for all of them, so it is kept here once:

- the thread is the agent's session id, the partition the agent's (or ``--partition``);
- incremental: each transcript is read from where the last run stopped. That read
  position (byte offset, line number and a `fingerprint` of the file) is kept in the
  store, apart from the messages (`MemoryStore.read_positions`), so a turn of a 100 MB
  session reads only the turn. A file whose stamp (modification time, size) is the one
  read last is not opened; a position that no longer fits the file (it shrank, the
  offset is not at a line start, or its head or the end of the read part changed: a
  rewrite, even to the same size) is dropped and the file read from the start;
- idempotent: every message has a source id fixed by its place in the transcript, so a
  file read twice, or two hook processes racing on one transcript, store each message
  once (the store ignores a ``message_id`` it holds);
- all or nothing: every line is parsed and checked before the first write, so bad input
  leaves the store as it was;
- bounded: a path from the payload is read only if it is a regular file (a symlink to
  one is): ``/dev/zero``, a FIFO, a socket or a directory is refused with one error
  line. One call reads at most ``READ_BYTES`` of new transcript and stops taking lines
  after ``READ_SECONDS``; the position kept ends at the last whole line read, so the
  next call reads the rest (a transcript read whole at every call, Windsurf's or
  ``agy``'s, is refused over ``READ_BYTES`` instead). A last line still being written
  (no newline yet) is left out of the position, so the call that finds it finished
  parses that line alone, and none before it;
- never late: an agent may run its ``Stop`` hook before the turn's end is in its
  transcript (``agy`` writes it seconds later), or for a session it never wrote one for
  (Claude Code on ``claude mcp list``). A missing file is no error; a request with
  ``follow_up_s`` whose thread does not end with the assistant's answer (`answered`)
  says so in ``HookOutcome.follow_up``, and the hook command leaves a detached process
  to catch up (`palimpsest.server.cli.hook_follow_up`); the conversation's next hook
  call reads what is still missing anyway;
- quick: this module imports only what storing needs; what hands memory back
  (`palimpsest.server.retrieval.startup`) is imported only on the events that ask for it.

Each agent's module (``claude_hook``, ``codex_hook``, ``windsurf``, ``antigravity``,
``cursor``, ``gemini``) turns its stdin into a `HookRequest`; `run_hook` does the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat as file_stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.models import NewMessage, ReadPosition, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.feeds.append import FileIngest, append_transcript
from palimpsest.server.feeds.transcripts import (
    MAX_LINE_BYTES,
    FilePosition,
    IngestBatch,
    ParsedTranscript,
    ReadState,
    describe_validation,
    not_regular,
    open_regular,
    project_from_cwd,
)

#: Seconds an agent may take, after its ``Stop``, to finish writing the turn to its transcript:
#: a margin for a last line flushed late (``agy``, which writes the file seconds after, sets its own).
LATE_TRANSCRIPT_S = 10.0
#: Kinds of an assistant message that do not end a turn: a call waits for its result.
_NOT_AN_ANSWER = frozenset({"tool_use", "thinking"})
#: Newest messages of a thread searched for its last answer (system notes after it are skipped).
ANSWER_LOOKBACK = 20
#: Bytes of a file's head, and of the end of its read part, a read position's fingerprint covers.
FINGERPRINT_BYTES = 4096
#: The most bytes of transcript one hook call reads, all files together (and the most it
#: takes on stdin): the longest line a hook reads (``MAX_LINE_BYTES``, 64 MiB), so any line
#: fits in one call. A turn adds far less; a session ingested for the first time, or a
#: backlog, is read over the next calls from the positions kept.
READ_BYTES = MAX_LINE_BYTES
#: Seconds after which one hook call takes no further line of a transcript it can resume:
#: agents run hooks on every turn and wait for them, and storing what was read takes a
#: few times as long as reading it (a backlog of small lines: about four times, on SQLite),
#: so a second of reading keeps the call to a few seconds. The next call reads on.
READ_SECONDS = 1.0

MemoryKind = Literal["project", "thread"]


class IncrementalParser(Protocol):
    """A transcript parser that starts at a position and says where it stopped."""

    def __call__(
        self, path: Path, *, partition: str, start: FilePosition | None, state: ReadState
    ) -> ParsedTranscript: ...


@dataclass
class TranscriptFile:
    """A file a hook reads: the agent's transcript, or one found beside it (a subagent's)."""

    path: Path
    parse: IncrementalParser
    #: Found by listing a directory: skipped when ``is_transcript`` says it holds none.
    is_transcript: Callable[[Path], bool] | None = None
    #: Read from its first line at every call (the agent rewrites it): stopping early
    #: would leave its end unread at every call, so no deadline applies, and one over
    #: ``READ_BYTES`` is refused.
    reads_whole: bool = False


@dataclass
class HookRequest:
    """What one hook call asks for, whatever the agent."""

    agent: str
    event: str
    thread_id: str
    cwd: str | None = None
    transcripts: list[TranscriptFile] = field(default_factory=list)
    #: Messages the payload itself carries (a prompt, a response), ids already fixed.
    inline: list[NewMessage] = field(default_factory=list)
    #: Memory to hand back: the project's earlier sessions, or this thread's context.
    memory: MemoryKind | None = None
    #: How the agent wants it on stdout (``None``: the agent cannot take it there).
    reply: Callable[[str], str] | None = None
    #: Where to write the project's memory as a rules file (Windsurf, which cannot inject).
    rules_file: Path | None = None
    #: Seconds the agent may take to finish writing its transcript after this hook returns
    #: (every agent's ``Stop``; ``agy`` writes it after ``Stop``, often seconds later): when
    #: the turn's end is not stored yet, a detached process catches up on what arrives
    #: within them without keeping the agent waiting. 0: the transcript is complete now.
    follow_up_s: float = 0.0

    @property
    def project(self) -> str | None:
        """The project the session works on: the last component of its working directory."""
        return project_from_cwd(self.cwd)


@dataclass
class HookOutcome:
    """What a hook run did: the ingest report, and what to print for the agent."""

    report: FileIngest
    reply: str | None = None
    #: The turn's end is not stored yet though the agent may still write it: catch up
    #: for ``follow_up_s`` seconds after the hook returns (`palimpsest.server.cli.hook_follow_up`).
    follow_up: bool = False


def text_field(payload: dict[str, Any], *keys: str, required: bool = False) -> str | None:
    """The first of ``keys`` holding a non-empty string (agents name the same field differently).

    Raises:
        InvalidInput: if ``required`` and none does.
    """
    for key in keys:
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
    if required:
        raise InvalidInput(f"hook input on stdin: missing field {keys[0]!r}")
    return None


def transcript_path(text: str) -> Path:
    """A path a payload names, ``~`` expanded (kept as written when no such user exists).

    Raises:
        InvalidInput: for a path no file can have: a NUL byte, or a lone surrogate escape.
    """
    if "\0" in text:
        raise InvalidInput("hook input on stdin: a transcript path holds a NUL byte")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("hook input on stdin: a transcript path is not valid UTF-8 (a lone surrogate)") from None
    path = Path(text)
    try:
        return path.expanduser()
    except RuntimeError:
        return path


def hook_message(
    role: Role, content: str, message_id: str, kind: str, source: str, *, created_at: Any = None, **extra: Any
) -> NewMessage:
    """A message a payload carries, with the metadata every feed gives its messages.

    Raises:
        InvalidInput: if ``created_at`` is not a date-time, or an id is not a valid name.
    """
    metadata = {"source": source, "kind": kind, **{key: value for key, value in extra.items() if value}}
    try:
        return NewMessage(role=role, content=content, message_id=message_id, created_at=created_at, metadata=metadata)
    except ValidationError as exc:
        raise InvalidInput(f"hook input on stdin: {describe_validation(exc)}") from None


def fingerprint(path: Path, stat: os.stat_result, offset: int, *, finished: bool = True) -> str:
    """What ``path`` looked like when read up to ``offset``: ``mtime_ns:size:digest``.

    The stamp (modification time and size) says, without reading, that nothing changed;
    the digest of the file's first and last ``FINGERPRINT_BYTES`` before ``offset`` tells
    a file that only grew (the read part unchanged: reading resumes at ``offset``) from
    one rewritten (Windsurf's revert, ``agy`` rewriting a step in place), even to the
    same size: that one is read again from the start. A read that stopped at a bound
    before the file's end (not ``finished``) leaves the stamp out (``::digest``), so
    the next call reads on even though the file did not change.
    """
    stamp = _stamp(stat) if finished else "::"
    return f"{stamp}{_digest(path, offset)}"


def _digest(path: Path, offset: int) -> str:
    with open_regular(path) as handle:
        head = handle.read(min(offset, FINGERPRINT_BYTES))
        handle.seek(max(0, offset - FINGERPRINT_BYTES))
        tail = handle.read(min(offset, FINGERPRINT_BYTES))
    return hashlib.sha256(head + b"\0" + tail).hexdigest()[:32]


def _stamp(stat: os.stat_result) -> str:
    return f"{stat.st_mtime_ns}:{stat.st_size}:"


def _valid_start(path: Path, known: ReadPosition | None, size: int) -> FilePosition | None:
    """Where to resume in ``path``: the stored position, if it still ends a line of the same file.

    A position moved from an older store has no fingerprint: its offset is trusted if it
    ends a line.
    """
    if known is None or known.offset == 0 or known.offset > size:
        return None
    with open_regular(path) as handle:
        handle.seek(known.offset - 1)
        if handle.read(1) != b"\n":
            return None
    digest = known.fingerprint.rpartition(":")[2]
    if digest and digest != _digest(path, known.offset):
        return None
    return FilePosition(known.offset, known.line)


def _read(
    request: HookRequest, partition: str, positions: dict[str, ReadPosition]
) -> tuple[list[ParsedTranscript], list[ReadPosition]]:
    """Every transcript's unread part, parsed and checked, and the positions reached.

    All files share one budget: ``READ_BYTES`` and ``READ_SECONDS`` (but a file read
    whole, which no deadline helps, see `TranscriptFile.reads_whole`). A file the budget
    does not reach keeps its position, and the next call goes on from there.

    Raises:
        InvalidInput: for a path that is not a regular file, a bad line, or a file read
            whole that is over ``READ_BYTES``.
    """
    parsed: list[ParsedTranscript] = []
    reached: list[ReadPosition] = []
    deadline = time.monotonic() + READ_SECONDS
    left = READ_BYTES
    for item in request.transcripts:
        key = str(item.path)
        try:
            stat = item.path.stat()
        except OSError:
            continue
        if not file_stat.S_ISREG(stat.st_mode):
            raise not_regular(item.path, stat.st_mode)
        known = positions.get(key)
        if known is not None and known.fingerprint.startswith(_stamp(stat)):
            continue
        if left <= 0 or time.monotonic() >= deadline:
            break
        if known is None and item.is_transcript is not None and not item.is_transcript(item.path):
            continue
        state = ReadState(limit=left, deadline=None if item.reads_whole else deadline)
        start = _valid_start(item.path, known, stat.st_size)
        parsed.append(item.parse(item.path, partition=partition, start=start, state=state))
        if item.reads_whole and state.cut == "size":
            raise InvalidInput(
                f"{item.path}: over {READ_BYTES} bytes, the most a hook reads at one call, and this transcript "
                "is read whole at every call; nothing was written"
            )
        left -= state.taken
        offset, line = state.position.offset, state.position.line
        seen = fingerprint(item.path, stat, offset, finished=state.cut is None)
        reached.append(ReadPosition(path=key, offset=offset, line=line, fingerprint=seen))
    return parsed, reached


async def run_hook(store: MemoryStore, request: HookRequest, *, partition: str, budget: int) -> HookOutcome:
    """Store what is new in the session, then hand back memory if the event asks for it.

    Raises:
        InvalidInput: naming ``FILE:LINE`` for a bad line; nothing written.
        Conflict: if the session is stored in another partition; nothing written.
    """
    positions: dict[str, ReadPosition] = {}
    if request.transcripts:
        positions = {item.path: item for item in await store.read_positions(partition, request.thread_id)}
    parsed, reached = _read(request, partition, positions)
    batches = [batch for item in parsed for batch in item.batches]
    if request.inline:
        batches.append(IngestBatch(partition, request.thread_id, request.project, list(request.inline), 1))
    combined = ParsedTranscript(batches, sum(item.skipped for item in parsed))
    origin = request.transcripts[0].path if request.transcripts else Path("<stdin>")
    report = await append_transcript(store, origin, request.agent, combined)
    # After the messages: a run that dies between the two reads the same lines again, and
    # the store keeps each message once.
    await store.save_read_positions(partition, request.thread_id, reached)
    follow_up = request.follow_up_s > 0 and not await answered(store, request, partition)
    reply = None
    if request.memory is not None or request.rules_file is not None:
        from palimpsest.server.retrieval import startup

        if request.rules_file is not None:
            text = await startup.project_memory(
                store, partition=partition, project=request.project, budget_tokens=budget, max_chars=startup.RULES_CHARS
            )
            startup.write_rules(request.rules_file, text)
        if request.memory is not None and request.reply is not None:
            text = await startup.session_memory(
                store,
                partition=partition,
                thread_id=request.thread_id,
                project=request.project,
                resume=request.memory == "thread",
                budget_tokens=budget,
                cwd=request.cwd,
            )
            reply = request.reply(text)
    return HookOutcome(report, reply, follow_up)


async def answered(store: MemoryStore, request: HookRequest, partition: str) -> bool:
    """Whether the session's transcript is there and its thread ends with the assistant's answer.

    The last message that is not a system note must be the assistant's own words (not a
    tool call, not thinking): anything else is a turn whose end the agent has not
    written yet, or a transcript not written at all.
    """
    if not request.transcripts or not request.transcripts[0].path.is_file():
        return False
    try:
        thread = await store.get_thread(partition, request.thread_id)
    except NotFound:
        return False
    first = max(0, thread.message_count - ANSWER_LOOKBACK)
    for message in reversed(await store.get_messages(partition, request.thread_id, first_seq=first)):
        if message.role is not Role.system:
            return message.role is Role.assistant and message.metadata.get("kind") not in _NOT_AN_ANSWER
    return False


#: ``SessionStart`` sources after which the agent lost its own context of this thread.
RESUMING = frozenset({"resume", "compact"})


def answer_session_start(request: HookRequest, payload: dict[str, Any]) -> None:
    """Make a ``SessionStart`` request answer with memory, in the ``hookSpecificOutput`` shape.

    Claude Code, Codex and Gemini CLI agree on the event, its ``source`` and the reply:
    after a resume or the agent's own compaction, the thread's context; else the project's.
    """
    request.memory = "thread" if payload.get("source") in RESUMING else "project"
    request.reply = additional_context(request.event)


def additional_context(event: str) -> Callable[[str], str]:
    """Claude Code's, Codex's and Gemini's shape: ``hookSpecificOutput.additionalContext``."""

    def reply(text: str) -> str:
        return json.dumps(
            {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}, ensure_ascii=False
        )

    return reply
