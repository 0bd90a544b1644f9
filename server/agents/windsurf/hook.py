"""What ``palimpsest hook windsurf`` reads: Windsurf's Cascade hook payloads and transcripts.

Cascade runs hooks (``~/.codeium/windsurf/hooks.json``, ``.windsurf/hooks.json``) with
``{"agent_action_name", "trajectory_id", "execution_id", "timestamp", "tool_info"}`` on
stdin; thread = ``trajectory_id``. Two ways in, both accepted:

- ``post_cascade_response_with_transcript``: ``tool_info.transcript_path`` names the
  conversation's JSONL log, one step a line, ``{"type": T, "status", T: {...}}``; every
  step is stored (`WindsurfSteps`, read by `palimpsest.server.feeds.steps`). A
  transcript not written yet, or without the response's end, is no error: what is
  there is stored, a follow-up (``follow_up_s``) and the next call read the rest;
- ``pre_user_prompt`` (``tool_info.user_prompt``, or ``prompt`` in some builds) and
  ``post_cascade_response`` (``tool_info.response``): the prompt and the reply, stored
  as they come, ids ``<execution_id>:prompt`` / ``<execution_id>:response``.

Register one way or the other, not both: the two cannot be matched message for message
(the log's lines carry no ids the payloads name), so both would store each turn twice.

What each transcript step becomes:

- ``user_input`` (``user_response``): the user's message;
- ``planner_response`` (``response``, ``thinking``): the assistant's text, and its
  thinking as a ``thinking`` message;
- a tool step (``run_command``, ``command_action``, ``code_action``, ``view_file``,
  ``grep_search``, ``find``, ``list_directory``, ``list_resources``): Cascade logs the call and its result
  as one step, so it becomes an assistant ``tool_use`` (``T {input}``, every field that
  is not a result) and, when the step holds a result (``output``, ``content``,
  ``results``, ..., ``exit_code``), a ``tool`` message answering it;
- any other step: kept whole (`palimpsest.server.feeds.steps.kept_whole`).

Cascade cannot take context from a hook's output, so after each response the project's
memory is written where it reads rules: ``<workspace>/.windsurf/rules/palimpsest.md``
(``trigger: always_on``, under 6,000 characters, rewritten only when it changes). The
workspace is the payload's ``cwd`` or first ``workspace_roots`` entry when given, else
the hook's working directory (Cascade runs hooks in the workspace).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import Role
from palimpsest.server.feeds.hooks import (
    LATE_TRANSCRIPT_S,
    HookRequest,
    TranscriptFile,
    hook_message,
    text_field,
    transcript_path,
)
from palimpsest.server.feeds.steps import StepRead, kept_whole, parse_steps, rendered
from palimpsest.server.feeds.transcripts import FilePosition, ParsedTranscript, Piece, ReadState, project_from_cwd

AGENT = "windsurf"
SOURCE = "windsurf"
#: Where the rules file goes, under the workspace.
RULES_PATH = Path(".windsurf") / "rules" / "palimpsest.md"
RESPONSES = frozenset({"post_cascade_response", "post_cascade_response_with_transcript"})
#: Cascade's tool steps, each the call and its result in one step.
TOOL_STEPS = frozenset(
    {
        "run_command",
        "command_action",
        "code_action",
        "view_file",
        "grep_search",
        "find",
        "list_directory",
        "list_resources",
    }
)
#: Fields of a tool step that are what the tool gave back (its result's text), in this order.
RESULT_TEXT = ("output", "stdout", "stderr", "content", "results", "result", "matches", "files", "entries", "resources")
#: Fields of a tool step that describe its result without being text (metadata of the result).
RESULT_FIELDS = ("exit_code", "exitCode")


def _rest(value: dict[str, Any], kind: str, inner: dict[str, Any], taken: set[str]) -> dict[str, Any]:
    """The step without what its messages took from its own object."""
    rest = {key: item for key, item in value.items() if key != kind}
    left = {key: item for key, item in inner.items() if key not in taken}
    if left:
        rest[kind] = left
    return rest


def _tool(value: dict[str, Any], kind: str, inner: dict[str, Any], call_id: str) -> StepRead:
    """A tool step: the call (its input) and, when the step holds one, the result answering it."""
    inputs = {key: item for key, item in inner.items() if key not in RESULT_TEXT and key not in RESULT_FIELDS}
    pieces = [
        Piece(
            Role.assistant,
            f"{kind} {json.dumps(inputs, ensure_ascii=False)}",
            "tool_use",
            call_id,
            {"tool_name": kind},
        )
    ]
    results = [(key, inner[key]) for key in RESULT_TEXT if key in inner]
    fields = {key: inner[key] for key in RESULT_FIELDS if key in inner}
    if results or fields:
        texts = [(key, rendered(item) if item is not None else "") for key, item in results]
        text = texts[0][1] if len(texts) == 1 else "\n\n".join(f"{key}:\n{said}" for key, said in texts)
        code = next(iter(fields.values()), 0)
        failed = value.get("status") == "error" or (isinstance(code, int) and code != 0)
        extra: dict[str, Any] = {"tool_name": kind, **fields}
        if failed:
            extra["is_error"] = True
        pieces.append(Piece(Role.tool, text or f"[{kind} result]", "tool_result", call_id, extra))
    return StepRead(pieces, {key: item for key, item in value.items() if key != kind})


class WindsurfSteps:
    """What each step of a Cascade transcript becomes (see the module's docstring)."""

    def turn_text(self, value: dict[str, Any]) -> str | None:
        """A ``user_input`` step's words (it opens a turn)."""
        if value.get("type") != "user_input":
            return None
        inner = value.get("user_input")
        found = inner.get("user_response") if isinstance(inner, dict) else None
        return found if isinstance(found, str) else ""

    def read(self, value: dict[str, Any], step_id: str) -> StepRead:
        """The step's messages: the prompt, the answer and its thinking, a tool's call and result, or the step whole."""
        kind = value.get("type")
        inner = value.get(kind) if isinstance(kind, str) else None
        if not isinstance(kind, str) or not isinstance(inner, dict):
            return kept_whole(value)
        if kind == "user_input" and isinstance(inner.get("user_response"), str) and inner["user_response"]:
            pieces = [Piece(Role.user, inner["user_response"], "text")]
            return StepRead(pieces, _rest(value, kind, inner, {"user_response"}))
        if kind == "planner_response":
            said = [
                Piece(Role.assistant, inner[key], role_kind)
                for key, role_kind in (("thinking", "thinking"), ("response", "text"))
                if isinstance(inner.get(key), str) and inner[key]
            ]
            if said:
                return StepRead(said, _rest(value, kind, inner, {"thinking", "response"}))
        if kind in TOOL_STEPS:
            return _tool(value, kind, inner, step_id)
        return kept_whole(value, inner)


def _workspace(payload: dict[str, Any], tool_info: dict[str, Any]) -> str:
    roots = payload.get("workspace_roots")
    first_root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None
    return text_field(payload, "cwd") or first_root or text_field(tool_info, "cwd") or os.getcwd()


def _call_id(payload: dict[str, Any], text: str) -> str:
    """The id a payload's message gets: its ``execution_id``, else a hash of what it says."""
    found = text_field(payload, "execution_id")
    if found:
        return found
    key = f"{payload.get('timestamp')}\n{text}".encode()
    return hashlib.sha256(key).hexdigest()[:32]


def request(payload: dict[str, Any]) -> HookRequest:
    """Windsurf's payload as a `HookRequest`.

    Raises:
        InvalidInput: without ``trajectory_id``; a ``tool_info`` that is not an object.
    """
    thread = text_field(payload, "trajectory_id", required=True)
    assert thread is not None
    event = text_field(payload, "agent_action_name") or ""
    tool_info = payload.get("tool_info") or {}
    if not isinstance(tool_info, dict):
        raise InvalidInput("hook input on stdin: tool_info must be a JSON object")
    workspace = _workspace(payload, tool_info)
    request = HookRequest(agent=AGENT, event=event, thread_id=thread, cwd=workspace)
    project = project_from_cwd(workspace)
    when = text_field(payload, "timestamp")
    if event == "post_cascade_response_with_transcript":
        given = text_field(tool_info, "transcript_path", required=True)
        assert given is not None
        path = transcript_path(given)

        def parse(path: Path, *, partition: str, start: FilePosition | None, state: ReadState) -> ParsedTranscript:
            """The whole transcript, whatever ``start`` says: Cascade rewrites it when a conversation is reverted."""
            reader = WindsurfSteps()
            return parse_steps(
                path, partition=partition, thread_id=thread, project=project, source=SOURCE, reader=reader, state=state
            )

        request.transcripts.append(TranscriptFile(path, parse, reads_whole=True))
        request.follow_up_s = LATE_TRANSCRIPT_S
    elif event == "pre_user_prompt":
        prompt = text_field(tool_info, "user_prompt", "prompt")
        if prompt:
            message_id = f"{_call_id(payload, prompt)}:prompt"
            request.inline.append(hook_message(Role.user, prompt, message_id, "text", SOURCE, created_at=when))
    elif event == "post_cascade_response":
        response = text_field(tool_info, "response")
        if response:
            message_id = f"{_call_id(payload, response)}:response"
            request.inline.append(hook_message(Role.assistant, response, message_id, "text", SOURCE, created_at=when))
    if event in RESPONSES:
        request.rules_file = Path(workspace) / RULES_PATH
    return request
