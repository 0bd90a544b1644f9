"""Claude Code transcripts: the JSONL file Claude Code writes for every session.

Claude Code appends one JSON object a line to
``~/.claude/projects/<project-dir-slug>/<session-id>.jsonl``: conversation lines
(``type`` ``user`` or ``assistant``, carrying an Anthropic ``message`` whose ``content``
is a string or a list of blocks) among bookkeeping lines (``summary``,
``file-history-snapshot``, ``system``, ``queue-operation``, ...), which are skipped and
counted. The mapping, decided once here:

- a prompt the user typed while the agent worked is an ``attachment`` line of type
  ``queued_command``: a user line, marked ``queued``; versions that wrote no such line
  hold the prompt only in the ``queue-operation`` lines, read by `queued_prompts`;
- thread = the line's ``sessionId`` (a workflow agent's ``<session>#agent-<id>`` is its
  session's thread, the agent kept as metadata ``workflow_agent``); project = the last
  component of its ``cwd``;
- source id = the line's ``uuid``, then ``uuid#1``, ``uuid#2``... for further messages
  of the same line, so ingesting again adds nothing and a grown transcript adds only
  its new lines;
- consecutive text blocks become one message with the line's role; an image, a
  document or any other block that is not text stands in the text as a placeholder
  naming it (``[image: image/png]``, ``[tool_reference: Read]``) and is kept whole,
  data included, in the message's metadata ``blocks``, so nothing of it is lost;
  each ``tool_use`` an assistant message whose ``tool_call_id`` is the block id and content ``Name {json input}``; each
  ``tool_result`` a ``tool`` message answering ``tool_use_id``, its text blocks joined;
- ``thinking`` blocks are kept as assistant messages with metadata ``kind: thinking``:
  nothing is lost is the product's promise, and why a decision was made is what a later
  session looks for; the metadata lets a reader leave them out. ``redacted_thinking``
  holds no readable text and is left out.

Every message's metadata keeps what helps a later search: ``source``, ``kind``,
``model``, ``git_branch``, ``cwd``, ``parent_uuid`` and flags (``sidechain`` for a
subagent's lines, ``meta`` for injected ones, ``compact_summary``, ``is_error``). A turn
that never reached the model (Claude Code writes it as the assistant's, with ``model``
``<synthetic>`` and ``isApiErrorMessage``: not logged in, network down, a rate limit)
is kept, marked ``synthetic`` (and ``api_error``, with its ``error`` and
``api_error_status``), so it is never taken for the assistant's words or the
session's work.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from palimpsest.graph_schema.models import Name, NewMessage, Role, UtcDatetime
from palimpsest.server.agents.claude.queued_prompts import QUEUE_OPERATION, QueuedPrompts
from palimpsest.server.feeds.transcripts import (
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

#: The ``--format`` name, and the partition Claude Code sessions go to by default.
FORMAT = "claude"
PARTITION = "claude"
#: ``metadata["source"]`` of every message read from a Claude Code transcript.
SOURCE = "claude-code"
#: What ``recognizes`` says of a line that only Claude Code writes but that names no session.
MAYBE_CLAUDE = "claude?"
#: The ``model`` of a turn Claude Code wrote itself because the model was never reached.
SYNTHETIC_MODEL = "<synthetic>"
#: Line types holding conversation; every other type is bookkeeping.
CONVERSATION_TYPES = frozenset({"user", "assistant"})
#: Bookkeeping lines Claude Code writes without a ``sessionId``.
BOOKKEEPING_TYPES = frozenset({"summary", "file-history-snapshot"})
#: The ``attachment`` that carries a prompt the user typed while the agent worked, absorbed into the turn running.
QUEUED_PROMPT = "queued_command"
#: Blocks answering a tool call (the server-side tools name theirs ``*_tool_result``).
_RESULT_SUFFIX = "tool_result"


class _Message(BaseModel):
    """The Anthropic message a conversation line carries."""

    model_config = ConfigDict(extra="ignore")

    role: str | None = None
    #: A string or a list of blocks, checked by ``_pieces`` (with a clearer message than a union's).
    content: Any
    model: str | None = None


class _Line(BaseModel):
    """A conversation line; the fields Palimpsest keeps, the rest ignored."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    type: Literal["user", "assistant"]
    uuid: Name
    session_id: Name = Field(alias="sessionId")
    message: _Message
    timestamp: UtcDatetime | None = None
    parent_uuid: str | None = Field(None, alias="parentUuid")
    cwd: str | None = None
    git_branch: str | None = Field(None, alias="gitBranch")
    # Optional flags: Claude Code writes them as true, false, null or not at all.
    is_sidechain: bool | None = Field(None, alias="isSidechain")
    agent_id: str | None = Field(None, alias="agentId")
    is_meta: bool | None = Field(None, alias="isMeta")
    is_compact_summary: bool | None = Field(None, alias="isCompactSummary")
    is_api_error: bool | None = Field(None, alias="isApiErrorMessage")
    #: Why a turn never reached the model (``authentication_failed``, ``rate_limit``, ...).
    error: Any = None
    api_error_status: int | None = Field(None, alias="apiErrorStatus")

    @property
    def thread_id(self) -> str:
        """The session the line belongs to: a workflow agent's ``<session>#agent-<id>`` is its session's."""
        return self.session_id.split("#", 1)[0] or self.session_id

    @property
    def workflow_agent(self) -> str | None:
        """The ``agent-<id>`` a workflow agent's ``sessionId`` names after ``#``, if any."""
        _, mark, agent = self.session_id.partition("#")
        return agent if mark and agent else None


