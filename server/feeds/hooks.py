"""The one hook runner every agent shares: stdin JSON in, the session's new messages stored, memory out.

Why one runner: ``palimpsest hook claude|codex|windsurf|antigravity|cursor`` differ only
in what the agent sends and how it wants context back; what a hook promises is the same
for all of them, so it is kept here once:

- the thread is the agent's session id, the partition the agent's (or ``--partition``);
- incremental: each transcript is read from where the last run stopped. That position
  is kept in the store itself, in metadata ``hook_cursor`` of the last message a run
  appends (``{path: [byte offset, line number]}`` of every file it read), so a turn of a
  100 MB session reads only the turn. A cursor that no longer fits the file (the file
  shrank, or the offset is not at a line start) is ignored and the file read whole;
- idempotent: every message has a source id fixed by its place in the transcript, so a
  file read twice, or two hook processes racing on one transcript, store each message
  once (the store ignores a ``message_id`` it holds);
- all or nothing: every line is parsed and checked before the first write, so bad input
  leaves the store as it was;
- quick: this module imports only what storing needs; what hands memory back
  (`palimpsest.server.retrieval.startup`) is imported only on the events that ask for it.

Each agent's module (``claude_hook``, ``codex_hook``, ``windsurf``, ``antigravity``,
``cursor``) turns its stdin into a `HookRequest`; `run_hook` does the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.models import NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.feeds.append import FileIngest, append_transcript
from palimpsest.server.feeds.transcripts import (
    FilePosition,
    IngestBatch,
    ParsedTranscript,
    ReadState,
    describe_validation,
    project_from_cwd,
)

#: Metadata key of the read positions a hook run leaves on its last message.
CURSOR_KEY = "hook_cursor"
#: Newest messages of a thread searched for a cursor (messages appended by other means
#: since, an MCP ``append_messages`` say, push it back).
CURSOR_LOOKBACK = 50

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
    #: (Antigravity's ``agy`` writes it after ``Stop``): the runner catches up on what arrives
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


def read_payload(text: str) -> dict[str, Any]:
    """The hook's stdin as a JSON object.

    Raises:
        InvalidInput: if it is not JSON, or not an object.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"hook input on stdin is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(value, dict):
        raise InvalidInput("hook input on stdin must be a JSON object")
    return value


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


async def _stored_cursor(store: MemoryStore, partition: str, thread_id: str) -> dict[str, list[int]]:
    """The read positions the newest run on this thread left, or none."""
    try:
        thread = await store.get_thread(partition, thread_id)
    except NotFound:
        return {}
    if thread.message_count == 0:
        return {}
    first = max(0, thread.message_count - CURSOR_LOOKBACK)
    for message in reversed(await store.get_messages(partition, thread_id, first_seq=first)):
        found = message.metadata.get(CURSOR_KEY)
        if isinstance(found, dict):
            return {key: value for key, value in found.items() if _is_position(value)}
    return {}


def _is_position(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(isinstance(item, int) and item >= 0 for item in value)


def _valid_start(path: Path, position: list[int] | None, size: int) -> FilePosition | None:
    """Where to resume in ``path``: the stored position if it still ends a line of the file."""
    if position is None:
        return None
    offset, line = position
    if offset == 0 or offset > size:
        return None
    with path.open("rb") as handle:
        handle.seek(offset - 1)
        return FilePosition(offset, line) if handle.read(1) == b"\n" else None


def _read(
    request: HookRequest, partition: str, cursor: dict[str, list[int]]
) -> tuple[list[ParsedTranscript], dict[str, list[int]]]:
    """Every transcript's unread part, parsed and checked, and the positions reached."""
    parsed: list[ParsedTranscript] = []
    reached = dict(cursor)
    for item in request.transcripts:
        key = str(item.path)
        try:
            size = item.path.stat().st_size
        except OSError:
            continue
        known = cursor.get(key)
        if known is not None and known[0] == size:
            continue
        if known is None and item.is_transcript is not None and not item.is_transcript(item.path):
            continue
        state = ReadState()
        parsed.append(
            item.parse(item.path, partition=partition, start=_valid_start(item.path, known, size), state=state)
        )
        reached[key] = [state.position.offset, state.position.line]
    return parsed, reached


def _with_cursor(batches: list[IngestBatch], thread_id: str, reached: dict[str, list[int]]) -> None:
    """Leave the positions reached on the last message this run appends to the session's thread."""
    for batch in reversed(batches):
        if batch.thread_id == thread_id and batch.messages:
            last = batch.messages[-1]
            batch.messages[-1] = last.model_copy(update={"metadata": {**last.metadata, CURSOR_KEY: reached}})
            return


async def run_hook(store: MemoryStore, request: HookRequest, *, partition: str, budget: int) -> HookOutcome:
    """Store what is new in the session, then hand back memory if the event asks for it.

    Raises:
        InvalidInput: naming ``FILE:LINE`` for a bad line; nothing written.
        Conflict: if the session is stored in another partition; nothing written.
    """
    cursor = await _stored_cursor(store, partition, request.thread_id) if request.transcripts else {}
    parsed, reached = _read(request, partition, cursor)
    batches = [batch for item in parsed for batch in item.batches]
    if request.inline:
        batches.append(IngestBatch(partition, request.thread_id, request.project, list(request.inline), 1))
    if parsed and reached != cursor:
        _with_cursor(batches, request.thread_id, reached)
    combined = ParsedTranscript(batches, sum(item.skipped for item in parsed))
    origin = request.transcripts[0].path if request.transcripts else Path("<stdin>")
    report = await append_transcript(store, origin, request.agent, combined)
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
    return HookOutcome(report, reply)


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
