"""Gemini CLI chat recordings: the JSON Lines file Gemini CLI keeps for every session.

Gemini CLI records a session in ``~/.gemini/tmp/<project hash>/chats/session-<time>-<id>.jsonl``
(a subagent's in ``chats/<session id>/<subagent id>.jsonl``), appending one JSON object a
line:

- a metadata line (``sessionId``, ``projectHash``, ``startTime``, ``kind``), and
  ``{"$set": {...}}`` lines updating those fields; ``$set`` may carry the whole
  ``messages`` list again (after Gemini masks old tool output), whose new entries (a
  compression summary) are read like any message;
- ``{"$rewindTo": id}`` when the user rewinds: Gemini forgets that message and the later
  ones, Palimpsest keeps them (they were said), and the lines that follow are new messages;
- message records ``{id, timestamp, type, content, ...}``, ``type`` ``user``, ``gemini``,
  ``info``, ``error`` or ``warning``. A record is written again, under the same ``id``,
  each time it grows (its tool calls' results, its token counts), so a later copy adds
  only what the earlier lacked.

Older releases kept the same record as one JSON document (``session-*.json``,
``{"sessionId", ..., "messages": [...]}``), rewritten whole; it is read whole each time.

The mapping, decided once here (ids are the recording's own, so a file read twice, a record
written again, or a payload sent twice stores each thing once):

- ``user`` → a user message (id = the record's ``id``); ``content`` is a string or a list
  of parts, text parts joined, any other part (an image, a file) named in the text and kept
  whole in metadata ``parts``. The context Gemini CLI sends as the session's first user
  turn (``<session_context>This is the Gemini CLI. We are setting up the context for our
  chat. ...``: date, OS, workspace folders and their tree) is not the user's words: it is
  marked ``injected: true``, ``injected_as: session_context``, as Codex's injected turns are.
  Newer releases also record, as ``user`` records, what the CLI sends the model on the
  user's side without the user writing it: the tool results going back to the model (a
  record of ``functionResponse`` parts only, the same results its call already holds),
  marked ``injected_as: function_response``, and the notice that the user left or entered
  Plan Mode ("User has manually exited Plan Mode. Switching to Default mode ..."), marked
  ``injected_as: mode_change``; they are kept, and no reader takes them for a request;
- ``gemini`` → its ``thoughts`` first, each an assistant message with metadata ``kind:
  thinking`` (id ``<id>:thought:<n>``, the thought's own time), then its text (id = ``id``,
  metadata ``model`` and ``tokens``), then each of ``toolCalls``: a ``tool_use`` message
  ``name {json args}`` whose id and ``tool_call_id`` are the call's ``id``, and, once the call
  has a result, a ``tool`` message answering it (id ``<call id>:result``, the call's own time,
  metadata ``status``, ``is_error`` for ``error`` and ``cancelled``);
- ``info``, ``error``, ``warning`` (what Gemini CLI showed the user) → system messages of that kind;
- any other record → a system message of its ``type``, the record kept whole in metadata ``record``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import NewMessage, Role, UtcDatetime
from palimpsest.server.feeds.transcripts import (
    JSON_ERRORS,
    MAX_LINE_BYTES,
    FilePosition,
    ParsedTranscript,
    Piece,
    ReadState,
    ThreadGrouper,
    decode_object,
    json_error,
    line_error,
    open_regular,
    read_lines,
)

#: ``metadata["source"]`` of every message read from a Gemini CLI chat recording.
SOURCE = "gemini-cli"
#: Tool call states after which the call has its result.
FINISHED = frozenset({"success", "error", "cancelled"})
#: Record types Gemini CLI shows the user itself rather than sending to the model.
NOTICES = frozenset({"info", "error", "warning"})
#: How the context Gemini CLI sends as the session's first user turn opens.
SESSION_CONTEXT = "<session_context>"
#: The notice Gemini CLI sends as the user's turn when the user switches Plan Mode off or on.
MODE_CHANGE = re.compile(r"^\s*User has manually (?:exited|entered) Plan Mode\b")
_TIMES: TypeAdapter[datetime | None] = TypeAdapter(UtcDatetime | None)


class _BadRecord(Exception):
    """A record that cannot be read; becomes a ``FILE:LINE`` error."""


def _time(value: Any, where: str) -> datetime | None:
    try:
        return _TIMES.validate_python(value if isinstance(value, str) else None)
    except ValidationError:
        raise _BadRecord(f"{where}: not a date-time: {value!r}") from None


def _placeholder(part: dict[str, Any]) -> str:
    """A non-text part named in text: ``[inlineData: image/png]``, ``[functionCall: read_file]``."""
    kind = next((key for key in part if key not in ("thought", "thoughtSignature")), "part")
    inner = part.get(kind)
    detail = None
    if isinstance(inner, dict):
        detail = inner.get("mimeType") or inner.get("name") or inner.get("fileUri")
    return f"[{kind}: {detail}]" if isinstance(detail, str) and detail else f"[{kind}]"


def _parts_text(content: Any, kept: list[Any]) -> str:
    """The text of a ``PartListUnion`` (a string, a part, or a list of either); other parts kept."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    items = content if isinstance(content, list) else [content]
    texts: list[str] = []
    for part in items:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, dict):
            texts.append(_placeholder(part))
            kept.append(part)
        else:
            raise _BadRecord("content parts must be strings or JSON objects")
    return "".join(texts)


