"""Step transcripts: the JSON-lines logs Windsurf and Antigravity write, whose fields are not published.

Windsurf's ``post_cascade_response_with_transcript`` hook names a JSONL file with "one
JSON object per step", and Antigravity's ``agy`` keeps
``brain/<conversation>/.system_generated/logs/transcript.jsonl`` with ``step_index``,
``source``, ``type``, ``content`` and ``tool_calls``; neither vendor documents the line
schema. So this parser reads every shape seen in the wild and trusts only what is
visibly the conversation:

- the speaker from ``role``, else ``source``, else ``type`` (``user``, ``user_input``,
  ``USER`` → user; ``assistant``, ``model``, ``planner_response``, ``MODEL`` →
  assistant; ``system`` → system);
- the text from ``content``, ``text``, ``message``, ``response`` or ``user_response``, a
  string or a list of ``{"text"}`` parts, directly on the line or in an object under the
  line's own ``type`` key (``{"type": "user_input", "user_input": {"user_response": ...}}``);
- ``tool_calls`` (``[{"name", "args"|"arguments", "id"?}]``) → assistant ``tool_use``
  messages ``name {json args}``.

Any other step (a code action, a command's output, a checkpoint) is skipped and counted.
Source id = ``line-N``: these logs are only appended to, so a grown file adds its new
lines. Thread = the conversation id the hook gives, whatever the lines say.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from palimpsest.graph_schema.models import NewMessage, Role, UtcDatetime
from palimpsest.server.feeds.transcripts import (
    FilePosition,
    ParsedTranscript,
    Piece,
    ReadState,
    ThreadGrouper,
    decode_object,
    line_error,
    read_lines,
)

#: Speaker names (lowercased) and the role each becomes.
_SPEAKERS = {
    "user": Role.user,
    "user_input": Role.user,
    "user_message": Role.user,
    "human": Role.user,
    "assistant": Role.assistant,
    "model": Role.assistant,
    "planner_response": Role.assistant,
    "agent": Role.assistant,
    "cascade": Role.assistant,
    "system": Role.system,
}
_TIMES: TypeAdapter[datetime | None] = TypeAdapter(UtcDatetime | None)
#: Keys that may hold a step's text, in order of preference.
_TEXT_KEYS = ("content", "text", "message", "response", "user_response")


def _speaker(value: dict[str, Any]) -> Role | None:
    for key in ("role", "source", "type"):
        found = value.get(key)
        if isinstance(found, str) and found.lower() in _SPEAKERS:
            return _SPEAKERS[found.lower()]
    return None


def _text(value: Any) -> str | None:
    """The text a step holds: a string, a list of text parts, or one of ``_TEXT_KEYS`` within."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [part if isinstance(part, str) else _text(part) for part in value]
        texts = [part for part in parts if part]
        return "\n\n".join(texts) if texts else None
    if isinstance(value, dict):
        for key in _TEXT_KEYS:
            found = _text(value.get(key)) if key in value else None
            if found:
                return found
    return None


def _tool_calls(value: dict[str, Any]) -> list[Piece]:
    calls = value.get("tool_calls") or value.get("toolCalls")
    pieces: list[Piece] = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            continue
        args = call.get("args", call.get("arguments", {}))
        rendered = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        found = call.get("id")
        call_id = found if isinstance(found, str) and found else None
        pieces.append(
            Piece(Role.assistant, f"{call['name']} {rendered}", "tool_use", call_id, {"tool_name": call["name"]})
        )
    return pieces


def step_pieces(value: dict[str, Any]) -> list[Piece]:
    """The messages one step line holds: its text, then its tool calls; none for other steps."""
    role = _speaker(value)
    pieces: list[Piece] = []
    if role is not None:
        kind = value.get("type")
        nested = value.get(kind) if isinstance(kind, str) else None
        text = _text({key: value[key] for key in _TEXT_KEYS if key in value}) or _text(nested)
        if text:
            pieces.append(Piece(role, text, "text"))
    return pieces + _tool_calls(value)


def _timestamp(value: dict[str, Any]) -> Any:
    for key in ("created_at", "timestamp", "createdAt"):
        if isinstance(value.get(key), str):
            return value[key]
    return None


def parse_steps(
    path: Path,
    *,
    partition: str,
    thread_id: str,
    project: str | None,
    source: str,
    start: FilePosition | None = None,
    state: ReadState | None = None,
) -> ParsedTranscript:
    """Parse a step transcript into append batches of one thread, writing nothing.

    Raises:
        InvalidInput: naming ``FILE:LINE`` for a line that is not a JSON object or has
            a timestamp that is not one.
    """
    grouper = ThreadGrouper(path, strict_project=False)
    skipped = 0
    state = state if state is not None else ReadState()
    for number, raw in read_lines(path, start=start, state=state):
        value = decode_object(path, number, raw)
        pieces = step_pieces(value)
        if not pieces:
            skipped += 1
            continue
        try:
            created = _TIMES.validate_python(_timestamp(value))
        except ValidationError:
            raise line_error(path, number, f"not a date-time: {_timestamp(value)!r}") from None
        step_type = value.get("type")
        for position, piece in enumerate(pieces):
            metadata: dict[str, Any] = {"source": source, "kind": piece.kind, **(piece.extra or {})}
            if isinstance(step_type, str):
                metadata["step_type"] = step_type
            grouper.add(
                number,
                partition=partition,
                thread_id=thread_id,
                project=project,
                message=NewMessage.model_construct(
                    role=piece.role,
                    content=piece.content,
                    message_id=f"line-{number}" if position == 0 else f"line-{number}#{position}",
                    created_at=created,
                    tool_call_id=piece.tool_call_id,
                    metadata=metadata,
                ),
            )
    return ParsedTranscript(grouper.batches(), skipped, state.position)
