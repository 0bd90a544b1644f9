"""Codex rollouts: the JSONL file the Codex CLI writes for every session.

Codex appends to ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`` one
``{"timestamp", "type", "payload"}`` object a line. The first, ``session_meta``, names
the session (``payload.id``) and its ``cwd``; ``response_item`` lines are what the model
saw and said; ``turn_context`` says which model ran a turn; ``event_msg`` lines repeat
the response items for the UI and ``compacted`` lines hold Codex's own summary of
earlier items, so both are skipped (and counted), as is any other bookkeeping, except
a ``user_message`` event whose prompt no ``message`` item carries (some builds write a
prompt only there): it is the user's message, taken once (see ``_Prompts``); and a
``turn_aborted`` event (the turn stopped, ``reason`` ``interrupted`` when the user did it),
which older builds write instead of a ``<turn_aborted>`` message: it is kept as that
message, marked injected. The mapping, decided once here:

- thread = the session id; project = the last component of its ``cwd``; every message
  keeps the session's ``cwd``, ``git_branch`` and ``git_commit`` (the ``git`` Codex
  records for a folder that is a repository) in its metadata;
- source id = ``line-N``, N the line number: Codex only ever appends to a rollout, so
  ingesting again adds nothing and a grown rollout adds its new lines;
- ``message`` → a message of its role (``developer`` becomes ``system``, keeping
  ``codex_role``); its text parts joined, images as ``[image]`` with the part kept whole
  in metadata ``blocks``. What Codex writes itself, never the user's words, is kept but
  marked ``injected: true`` with ``injected_as`` saying what it is: a user or system
  message that is one ``<snake_case>`` element (``environment_context``,
  ``user_instructions``, ``skills_instructions``, ``turn_aborted``, ...) or the AGENTS.md
  preamble (``agents_md``), and every ``developer`` message (``developer_instructions``
  unless it is one of those). The start-of-session memory leaves them out;
- ``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call`` →
  assistant messages ``name arguments`` with ``tool_call_id`` = the ``call_id``;
  ``function_call_output`` and ``custom_tool_call_output`` → ``tool`` messages. In code
  mode a ``custom_tool_call`` named ``exec`` holds a JavaScript cell that calls tools
  (``tools.exec_command({...})``); its output opens ``Script completed`` or ``Script
  failed`` (then ``Wall time``, ``Output:``), and a failed one is kept with ``is_error``;
- ``reasoning`` → an assistant message with metadata ``kind: thinking`` holding its
  readable summary (an encrypted-only one holds nothing to keep and is skipped).

Rollouts from before the wrapper (a first line ``{"id", "timestamp", "instructions"}``,
then bare items and ``{"record_type": "state"}`` lines) are read too: the items are the
same, their time is the session's.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from palimpsest.graph_schema.models import NewMessage, Role, UtcDatetime
from palimpsest.server.feeds.transcripts import (
    MAX_LINE_BYTES,
    FilePosition,
    ParsedTranscript,
    Piece,
    ProgressCallback,
    ReadState,
    ThreadGrouper,
    TranscriptFormat,
    decode_object,
    describe_validation,
    line_error,
    project_from_cwd,
    read_lines,
)

#: The ``--format`` name, and the partition Codex sessions go to by default.
FORMAT = "codex"
PARTITION = "codex"
#: ``metadata["source"]`` of every message read from a rollout.
SOURCE = "codex"
#: The ``type`` of a rollout line (the wrapper's, not the payload's).
ROLLOUT_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
#: Codex roles and the Palimpsest role each becomes.
_ROLES = {"user": Role.user, "assistant": Role.assistant, "system": Role.system, "developer": Role.system}
#: A user message Codex writes itself: one ``<snake_case>`` element, or the AGENTS.md preamble.
_INJECTED_TAG = re.compile(r"\A\s*<([a-z_]+)(?:\s[^>]*)?>.*</\1>\s*\Z", re.DOTALL)
_AGENTS_MD = "# AGENTS.md instructions"
#: How a code-mode cell's output opens when its script threw (a command it awaited failed, or its own error).
_SCRIPT_FAILED = "Script failed\n"
_TIMESTAMP: TypeAdapter[datetime] = TypeAdapter(UtcDatetime)


class _RolloutLine(BaseModel):
    """One line of a wrapped rollout."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    type: str
    payload: dict[str, Any]
    timestamp: UtcDatetime | None = None


