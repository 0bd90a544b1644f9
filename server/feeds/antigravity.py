"""What ``palimpsest hook antigravity`` reads: both hook shapes Antigravity's ``agy`` is documented with.

Antigravity's hooks are documented two ways, and which one a given ``agy`` build runs is
not settled, so both are accepted:

- Gemini CLI's format (``~/.gemini/settings.json``): ``{"session_id",
  "transcript_path", "cwd", "hook_event_name", "timestamp", ...}`` with ``SessionStart``
  (``source``), ``AfterAgent`` (``prompt``, ``prompt_response``), ``PreCompress`` and
  ``SessionEnd``. ``AfterAgent`` carries the turn itself: the prompt and the reply are
  stored from it (ids derived from the session, the time and the text, so a replayed
  payload adds nothing). Gemini's own ``transcript_path`` is a JSON document, not lines,
  and is not read. ``SessionStart`` takes ``hookSpecificOutput.additionalContext``.
- ``agy``'s own format (``~/.gemini/config/hooks.json``, ``.agents/hooks.json``):
  camelCase ``{"conversationId", "transcriptPath", "workspacePaths", "stepIdx", ...}``
  on ``PreInvocation``, ``PostInvocation``, ``Stop``, ``PreToolUse``, ``PostToolUse``;
  ``transcriptPath`` (``brain/<conversation>/.system_generated/logs/transcript.jsonl``)
  is read incrementally (`palimpsest.server.feeds.steps`). No context can be handed back.

Thread = ``session_id`` or ``conversationId``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import Role
from palimpsest.server.feeds.hooks import HookRequest, TranscriptFile, answer_session_start, hook_message, text_field
from palimpsest.server.feeds.steps import parse_steps
from palimpsest.server.feeds.transcripts import FilePosition, ParsedTranscript, ReadState, project_from_cwd

AGENT = "antigravity"
SOURCE = "antigravity"


def _turn_id(session: str, payload: dict[str, Any]) -> str:
    key = f"{session}\n{payload.get('timestamp')}\n{payload.get('prompt')}\n{payload.get('prompt_response')}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _workspace(payload: dict[str, Any]) -> str | None:
    paths = payload.get("workspacePaths")
    first = paths[0] if isinstance(paths, list) and paths and isinstance(paths[0], str) else None
    return text_field(payload, "cwd") or first


def antigravity_request(payload: dict[str, Any]) -> HookRequest:
    """Antigravity's payload, in either shape, as a `HookRequest`.

    Raises:
        InvalidInput: without ``session_id`` or ``conversationId``; a native payload
            whose ``transcriptPath`` is not a file.
    """
    thread = text_field(payload, "session_id", "conversationId", required=True)
    assert thread is not None
    event = text_field(payload, "hook_event_name", "hookEventName") or ""
    cwd = _workspace(payload)
    request = HookRequest(agent=AGENT, event=event, thread_id=thread, cwd=cwd)
    native = text_field(payload, "transcriptPath")
    if native is not None:
        path = Path(native).expanduser()
        if not path.is_file():
            raise InvalidInput(f"transcript {path} of conversation {thread!r} is not a file")
        project = project_from_cwd(cwd)

        def parse(path: Path, *, partition: str, start: FilePosition | None, state: ReadState) -> ParsedTranscript:
            return parse_steps(
                path, partition=partition, thread_id=thread, project=project, source=SOURCE, start=start, state=state
            )

        request.transcripts.append(TranscriptFile(path, parse))
    if event == "AfterAgent":
        turn, when = _turn_id(thread, payload), text_field(payload, "timestamp")
        prompt, response = text_field(payload, "prompt"), text_field(payload, "prompt_response")
        if prompt:
            request.inline.append(hook_message(Role.user, prompt, f"{turn}:prompt", "text", SOURCE, created_at=when))
        if response:
            request.inline.append(
                hook_message(Role.assistant, response, f"{turn}:response", "text", SOURCE, created_at=when)
            )
    if event == "SessionStart":
        answer_session_start(request, payload)
    return request