def _result_text(result: Any, kept: list[Any]) -> str:
    """A tool call's result as the model read it: each ``functionResponse``'s output or error."""
    items = result if isinstance(result, list) else [] if result is None else [result]
    texts: list[str] = []
    for part in items:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict):
            body = response.get("response")
            if isinstance(body, dict) and isinstance(body.get("output"), str) and len(body) == 1:
                texts.append(body["output"])
            elif isinstance(body, dict) and isinstance(body.get("error"), str) and len(body) == 1:
                texts.append(body["error"])
            else:
                texts.append(json.dumps(body, ensure_ascii=False))
        else:
            texts.append(_parts_text(part, kept))
    return "\n".join(texts)


def _only_function_responses(content: Any) -> bool:
    """Whether a user record holds tool results going back to the model and nothing the user wrote."""
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(part, dict) and "functionResponse" in part for part in content)
    )


def _thought(thought: dict[str, Any]) -> str:
    subject, description = thought.get("subject"), thought.get("description")
    parts = [text for text in (subject, description) if isinstance(text, str) and text]
    return "\n\n".join(parts)


def _with_kept(extra: dict[str, Any], kept: list[Any]) -> dict[str, Any]:
    return {**extra, "parts": list(kept)} if kept else extra


def _tool_pieces(call: dict[str, Any], when: datetime | None, index: int) -> list[tuple[str, Piece, datetime | None]]:
    call_id, name = call.get("id"), call.get("name")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
        raise _BadRecord(f"toolCalls[{index}] needs a string 'id' and 'name'")
    args = call.get("args", {})
    rendered = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    extra = {"tool_name": name, **({"display_name": call["displayName"]} if call.get("displayName") else {})}
    pieces = [(call_id, Piece(Role.assistant, f"{name} {rendered}", "tool_use", call_id, extra), when)]
    status = call.get("status")
    if call.get("result") is None and status not in FINISHED:
        return pieces
    kept: list[Any] = []
    text = _result_text(call.get("result"), kept)
    display = call.get("resultDisplay")
    if not text and isinstance(display, str):
        text = display
    result_extra: dict[str, Any] = {"tool_name": name, "status": status}
    if status in ("error", "cancelled"):
        result_extra["is_error"] = True
    if isinstance(display, str) and display and display != text:
        result_extra["result_display"] = display
    elif isinstance(display, dict):  # a file diff: what the user saw, without both whole files
        result_extra["result_display"] = {k: display[k] for k in ("fileName", "fileDiff") if k in display}
    finished = _time(call.get("timestamp"), f"toolCalls[{index}].timestamp") or when
    result = Piece(Role.tool, text, "tool_result", call_id, _with_kept(result_extra, kept))
    return [*pieces, (f"{call_id}:result", result, finished)]


def record_pieces(record: dict[str, Any]) -> list[tuple[str, Piece, datetime | None]]:
    """The messages one message record holds, each with its source id and time, in order.

    Raises:
        _BadRecord: the record's fields are not of Gemini CLI's shapes.
    """
    record_id = record["id"]
    kind = record.get("type")
    when = _time(record.get("timestamp"), "timestamp")
    kept: list[Any] = []
    pieces: list[tuple[str, Piece, datetime | None]] = []
    if kind == "user":
        text = _parts_text(record.get("content"), kept)
        extra: dict[str, Any] = {}
        display: list[Any] = []
        shown = _parts_text(record.get("displayContent"), display) if "displayContent" in record else None
        if shown is not None and shown != text:
            extra["display_content"] = shown
        if text.lstrip().startswith(SESSION_CONTEXT):
            extra.update(injected=True, injected_as="session_context")
        elif _only_function_responses(record.get("content")):
            extra.update(injected=True, injected_as="function_response")
        elif MODE_CHANGE.match(text):
            extra.update(injected=True, injected_as="mode_change")
        if text or kept:
            pieces.append((record_id, Piece(Role.user, text, "text", extra=_with_kept(extra, kept)), when))
        return pieces
    if kind == "gemini":
        thoughts = record.get("thoughts") or []
        for number, thought in enumerate(thoughts if isinstance(thoughts, list) else []):
            text = _thought(thought) if isinstance(thought, dict) else ""
            if text:
                at = _time(thought.get("timestamp"), f"thoughts[{number}].timestamp") or when
                pieces.append((f"{record_id}:thought:{number}", Piece(Role.assistant, text, "thinking"), at))
        text = _parts_text(record.get("content"), kept)
        if text or kept:
            extra = {key: record[key] for key in ("model", "tokens") if record.get(key)}
            pieces.append((record_id, Piece(Role.assistant, text, "text", extra=_with_kept(extra, kept)), when))
        calls = record.get("toolCalls") or []
        if not isinstance(calls, list) or not all(isinstance(call, dict) for call in calls):
            raise _BadRecord("toolCalls must be a list of JSON objects")
        for index, call in enumerate(calls):
            pieces.extend(_tool_pieces(call, when, index))
        return pieces
    text = _parts_text(record.get("content"), kept)
    if kind in NOTICES:
        return [(record_id, Piece(Role.system, text, str(kind), extra=_with_kept({}, kept)), when)]
    label = kind if isinstance(kind, str) and kind else "record"
    return [(record_id, Piece(Role.system, text, label, extra={"record": record}), when)]