@dataclass
class _Session:
    """What the rollout said so far about its session."""

    id: str | None = None
    cwd: str | None = None
    git_branch: str | None = None
    #: The commit the session started from: Codex records git's state only for a folder that is a repository, and a
    #: detached checkout has no branch.
    git_commit: str | None = None
    model: str | None = None
    #: The session's start, the time of every item of a rollout without the wrapper.
    started: datetime | None = None


class _BadItem(Exception):
    """A response item that cannot be read; becomes a ``FILE:LINE`` error."""


def _is_legacy_meta(value: dict[str, Any]) -> bool:
    """The first line of a rollout from before the wrapper: the session's id and time, no ``type``."""
    return isinstance(value.get("id"), str) and "timestamp" in value and "type" not in value


def recognizes(value: dict[str, Any], *, first_line: bool) -> bool:
    """Whether a JSON line is a Codex rollout's (the first line may be an unwrapped session header)."""
    if value.get("type") in ROLLOUT_TYPES and isinstance(value.get("payload"), dict):
        return True
    return first_line and _is_legacy_meta(value) and "sessionId" not in value


def _string(payload: dict[str, Any], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not value:
        raise _BadItem(f"a {payload.get('type')} item needs a non-empty string {key!r}")
    return value


def _parts_text(parts: Any, what: str, kept: list[dict[str, Any]] | None = None) -> str:
    """Text parts of a message or tool output joined; images and other parts named, and kept whole in ``kept``."""
    if not isinstance(parts, list):
        raise _BadItem(f"{what} must be a list of parts")
    texts: list[str] = []
    for part in parts:
        if not isinstance(part, dict):
            raise _BadItem(f"{what} must be a list of JSON objects")
        kind = part.get("type")
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            texts.append("[image]" if kind == "input_image" else f"[{kind}]")
            if kept is not None:
                kept.append(part)
    return "\n\n".join(texts)


def _output(payload: dict[str, Any], kept: list[dict[str, Any]]) -> tuple[str, bool]:
    """A tool output's text and whether it says it failed (a string, parts, or ``{content, success}``)."""
    output = payload.get("output")
    if isinstance(output, str):
        return output, output.startswith(_SCRIPT_FAILED)
    if isinstance(output, list):
        text = _parts_text(output, "output", kept)
        return text, text.startswith(_SCRIPT_FAILED)
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return output["content"], output.get("success") is False
    raise _BadItem(f"a {payload.get('type')} item needs an output (a string, a list of parts, or content)")


def _injected(text: str) -> str | None:
    """What kind of context Codex injected as a message, if it is one (its element's tag, or ``agents_md``)."""
    if text.lstrip().startswith(_AGENTS_MD):
        return "agents_md"
    match = _INJECTED_TAG.match(text)
    return match.group(1) if match else None


def _message(payload: dict[str, Any]) -> Piece | None:
    role_name = payload.get("role")
    role = _ROLES.get(role_name) if isinstance(role_name, str) else None
    if role is None:
        raise _BadItem(f"a message item needs a role among {', '.join(_ROLES)}, not {role_name!r}")
    kept: list[dict[str, Any]] = []
    text = _parts_text(payload.get("content"), "content", kept)
    if not text:
        return None
    extra: dict[str, Any] = {"blocks": kept} if kept else {}
    if role_name == "developer":
        extra["codex_role"] = role_name
    injected = _injected(text) if role is not Role.assistant else None
    if injected is None and role_name == "developer":
        injected = "developer_instructions"
    if injected is not None:
        extra.update(injected=True, injected_as=injected)
    return Piece(role, text, "text", extra=extra)


def _call(payload: dict[str, Any]) -> Piece:
    kind = payload.get("type")
    if kind == "function_call":
        name, arguments = _string(payload, "name"), payload.get("arguments")
        rendered = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        call_id: str | None = _string(payload, "call_id")
    elif kind == "custom_tool_call":
        name, call_id = _string(payload, "name"), _string(payload, "call_id")
        given = payload.get("input")
        rendered = given if isinstance(given, str) else ""
    else:
        name = "local_shell" if kind == "local_shell_call" else "web_search"
        rendered = json.dumps(payload.get("action"), ensure_ascii=False)
        found = payload.get("call_id") or payload.get("id")
        call_id = found if isinstance(found, str) and found else None
    return Piece(Role.assistant, f"{name} {rendered}", "tool_use", call_id, {"tool_name": name})


def _reasoning(payload: dict[str, Any]) -> Piece | None:
    texts: list[str] = []
    for key in ("summary", "content"):
        parts = payload.get(key)
        if isinstance(parts, list):
            texts.extend(part["text"] for part in parts if isinstance(part, dict) and isinstance(part.get("text"), str))
    text = "\n\n".join(t for t in texts if t)
    return Piece(Role.assistant, text, "thinking") if text else None


def _piece(payload: dict[str, Any]) -> Piece | None:
    """The message a response item becomes; ``None`` for items that hold none."""
    kind = payload.get("type")
    if kind == "message":
        return _message(payload)
    if kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
        return _call(payload)
    if kind in ("function_call_output", "custom_tool_call_output"):
        kept: list[dict[str, Any]] = []
        text, failed = _output(payload, kept)
        extra = {**({"is_error": True} if failed else {}), **({"blocks": kept} if kept else {})}
        return Piece(Role.tool, text, "tool_result", _string(payload, "call_id"), extra or None)
    if kind == "reasoning":
        return _reasoning(payload)
    return None


def _start_session(session: _Session, payload: dict[str, Any], timestamp: datetime | None) -> None:
    """Take the session's identity from its first ``session_meta``; a rollout is one session."""
    if session.id is not None:
        return
    if not isinstance(payload.get("id"), str) or not payload["id"]:
        raise _BadItem("the session header needs a non-empty string 'id'")
    session.id = payload["id"]
    cwd, git = payload.get("cwd"), payload.get("git")
    session.cwd = cwd if isinstance(cwd, str) else None
    branch = git.get("branch") if isinstance(git, dict) else None
    session.git_branch = branch if isinstance(branch, str) and branch else None
    commit = git.get("commit_hash") if isinstance(git, dict) else None
    session.git_commit = commit if isinstance(commit, str) and commit else None
    started = payload.get("timestamp")
    try:
        session.started = _TIMESTAMP.validate_python(started) if started is not None else timestamp
    except ValidationError:
        raise _BadItem(f"session timestamp: not a date-time: {started!r}") from None


def _metadata(session: _Session, payload: dict[str, Any], piece: Piece) -> dict[str, Any]:
    metadata: dict[str, Any] = {"source": SOURCE, "kind": piece.kind, "codex_type": payload.get("type")}
    optional = {
        "model": session.model,
        "git_branch": session.git_branch,
        "git_commit": session.git_commit,
        "cwd": session.cwd,
    }
    metadata.update({key: value for key, value in optional.items() if value})
    metadata.update(piece.extra or {})
    return metadata


class _Prompts:
    """The user's prompts, taken once whether a ``response_item`` or an ``event_msg`` carries them.

    Codex writes a prompt as a user ``message`` item and again as an ``event_msg`` of
    type ``user_message`` with the same text; some builds write only the event. Each
    side keeps the texts it gave that the other has not matched yet: a text the other
    side already gave is a repeat and skipped, so a prompt is stored once either way.
    """

    def __init__(self) -> None:
        self._from_items: Counter[str] = Counter()
        self._from_events: Counter[str] = Counter()

    def _first(self, text: str, mine: Counter[str], other: Counter[str]) -> bool:
        if other[text] > 0:
            other[text] -= 1
            return False
        mine[text] += 1
        return True

    def item(self, text: str) -> bool:
        """Whether a user message item is a new prompt (not one an event already gave)."""
        return self._first(text, self._from_items, self._from_events)

    def event(self, text: str) -> bool:
        """Whether a ``user_message`` event is a new prompt (not one an item already gave)."""
        return self._first(text, self._from_events, self._from_items)


def _user_event(payload: dict[str, Any]) -> Piece | None:
    """The prompt a ``user_message`` event carries, its images kept whole; None for other events."""
    text = payload.get("message")
    if payload.get("type") != "user_message" or not isinstance(text, str) or not text:
        return None
    images = payload.get("images")
    extra: dict[str, Any] = {"blocks": list(images)} if isinstance(images, list) and images else {}
    return Piece(Role.user, text, "text", extra=extra)


def _aborted(payload: dict[str, Any]) -> Piece | None:
    """A ``turn_aborted`` event as the ``<turn_aborted>`` message newer builds write, marked injected."""
    if payload.get("type") != "turn_aborted":
        return None
    reason = payload.get("reason") if isinstance(payload.get("reason"), str) else "unknown"
    text = f"<turn_aborted>\n  <reason>{reason}</reason>\n</turn_aborted>"
    return Piece(Role.user, text, "text", extra={"injected": True, "injected_as": "turn_aborted"})


def _first_line(path: Path) -> dict[str, Any] | None:
    """The rollout's first line, which names the session (read when a hook resumes further on)."""
    for number, raw in read_lines(path, state=ReadState(limit=MAX_LINE_BYTES)):
        return decode_object(path, number, raw)
    return None


def parse_codex(
    path: Path,
    *,
    partition: str,
    progress: ProgressCallback | None = None,
    start: FilePosition | None = None,
    state: ReadState | None = None,
) -> ParsedTranscript:
    """Parse and check a Codex rollout into append batches, writing nothing.

    Args:
        path: The rollout.
        partition: Where its session goes.
        progress: Called now and then with the bytes read so far.
        start: Read from this line on (a hook resuming where it stopped); the session
            is still taken from the first line.
        state: Updated with where reading stopped, for the next read to start there.

    Returns:
        The batches of the session's thread and how many lines were bookkeeping.

    Raises:
        InvalidInput: naming ``FILE:LINE`` for the first bad line: not JSON, a line
            without ``type`` and ``payload``, a response item before the
            ``session_meta`` that names the session, or an item missing what it needs
            (a message's role, a call's ``call_id``, an output).
    """
    grouper = ThreadGrouper(path, strict_project=False)
    session = _Session()
    prompts = _Prompts()
    legacy = False
    skipped = 0
    resuming = start is not None and start.offset > 0
    if resuming:
        head = _first_line(path)
        try:
            if head is not None and _is_legacy_meta(head):
                legacy = True
                _start_session(session, head, None)
            elif head is not None and head.get("type") == "session_meta" and isinstance(head.get("payload"), dict):
                _start_session(session, head["payload"], None)
        except _BadItem as exc:
            raise line_error(path, 1, str(exc)) from None
    state = state if state is not None else ReadState()
    for index, (number, raw) in enumerate(read_lines(path, progress=progress, start=start, state=state)):
        value = decode_object(path, number, raw)
        try:
            if index == 0 and not resuming and _is_legacy_meta(value):
                legacy = True
                _start_session(session, value, None)
                skipped += 1
                continue
            if legacy:
                if "record_type" in value:
                    skipped += 1
                    continue
                kind, payload, timestamp = "response_item", value, session.started
            else:
                line = _RolloutLine.model_validate(value)
                kind, payload, timestamp = line.type, line.payload, line.timestamp
            if kind == "session_meta":
                _start_session(session, payload, timestamp)
            elif kind == "turn_context" and isinstance(payload.get("model"), str):
                session.model = payload["model"]
            piece = _piece(payload) if kind == "response_item" else None
            if kind == "event_msg":
                piece = _user_event(payload)
                if piece is not None and not prompts.event(piece.content):
                    piece = None
                piece = piece or _aborted(payload)
            elif piece is not None and piece.role is Role.user and "injected" not in (piece.extra or {}):
                if not prompts.item(piece.content):
                    piece = None
        except ValidationError as exc:
            raise line_error(path, number, describe_validation(exc)) from None
        except _BadItem as exc:
            raise line_error(path, number, str(exc)) from None
        if piece is None:
            skipped += 1
            continue
        if session.id is None:
            raise line_error(path, number, "a response item before the session_meta line that names the session")
        grouper.add(
            number,
            partition=partition,
            thread_id=session.id,
            project=project_from_cwd(session.cwd),
            message=NewMessage.model_construct(
                role=piece.role,
                content=piece.content,
                message_id=f"line-{number}",
                created_at=timestamp,
                tool_call_id=piece.tool_call_id,
                metadata=_metadata(session, payload, piece),
            ),
        )
    return ParsedTranscript(grouper.batches(), skipped, state.position)


#: What ``palimpsest ingest`` reads as ``--format codex``.
TRANSCRIPT_FORMAT = TranscriptFormat(
    name=FORMAT,
    partition=PARTITION,
    parse=parse_codex,
    recognizes=lambda value, first_line: FORMAT if recognizes(value, first_line=first_line) else None,
)
