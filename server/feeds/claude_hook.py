"""What ``palimpsest hook claude`` does: store a Claude Code session as it happens.

Claude Code runs a hook command on events such as ``Stop`` (every finished turn),
``PreCompact`` and ``SessionEnd``, with a JSON object on stdin naming the session and
its transcript: ``{"session_id", "transcript_path", "cwd", "hook_event_name", ...}``.
The hook ingests that transcript, so memory keeps every turn even if nobody ever runs
``palimpsest ingest``.

It runs after every turn, so it must be quick on a session of any length: when the
session is already stored, only the lines after the one its last stored message came
from are read (``claude_code.resume_position``); otherwise, the whole transcript.
Either way it is idempotent, and a bad line still stops it before any write.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.models import Name
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.feeds.claude_code import FORMAT, parse_claude_code, resume_position
from palimpsest.server.feeds.ingest import FileIngest, append_transcript
from palimpsest.server.feeds.transcripts import FilePosition, describe_validation


class HookInput(BaseModel):
    """The part of a Claude Code hook's stdin the hook reads; other keys are allowed and ignored."""

    model_config = ConfigDict(extra="ignore")

    session_id: Name
    transcript_path: Name
    cwd: str | None = None
    hook_event_name: str | None = None

    @property
    def transcript(self) -> Path:
        """The transcript file, ``~`` expanded."""
        return Path(self.transcript_path).expanduser()


def read_hook_input(text: str) -> HookInput:
    """Parse and check a hook's stdin before anything opens the store.

    Raises:
        InvalidInput: if the input is not a JSON object with ``session_id`` and
            ``transcript_path``, or the transcript is not a file.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"hook input on stdin is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(value, dict):
        raise InvalidInput("hook input on stdin must be a JSON object")
    try:
        hook = HookInput.model_validate(value)
    except ValidationError as exc:
        raise InvalidInput(f"hook input on stdin: {describe_validation(exc)}") from None
    if not hook.transcript.is_file():
        raise InvalidInput(f"transcript {hook.transcript} of session {hook.session_id!r} is not a file")
    return hook


async def _resume_from(store: MemoryStore, partition: str, hook: HookInput) -> FilePosition | None:
    """Where the unread part of the transcript starts, ``None`` to read all of it."""
    try:
        thread = await store.get_thread(partition, hook.session_id)
    except NotFound:
        return None
    if thread.message_count == 0:
        return None
    last = await store.get_messages(partition, hook.session_id, first_seq=thread.message_count - 1, limit=1)
    return resume_position(hook.transcript, last[-1].source_id) if last else None


async def ingest_hook(store: MemoryStore, hook: HookInput, *, partition: str) -> FileIngest:
    """Ingest the transcript a hook names into ``partition``, reading only what is new.

    Returns:
        What was read and appended (``messages`` counts only the lines read this time).

    Raises:
        InvalidInput: naming ``FILE:LINE`` for a bad line; nothing written.
    """
    start = await _resume_from(store, partition, hook)
    parsed = parse_claude_code(hook.transcript, partition=partition, start=start)
    return await append_transcript(store, hook.transcript, FORMAT, parsed)