class _BadBlock(Exception):
    """A content block that cannot be read; becomes a ``FILE:LINE`` error."""


def recognizes(value: dict[str, Any]) -> str | None:
    """Whether a JSON line is Claude Code's: ``FORMAT``, ``MAYBE_CLAUDE`` (bookkeeping only), or ``None``."""
    kind = value.get("type")
    if not isinstance(kind, str):
        return None
    if isinstance(value.get("sessionId"), str):
        return FORMAT
    return MAYBE_CLAUDE if kind in BOOKKEEPING_TYPES else None


def _string(block: dict[str, Any], key: str, index: int) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise _BadBlock(f"message.content[{index}]: a {block.get('type')} block needs a string {key!r}")
    return value


def _placeholder(block: dict[str, Any]) -> str:
    """A non-text block named in text: ``[image: image/png]``, ``[tool_reference: Read]``, ``[kind]``.

    The block itself is kept whole in the message's metadata (``blocks``), so the text
    only says what stood there.
    """
    kind = str(block.get("type"))
    source = block.get("source")
    detail = (
        block.get("title")
        or block.get("tool_name")
        or block.get("name")
        or (source.get("media_type") if isinstance(source, dict) else None)
    )
    return f"[{kind}: {detail}]" if isinstance(detail, str) and detail else f"[{kind}]"


def _result_text(content: Any, index: int, kept: list[dict[str, Any]]) -> str:
    """A tool result's content as text: a string, or its blocks' text joined, others named and kept."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _BadBlock(f"message.content[{index}]: a tool result's content must be a string or a list of blocks")
    parts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif isinstance(part, dict):
            parts.append(_placeholder(part))
            kept.append(part)
        else:
            raise _BadBlock(f"message.content[{index}]: a tool result's blocks must be JSON objects")
    return "\n".join(parts)


def _kept(blocks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The metadata holding a message's non-text blocks verbatim, or None when it has none."""
    return {"blocks": list(blocks)} if blocks else None


def _pieces(line: _Line) -> list[Piece]:
    """The messages one conversation line holds, in block order."""
    role = Role.assistant if (line.message.role or line.type) == "assistant" else Role.user
    content = line.message.content
    if isinstance(content, str):
        return [Piece(role, content, "text")] if content else []
    if not isinstance(content, list) or not all(isinstance(block, dict) for block in content):
        raise _BadBlock("message.content must be a string or a list of JSON objects (content blocks)")
    pieces: list[Piece] = []
    texts: list[str] = []
    blocks: list[dict[str, Any]] = []

    def flush() -> None:
        if texts:
            pieces.append(Piece(role, "\n\n".join(texts), "text", extra=_kept(blocks)))
            texts.clear()
            blocks.clear()

    for index, block in enumerate(content):
        kind = block.get("type")
        if kind == "text":
            text = _string(block, "text", index)
            if text:
                texts.append(text)
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            flush()
            call_id, name = _string(block, "id", index), _string(block, "name", index)
            rendered = json.dumps(block.get("input", {}), ensure_ascii=False)
            pieces.append(Piece(Role.assistant, f"{name} {rendered}", "tool_use", call_id, {"tool_name": name}))
        elif isinstance(kind, str) and kind.endswith(_RESULT_SUFFIX):
            flush()
            call_id = _string(block, "tool_use_id", index)
            inner: list[dict[str, Any]] = []
            text = _result_text(block.get("content"), index, inner)
            extra = {**({"is_error": True} if block.get("is_error") is True else {}), **(_kept(inner) or {})}
            pieces.append(Piece(Role.tool, text, "tool_result", call_id, extra or None))
        elif kind == "thinking":
            flush()
            thought = _string(block, "thinking", index)
            if thought:
                pieces.append(Piece(Role.assistant, thought, "thinking"))
        elif kind == "redacted_thinking":
            continue
        elif isinstance(kind, str):
            texts.append(_placeholder(block))
            blocks.append(block)
        else:
            raise _BadBlock(f"message.content[{index}]: a content block needs a string 'type'")
    flush()
    return pieces


