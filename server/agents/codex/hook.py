"""What ``palimpsest hook codex`` reads: Codex's hook payload and the session's rollout.

Codex runs hooks (``hooks.json`` or ``[hooks]`` in ``config.toml``) on ``SessionStart``,
``UserPromptSubmit``, ``PreCompact`` and ``Stop``, with ``{"session_id",
"transcript_path", "cwd", "hook_event_name", "source"?, ...}`` on stdin.
``transcript_path`` may be null (an ephemeral session, some builds): the rollout is
then found under ``$CODEX_HOME/sessions`` (default ``~/.codex/sessions``) by the
session id its name ends with. On ``SessionStart`` Codex takes
``hookSpecificOutput.additionalContext`` (always printed there, even empty: Codex
refuses a SessionStart output without it); on the other events nothing is printed.
A rollout not found (not written yet, or never) is no error: nothing is stored, and a
``Stop`` whose rollout is missing or lacks the turn's end asks for a follow-up
(``follow_up_s``) that stores it once Codex has written it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from palimpsest.server.agents.codex.transcript import FORMAT, PARTITION, parse_codex
from palimpsest.server.feeds.hooks import (
    LATE_TRANSCRIPT_S,
    HookRequest,
    TranscriptFile,
    answer_session_start,
    text_field,
    transcript_path,
)

AGENT = PARTITION


def sessions_dir() -> Path:
    """Where Codex keeps rollouts: ``$CODEX_HOME/sessions``, default ``~/.codex/sessions``."""
    home = os.environ.get("CODEX_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".codex") / "sessions"


def find_rollout(session: str) -> Path | None:
    """The newest rollout whose name ends with the session id, if any."""
    folder = sessions_dir()
    if not folder.is_dir():
        return None
    found = sorted(path for path in folder.rglob(f"rollout-*{session}.jsonl") if path.is_file())
    return found[-1] if found else None


def request(payload: dict[str, Any]) -> HookRequest:
    """Codex's payload as a `HookRequest`.

    Raises:
        InvalidInput: without ``session_id``.
    """
    session = text_field(payload, "session_id", required=True)
    assert session is not None
    event = text_field(payload, "hook_event_name") or "Stop"
    given = text_field(payload, "transcript_path")
    rollout = transcript_path(given) if given else find_rollout(session)
    files = [TranscriptFile(rollout, parse_codex)] if rollout is not None else []
    request = HookRequest(
        agent=FORMAT, event=event, thread_id=session, cwd=text_field(payload, "cwd"), transcripts=files
    )
    if event == "SessionStart":
        answer_session_start(request, payload)
    elif event == "Stop":
        request.follow_up_s = LATE_TRANSCRIPT_S
    return request
