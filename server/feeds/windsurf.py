"""What ``palimpsest hook windsurf`` reads: Windsurf's Cascade hook payloads.

Cascade runs hooks (``~/.codeium/windsurf/hooks.json``, ``.windsurf/hooks.json``) with
``{"agent_action_name", "trajectory_id", "execution_id", "timestamp", "tool_info"}`` on
stdin; thread = ``trajectory_id``. Two ways in, both accepted:

- ``post_cascade_response_with_transcript``: ``tool_info.transcript_path`` names the
  conversation's JSONL log, read incrementally (`palimpsest.server.feeds.steps`);
- ``pre_user_prompt`` (``tool_info.user_prompt``, or ``prompt`` in some builds) and
  ``post_cascade_response`` (``tool_info.response``): the prompt and the reply, stored
  as they come, ids ``<execution_id>:prompt`` / ``<execution_id>:response``.

Register one way or the other, not both: the two cannot be matched message for message
(the log's lines carry no ids the payloads name), so both would store each turn twice.

Cascade cannot take context from a hook's output, so after each response the project's
memory is written where it reads rules: ``<workspace>/.windsurf/rules/palimpsest.md``
(``trigger: always_on``, under 6,000 characters, rewritten only when it changes). The
workspace is the payload's ``cwd`` or first ``workspace_roots`` entry when given, else
the hook's working directory (Cascade runs hooks in the workspace).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import Role
from palimpsest.server.feeds.hooks import HookRequest, TranscriptFile, hook_message, text_field
from palimpsest.server.feeds.steps import parse_steps
from palimpsest.server.feeds.transcripts import FilePosition, ParsedTranscript, ReadState, project_from_cwd

AGENT = "windsurf"
SOURCE = "windsurf"
#: Where the rules file goes, under the workspace.
RULES_PATH = Path(".windsurf") / "rules" / "palimpsest.md"
RESPONSES = frozenset({"post_cascade_response", "post_cascade_response_with_transcript"})


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


def windsurf_request(payload: dict[str, Any]) -> HookRequest:
    """Windsurf's payload as a `HookRequest`.

    Raises:
        InvalidInput: without ``trajectory_id``; a ``tool_info`` that is not an object;
            a transcript event whose transcript is not a file.
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
        path = Path(given).expanduser()
        if not path.is_file():
            raise InvalidInput(f"transcript {path} of trajectory {thread!r} is not a file")

        def parse(path: Path, *, partition: str, start: FilePosition | None, state: ReadState) -> ParsedTranscript:
            return parse_steps(
                path, partition=partition, thread_id=thread, project=project, source=SOURCE, start=start, state=state
            )

        request.transcripts.append(TranscriptFile(path, parse))
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