def _queued_prompt(value: dict[str, Any]) -> dict[str, Any] | None:
    """A prompt typed mid-turn, as the user line it is; None for any other line.

    Claude Code 2.1 writes such a prompt as a ``queue-operation`` ``enqueue`` (no uuid), a
    ``remove`` (``absorbed_mid_turn``) and an ``attachment`` line of type ``queued_command``
    with the ``prompt``, the line's own ``uuid``, ``sessionId`` and ``cwd``: the attachment
    is the only conversation line that holds the user's words, so it is read as theirs.
    A queued prompt of another origin than a person (none seen yet) stays bookkeeping.
    """
    attachment = value.get("attachment")
    if value.get("type") != "attachment" or not isinstance(attachment, dict):
        return None
    prompt = attachment.get("prompt")
    if attachment.get("type") != QUEUED_PROMPT or attachment.get("origin", "human") != "human":
        return None
    if not (isinstance(prompt, list) or (isinstance(prompt, str) and prompt.strip())):
        return None
    return {**value, "type": "user", "message": {"role": "user", "content": prompt}}


def _line_metadata(line: _Line) -> dict[str, Any]:
    """What every message of a line carries in its metadata."""
    metadata: dict[str, Any] = {"source": SOURCE}
    optional = {
        "model": line.message.model,
        "git_branch": line.git_branch,
        "cwd": line.cwd,
        "parent_uuid": line.parent_uuid,
        "agent_id": line.agent_id if line.is_sidechain else None,
        "workflow_agent": line.workflow_agent,
        "error": line.error,
        "api_error_status": line.api_error_status,
    }
    metadata.update({key: value for key, value in optional.items() if value})
    flags = {
        "sidechain": line.is_sidechain is True,
        "meta": line.is_meta is True,
        "compact_summary": line.is_compact_summary is True,
        "api_error": line.is_api_error is True,
        "synthetic": line.is_api_error is True or line.message.model == SYNTHETIC_MODEL,
    }
    metadata.update({key: True for key, value in flags.items() if value})
    return metadata


def parse_claude_code(
    path: Path,
    *,
    partition: str,
    progress: ProgressCallback | None = None,
    start: FilePosition | None = None,
    state: ReadState | None = None,
) -> ParsedTranscript:
    """Parse and check a Claude Code transcript into append batches, writing nothing.

    Args:
        path: The transcript.
        partition: Where its sessions go.
        progress: Called now and then with the bytes read so far.
        start: Read from this line on (what a hook does when the session is already
            stored up to there); the whole file by default.
        state: Updated with where reading stopped, for the next read to start there.

    Returns:
        The batches (one thread per session) and how many lines were bookkeeping.

    Raises:
        InvalidInput: naming ``FILE:LINE`` for the first bad line: not JSON, no
            ``type``, or a conversation line without ``uuid``, ``sessionId`` or a
            readable ``message``.
    """
    grouper = ThreadGrouper(path, strict_project=False)
    skipped = 0
    state = state if state is not None else ReadState()
    queue = QueuedPrompts()
    cwd: str | None = None
    before = start or FilePosition()

    def add(number: int, value: dict[str, Any], queued: bool) -> None:
        nonlocal skipped
        try:
            line = _Line.model_validate(value)
            pieces = _pieces(line)
        except ValidationError as exc:
            raise line_error(path, number, describe_validation(exc)) from None
        except _BadBlock as exc:
            raise line_error(path, number, str(exc)) from None
        if not pieces:
            skipped += 1
            return
        base = _line_metadata(line) | ({"queued": True} if queued else {})
        project = project_from_cwd(line.cwd)
        for position, piece in enumerate(pieces):
            grouper.add(
                number,
                partition=partition,
                thread_id=line.thread_id,
                project=project,
                message=NewMessage.model_construct(
                    role=piece.role,
                    content=piece.content,
                    message_id=line.uuid if position == 0 else f"{line.uuid}#{position}",
                    created_at=line.timestamp,
                    tool_call_id=piece.tool_call_id,
                    metadata={**base, "kind": piece.kind, **(piece.extra or {})},
                ),
            )

    for number, raw in read_lines(path, progress=progress, start=start, state=state):
        at, before = before, state.position
        value = decode_object(path, number, raw)
        kind = value.get("type")
        if not isinstance(kind, str):
            raise line_error(path, number, "not a Claude Code transcript line (no string 'type')")
        if kind == QUEUE_OPERATION:
            queue.operation(value, at)
            skipped += 1
            continue
        queued = _queued_prompt(value)
        for typed in queue.before(queued["message"]["content"] if queued else None, cwd):
            add(number, typed, True)
        cwd = value["cwd"] if isinstance(value.get("cwd"), str) else cwd
        if queued is None and kind not in CONVERSATION_TYPES:
            skipped += 1
            continue
        add(number, queued or value, queued is not None)
    unsettled = queue.unsettled()
    if unsettled is not None:
        state.position = unsettled
    return ParsedTranscript(grouper.batches(), skipped, state.position)


#: What ``palimpsest ingest`` reads as ``--format claude``; a session id makes a line Claude Code's for sure.
TRANSCRIPT_FORMAT = TranscriptFormat(
    name=FORMAT,
    partition=PARTITION,
    parse=parse_claude_code,
    recognizes=lambda value, first_line: recognizes(value),
    maybe=MAYBE_CLAUDE,
)
