"""What ``palimpsest hook antigravity`` reads: the hooks of Antigravity's ``agy`` and its transcript.

``agy`` runs the hooks of ``~/.gemini/config/hooks.json`` (or a project's
``.agents/hooks.json``) with camelCase payloads that name no event: every one carries
``conversationId``, ``workspacePaths``, ``transcriptPath`` and ``artifactDirectoryPath``;
``PreInvocation``/``PostInvocation`` add ``invocationNum`` and ``initialNumSteps``,
``PreToolUse``/``PostToolUse`` ``stepIdx`` (and ``toolCall``, ``error``), ``Stop``
``executionNum``, ``terminationReason`` and ``fullyIdle``. Thread = ``conversationId``.
No context can be handed back.

The transcript (``brain/<conversation>/.system_generated/logs/transcript.jsonl``) is
read whole at every call (`palimpsest.server.feeds.steps`). ``agy`` writes it after its
``Stop`` hook, often seconds later, so a ``Stop`` may find no file, or a file without the
last answer: that is no error. The request then asks the runner to catch up for
``FOLLOW_UP_S`` seconds after the hook returns, and the next turn's ``PreInvocation``
(also registered) reads what is still missing.

What each step (``{"step_index", "source", "type", "status", "created_at", ...}``) becomes
(`AgySteps`):

- ``USER_INPUT``: the user's message: the text of its ``<USER_REQUEST>`` block (the whole
  content when unwrapped); the other blocks (``<ADDITIONAL_METADATA>``,
  ``<USER_SETTINGS_CHANGE>``, ...) kept in metadata ``wrapped`` to be read, and the exact
  text around the request in ``around`` (``[before, after]``), so the step's content is
  ``before + message + after`` byte for byte;
- ``PLANNER_RESPONSE``: ``thinking`` as a ``thinking`` message, ``content`` as the
  assistant's text, each of ``tool_calls`` as a ``tool_use`` (``name {args}``, the args'
  JSON-encoded values decoded);
- any other step with source ``MODEL`` (``LIST_DIRECTORY``, ``RUN_COMMAND``, ``VIEW_FILE``,
  ``GENERIC``, ...): a tool's result, a ``tool`` message answering the next open call of
  the planner response before it (``is_error`` when its status is ``ERROR``);
- any other step (``CONVERSATION_HISTORY``, ``CHECKPOINT``, ``SYSTEM_MESSAGE``, ...): kept
  whole (`palimpsest.server.feeds.steps.kept_whole`).
"""

from __future__ import annotations

import json
import re
from collections import deque
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.models import Role
from palimpsest.server.feeds.hooks import HookRequest, TranscriptFile, text_field, transcript_path
from palimpsest.server.feeds.steps import StepRead, kept_whole, parse_steps
from palimpsest.server.feeds.transcripts import (
    JSON_ERRORS,
    FilePosition,
    ParsedTranscript,
    Piece,
    ReadState,
    project_from_cwd,
)

AGENT = "antigravity"
SOURCE = "antigravity"
#: Seconds ``agy`` may take to write its transcript after ``Stop`` (seen: a few seconds).
FOLLOW_UP_S = 30.0
#: A tagged block of a ``USER_INPUT`` step's content: ``<TAG>\ntext\n</TAG>``.
_BLOCK = re.compile(r"<([A-Z][A-Z0-9_]*)>\n?(.*?)\n?</\1>", re.DOTALL)


def _event(payload: dict[str, Any]) -> str:
    """The event a payload is from, told by its fields (``agy`` names none)."""
    named = text_field(payload, "hookEventName", "hook_event_name")
    if named:
        return named
    if any(key in payload for key in ("terminationReason", "fullyIdle", "executionNum")):
        return "Stop"
    if "toolCall" in payload:
        return "PreToolUse"
    if "stepIdx" in payload:
        return "PostToolUse"
    return "Invocation" if "invocationNum" in payload else ""


def _workspace(payload: dict[str, Any]) -> str | None:
    paths = payload.get("workspacePaths")
    return paths[0] if isinstance(paths, list) and paths and isinstance(paths[0], str) else None


def _request_text(content: str) -> tuple[str, dict[str, Any]]:
    """A ``USER_INPUT``'s request, and what wraps it: its other blocks by tag, and the exact text around it.

    ``wrapped`` holds the other blocks by tag (text outside every block under ``""``) for a
    reader; ``around`` holds the content before and after the request's own text, tags and
    newlines included, so ``around[0] + request + around[1]`` gives the step back exactly.
    """
    matches = list(_BLOCK.finditer(content))
    request = next((match for match in matches if match.group(1) == "USER_REQUEST"), None)
    if request is None:
        return content, {}
    outside = _BLOCK.sub("", content).strip()
    wrapped: dict[str, str] = {match.group(1): match.group(2) for match in matches if match is not request}
    if outside:
        wrapped[""] = outside
    extra: dict[str, Any] = {"around": [content[: request.start(2)], content[request.end(2) :]]}
    if wrapped:
        extra["wrapped"] = wrapped
    return request.group(2), extra


