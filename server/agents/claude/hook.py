"""What ``palimpsest hook claude`` reads: Claude Code's hook payload, its transcript and its subagents'.

Claude Code runs a hook command on events such as ``SessionStart``, ``Stop`` (every
finished turn), ``PreCompact`` and ``SessionEnd``, with a JSON object on stdin:
``{"session_id", "transcript_path", "cwd", "hook_event_name", "source"?, ...}``.

- Capture: the transcript, then every ``<session>/subagents/**/*.jsonl`` beside it, so
  a subagent's messages land in the session's thread after the turn that started them
  (files there that are not transcripts, a workflow's ``journal.jsonl``, are left out).
- Memory: on ``SessionStart``, ``hookSpecificOutput.additionalContext``: the project's
  earlier sessions for ``source`` ``startup`` or ``clear``, this thread's context for
  ``resume`` or ``compact`` (the agent's own compaction just dropped it).

A missing transcript is no error, on any event: a new session has none yet, and Claude
Code fires ``SessionEnd`` (and can fire ``Stop``) for sessions it never wrote one for,
on every ``claude mcp list`` and ``claude mcp get``. The hook then stores nothing, exits
0 and prints nothing (an error there would show under the user's command). A ``Stop``
whose transcript is missing or lacks the turn's end asks for a follow-up
(``follow_up_s``): Claude Code may flush the last line a moment after the hook.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.server.agents.claude.transcript import FORMAT, PARTITION, parse_claude_code, recognizes
from palimpsest.server.feeds.hooks import (
    LATE_TRANSCRIPT_S,
    HookRequest,
    TranscriptFile,
    answer_session_start,
    text_field,
    transcript_path,
)
from palimpsest.server.feeds.transcripts import JSON_ERRORS, MAX_LINE_BYTES, open_regular

AGENT = PARTITION


def _is_claude_transcript(path: Path) -> bool:
    """Whether a file beside the transcript holds Claude Code lines (not a workflow's journal).

    Only its first non-blank line is read, and no more of it than a hook reads of a line.
    """
    try:
        with open_regular(path) as handle:
            while raw := handle.readline(MAX_LINE_BYTES):
                if raw.strip():
                    value = json.loads(raw)
                    return isinstance(value, dict) and recognizes(value) == FORMAT
    except (OSError, InvalidInput, *JSON_ERRORS):
        return False
    return False


def subagent_files(transcript: Path) -> list[Path]:
    """The transcripts of the session's subagents: ``<session>/subagents/**/*.jsonl``, in path order."""
    folder = transcript.with_suffix("") / "subagents"
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.rglob("*.jsonl") if path.is_file())


def request(payload: dict[str, Any]) -> HookRequest:
    """Claude Code's payload as a `HookRequest`.

    Raises:
        InvalidInput: without ``session_id`` or ``transcript_path``.
    """
    session = text_field(payload, "session_id", required=True)
    path_text = text_field(payload, "transcript_path", required=True)
    assert session is not None and path_text is not None
    event = text_field(payload, "hook_event_name") or "Stop"
    transcript = transcript_path(path_text)
    files = [TranscriptFile(transcript, parse_claude_code)]
    files += [TranscriptFile(path, parse_claude_code, _is_claude_transcript) for path in subagent_files(transcript)]
    request = HookRequest(
        agent=FORMAT, event=event, thread_id=session, cwd=text_field(payload, "cwd"), transcripts=files
    )
    if event == "SessionStart":
        answer_session_start(request, payload)
    elif event == "Stop":
        request.follow_up_s = LATE_TRANSCRIPT_S
    return request
