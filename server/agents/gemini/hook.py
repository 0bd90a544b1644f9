"""What ``palimpsest hook gemini`` reads: Gemini CLI's hook payload and the chat recording it names.

Gemini CLI runs hooks from ``settings.json`` with ``{"session_id", "transcript_path", "cwd",
"hook_event_name", "timestamp", ...}`` on stdin; ``SessionStart`` adds ``source``,
``AfterAgent`` the turn's ``prompt``, ``prompt_response`` and ``stop_hook_active``.

- Capture: the chat recording ``transcript_path`` names, from where the last run stopped
  (`palimpsest.server.agents.gemini.transcript`), then each subagent's recording beside it
  (``chats/<session id>/*.jsonl``), into the session's thread. The recording holds every
  message, thought and tool call with their own ids and times, so a turn that an
  ``AfterAgent`` hook sent back for another try (``stop_hook_active``: the same prompt, a
  new response) keeps its one prompt and both responses, as Gemini recorded them. An
  ``AfterAgent`` whose recording lacks the response asks for a follow-up (``follow_up_s``).
- Without a recording (Gemini CLI can run with recording off): ``AfterAgent`` stores the
  payload's ``prompt`` and ``prompt_response``, the prompt only when ``stop_hook_active`` is
  false (a retry repeats it), ids fixed by the payload so a payload sent twice adds
  nothing; the other events store nothing and exit 0.
- Memory: on ``SessionStart``, ``hookSpecificOutput.additionalContext``: the project's earlier
  sessions, or this thread's context after ``resume``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.models import Role
from palimpsest.server.agents.gemini.transcript import SOURCE, parse_gemini_chat
from palimpsest.server.feeds.hooks import (
    LATE_TRANSCRIPT_S,
    HookRequest,
    IncrementalParser,
    TranscriptFile,
    answer_session_start,
    hook_message,
    text_field,
    transcript_path,
)
from palimpsest.server.feeds.transcripts import FilePosition, ParsedTranscript, ReadState, project_from_cwd

AGENT = "gemini"


def subagent_files(transcript: Path, session: str) -> list[Path]:
    """The recordings of the session's subagents: ``chats/<session id>/*.jsonl``, in path order."""
    folder = transcript.parent / session
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.glob("*.jsonl") if path.is_file())


def _parser(session: str, project: str | None, subagent: str | None) -> IncrementalParser:
    def parse(path: Path, *, partition: str, start: FilePosition | None, state: ReadState) -> ParsedTranscript:
        return parse_gemini_chat(
            path, partition=partition, thread_id=session, project=project, start=start, state=state, subagent=subagent
        )

    return parse


def _after_agent(request: HookRequest, session: str, payload: dict[str, Any]) -> None:
    """The turn an ``AfterAgent`` payload carries, for a session Gemini CLI does not record."""
    when = text_field(payload, "timestamp")
    prompt, response = text_field(payload, "prompt"), text_field(payload, "prompt_response")
    key = f"{session}\n{when}\n{prompt}\n{response}"
    turn = hashlib.sha256(key.encode()).hexdigest()[:32]
    if prompt and payload.get("stop_hook_active") is not True:
        request.inline.append(hook_message(Role.user, prompt, f"{turn}:prompt", "text", SOURCE, created_at=when))
    if response:
        request.inline.append(
            hook_message(Role.assistant, response, f"{turn}:response", "text", SOURCE, created_at=when)
        )


def request(payload: dict[str, Any]) -> HookRequest:
    """Gemini CLI's payload as a `HookRequest`.

    Raises:
        InvalidInput: without ``session_id``; a ``timestamp`` that is not a date-time
            (when the payload's own turn is stored).
    """
    session = text_field(payload, "session_id", required=True)
    assert session is not None
    event = text_field(payload, "hook_event_name") or ""
    cwd = text_field(payload, "cwd")
    request = HookRequest(agent=AGENT, event=event, thread_id=session, cwd=cwd)
    path_text = text_field(payload, "transcript_path")
    transcript = transcript_path(path_text) if path_text else None
    project = project_from_cwd(cwd)
    if transcript is not None and transcript.exists():
        request.transcripts.append(TranscriptFile(transcript, _parser(session, project, None)))
        for path in subagent_files(transcript, session):
            request.transcripts.append(TranscriptFile(path, _parser(session, project, path.stem)))
        if event == "AfterAgent":
            request.follow_up_s = LATE_TRANSCRIPT_S
    elif event == "AfterAgent":
        _after_agent(request, session, payload)
    if event == "SessionStart":
        answer_session_start(request, payload)
    return request