def _records(value: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The message records a line holds: itself, the messages a ``$set`` carries, or none."""
    if isinstance(value.get("id"), str) and value["id"]:
        return [value]
    update = value.get("$set")
    holder = update if isinstance(update, dict) else value  # a $set line, or a whole document on one line
    if isinstance(holder.get("messages"), list):
        return [item for item in holder["messages"] if isinstance(item, dict) and isinstance(item.get("id"), str)]
    return None


class _Reader:
    """Turns records into messages of one thread, each source id once per read."""

    def __init__(self, path: Path, partition: str, thread_id: str, project: str | None, extra: dict[str, Any]) -> None:
        self.path, self.partition, self.thread_id, self.project = path, partition, thread_id, project
        self.extra = extra
        self.grouper = ThreadGrouper(path, strict_project=False)
        self.seen: set[str] = set()
        self.skipped = 0

    def add(self, number: int, records: list[dict[str, Any]] | None) -> None:
        if not records:
            self.skipped += 1
            return
        for record in records:
            try:
                pieces = record_pieces(record)
            except _BadRecord as exc:
                raise line_error(self.path, number, str(exc)) from None
            for source_id, piece, when in pieces:
                if source_id in self.seen:
                    continue
                self.seen.add(source_id)
                self.grouper.add(
                    number,
                    partition=self.partition,
                    thread_id=self.thread_id,
                    project=self.project,
                    message=NewMessage.model_construct(
                        role=piece.role,
                        content=piece.content,
                        message_id=source_id,
                        created_at=when,
                        tool_call_id=piece.tool_call_id,
                        metadata={"source": SOURCE, "kind": piece.kind, **self.extra, **(piece.extra or {})},
                    ),
                )


def is_document(path: Path) -> bool:
    """Whether a recording is the older whole-JSON form (its first line is not a whole object)."""
    try:
        with open_regular(path) as handle:
            first = handle.readline(MAX_LINE_BYTES)
    except (OSError, InvalidInput):
        return False
    try:
        return not isinstance(json.loads(first), dict)
    except JSON_ERRORS:
        return bool(first.strip())


def parse_gemini_chat(
    path: Path,
    *,
    partition: str,
    thread_id: str,
    project: str | None,
    start: FilePosition | None = None,
    state: ReadState | None = None,
    subagent: str | None = None,
) -> ParsedTranscript:
    """Parse a chat recording (JSON Lines, or the older whole document) into append batches.

    Args:
        path: The recording.
        partition: Where its messages go.
        thread_id: The session's thread (a subagent's recording goes to its parent's).
        project: The thread's project.
        start: Read JSON Lines from this line on; a whole document is always read whole.
        state: Updated with where reading stopped; its ``limit`` bounds a whole document too.
        subagent: The subagent whose recording this is, kept in each message's metadata.

    Raises:
        InvalidInput: naming ``FILE:LINE`` for a line that is not a JSON object or a
            record whose fields are not of Gemini CLI's shapes; a document over ``state.limit``.
    """
    state = state if state is not None else ReadState()
    reader = _Reader(path, partition, thread_id, project, {"subagent": subagent} if subagent else {})
    if is_document(path):
        with open_regular(path) as handle:
            data = handle.read(-1 if state.limit is None else state.limit + 1)
        if state.limit is not None and len(data) > state.limit:
            raise InvalidInput(f"{path}: a chat recording document over {state.limit} bytes, more than one read takes")
        state.taken = len(data)
        try:
            document = json.loads(data)
        except JSON_ERRORS as exc:
            raise InvalidInput(f"{path}: not a Gemini CLI chat recording ({json_error(exc)})") from None
        messages = document.get("messages") if isinstance(document, dict) else None
        if not isinstance(messages, list):
            raise InvalidInput(f"{path}: a chat recording document needs a 'messages' list")
        for item in messages:
            reader.add(1, [item] if isinstance(item, dict) and isinstance(item.get("id"), str) else None)
        state.position = FilePosition(len(data), data.count(b"\n") + 1)
        return ParsedTranscript(reader.grouper.batches(), reader.skipped, state.position)
    for number, raw in read_lines(path, start=start, state=state):
        reader.add(number, _records(decode_object(path, number, raw)))
    return ParsedTranscript(reader.grouper.batches(), reader.skipped, state.position)