def _named(call: Any) -> bool:
    return isinstance(call, dict) and isinstance(call.get("name"), str)


def _decoded(args: Any) -> Any:
    """A tool call's args with each JSON-encoded value decoded (``agy`` writes ``"\\"/tmp\\""``)."""
    if isinstance(args, str):
        return _decoded_value(args)
    if isinstance(args, dict):
        return {key: _decoded_value(item) if isinstance(item, str) else item for key, item in args.items()}
    return args


def _decoded_value(text: str) -> Any:
    try:
        return json.loads(text)
    except JSON_ERRORS:
        return text


class AgySteps:
    """What each step of an ``agy`` transcript becomes (see the module's docstring).

    Keeps, while one file is read, the planner response's calls that no result has
    answered yet, and which call each result step (by ``step_index``) answered, so a
    step logged again (``RUNNING``, then ``DONE``) answers the same call.
    """

    def __init__(self) -> None:
        self._open: deque[tuple[str, str]] = deque()
        self._answered: dict[int, tuple[str, str]] = {}

    def turn_text(self, value: dict[str, Any]) -> str | None:
        """A ``USER_INPUT`` step's request (it opens a turn)."""
        if value.get("type") != "USER_INPUT":
            return None
        content = value.get("content")
        return _request_text(content)[0] if isinstance(content, str) else ""

    def read(self, value: dict[str, Any], step_id: str) -> StepRead:
        """The step's messages: the prompt, the planner's thinking, text and calls, a result, or the step whole."""
        kind, source, content = value.get("type"), value.get("source"), value.get("content")
        rest = dict(value)
        if kind == "USER_INPUT" and isinstance(content, str) and content:
            self._open.clear()
            text, extra = _request_text(content)
            rest.pop("content")
            return StepRead([Piece(Role.user, text, "text", extra=extra or None)], rest)
        if kind == "PLANNER_RESPONSE":
            return self._planner(value, step_id, rest)
        if source == "MODEL":
            return self._result(value, rest)
        return kept_whole(value)

    def _planner(self, value: dict[str, Any], step_id: str, rest: dict[str, Any]) -> StepRead:
        self._open.clear()
        pieces = [
            Piece(Role.assistant, value[key], kind)
            for key, kind in (("thinking", "thinking"), ("content", "text"))
            if isinstance(value.get(key), str) and value[key]
        ]
        for key in ("thinking", "content"):
            if isinstance(value.get(key), str):
                rest.pop(key)
        calls = value.get("tool_calls")
        if isinstance(calls, list) and all(_named(call) for call in calls):
            rest.pop("tool_calls")
            for number, call in enumerate(calls):
                own = call.get("id")
                call_id = own if isinstance(own, str) and own else f"{step_id}:{number}"
                args = _decoded(call.get("args", call.get("arguments", {})))
                extra: dict[str, Any] = {"tool_name": call["name"]}
                others = {key: item for key, item in call.items() if key not in ("name", "args", "arguments", "id")}
                if others:
                    extra["call"] = others
                content = f"{call['name']} {json.dumps(args, ensure_ascii=False)}"
                pieces.append(Piece(Role.assistant, content, "tool_use", call_id, extra))
                self._open.append((call_id, call["name"]))
        return StepRead(pieces, rest) if pieces else kept_whole(value)

    def _result(self, value: dict[str, Any], rest: dict[str, Any]) -> StepRead:
        index = value.get("step_index")
        call = self._answered.get(index) if isinstance(index, int) else None
        if call is None and self._open:
            call = self._open.popleft()
            if isinstance(index, int):
                self._answered[index] = call
        content = value.get("content")
        text = content if isinstance(content, str) and content else f"[{value.get('type')}]"
        if isinstance(content, str):
            rest.pop("content")
        extra: dict[str, Any] = {"tool_name": call[1]} if call else {}
        if value.get("status") == "ERROR":
            extra["is_error"] = True
        return StepRead([Piece(Role.tool, text, "tool_result", call[0] if call else None, extra)], rest)


def request(payload: dict[str, Any]) -> HookRequest:
    """``agy``'s payload as a `HookRequest`: the conversation's transcript, read whole.

    Raises:
        InvalidInput: without ``conversationId`` or ``transcriptPath``.
    """
    thread = text_field(payload, "conversationId", required=True)
    given = text_field(payload, "transcriptPath", required=True)
    assert thread is not None and given is not None
    event = _event(payload)
    cwd = _workspace(payload)
    request = HookRequest(agent=AGENT, event=event, thread_id=thread, cwd=cwd)
    project = project_from_cwd(cwd)

    def parse(path: Path, *, partition: str, start: FilePosition | None, state: ReadState) -> ParsedTranscript:
        """The whole transcript, whatever ``start`` says: ``agy`` rewrites steps in place."""
        reader = AgySteps()
        return parse_steps(
            path, partition=partition, thread_id=thread, project=project, source=SOURCE, reader=reader, state=state
        )

    request.transcripts.append(TranscriptFile(transcript_path(given), parse, reads_whole=True))
    if event == "Stop":
        request.follow_up_s = FOLLOW_UP_S
    return request
