"""``palimpsest hook cursor`` and ``palimpsest hook gemini`` on whole sessions, through the real CLI.

Each session (``tests/support/agent_captures.py``, in the shapes of real captures) is replayed
through the hook as the agent sends it: exactly its steps are stored, once, in order, with
every tool call paired with its result; replaying it again adds nothing; Cursor's account
fields are stored nowhere; Gemini's hook-forced retry keeps its one prompt.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from palimpsest.graph_schema.models import Message
from palimpsest.server.cli.main import app
from tests.support.agent_captures import (
    CURSOR_CONVERSATION,
    CURSOR_EXPECTED,
    EMAIL,
    GEMINI_CWD,
    GEMINI_EXPECTED,
    GEMINI_SESSION,
    PROMPT_1,
    SHELL_ID,
    append_lines,
    cursor_session,
    gemini_metadata_line,
    gemini_turns,
)
from tests.support.hooks import CLEAN_ENV, hook, silent, stored


def steps(messages: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.role.value, m.metadata["kind"], m.content) for m in messages]


def assert_calls_paired(messages: list[Message]) -> None:
    """Every result answers a call stored before it, and every finished call has its result."""
    calls = [m.tool_call_id for m in messages if m.metadata["kind"] == "tool_use"]
    results = [m.tool_call_id for m in messages if m.metadata["kind"] == "tool_result"]
    assert sorted(calls) == sorted(results) and len(set(calls)) == len(calls)
    for index, message in enumerate(messages):
        if message.metadata["kind"] == "tool_result":
            assert message.tool_call_id in [m.tool_call_id for m in messages[:index]]


def exported(store_url: str, folder: Path) -> bytes:
    """Everything the store holds, as ``palimpsest export`` writes it (uncompressed)."""
    archive = folder / "memory.jsonl.gz"
    result = CliRunner().invoke(app, ["export", str(archive), "--store", store_url], env=CLEAN_ENV)
    assert result.exit_code == 0, result.output
    return gzip.decompress(archive.read_bytes())


# -- Cursor -----------------------------------------------------------------------------------


def test_a_cursor_session_stores_every_step_once(store_url: str) -> None:
    events = cursor_session()
    for payload in events:
        result = hook("cursor", payload, store_url)
        assert result.exit_code == 0, result.output
        if payload["hook_event_name"] == "sessionStart":
            assert json.loads(result.stdout) == {"additional_context": ""}
        else:
            assert result.stdout == ""
    messages = stored(store_url, "cursor", CURSOR_CONVERSATION)
    assert steps(messages) == CURSOR_EXPECTED
    assert_calls_paired(messages)
    shell_call = next(m for m in messages if m.tool_call_id == SHELL_ID and m.metadata["kind"] == "tool_use")
    assert shell_call.source_id == SHELL_ID and shell_call.metadata["tool_name"] == "Shell"
    failed = next(m for m in messages if m.content == "Command timed out after 30000ms")
    assert failed.metadata["is_error"] is True and failed.metadata["failure_type"] == "timeout"
    summary = next(m for m in messages if m.metadata["kind"] == "subagent")
    assert summary.metadata["task"] == "List the callers of rotate()" and summary.metadata["status"] == "completed"
    for payload in events[1:]:  # Cursor sending the whole session again
        silent(hook("cursor", payload, store_url))
    assert steps(stored(store_url, "cursor", CURSOR_CONVERSATION)) == CURSOR_EXPECTED


def test_no_cursor_account_field_is_stored_anywhere(store_url: str, tmp_path: Path) -> None:
    for payload in cursor_session():
        assert hook("cursor", payload, store_url).exit_code == 0
    messages = stored(store_url, "cursor", CURSOR_CONVERSATION)
    for message in messages:
        assert EMAIL not in message.content
        assert EMAIL not in json.dumps(message.metadata) and "user_email" not in message.metadata
    archive = exported(store_url, tmp_path)
    assert CURSOR_CONVERSATION.encode() in archive and EMAIL.encode() not in archive


def test_a_shell_reported_with_its_call_id_by_after_shell_execution_is_still_stored_once(store_url: str) -> None:
    """Whichever of the two reports comes first, the command is one step under Cursor's own call id."""
    events = [payload for payload in cursor_session() if payload.get("tool_use_id") == SHELL_ID]
    after = next(p for p in cursor_session() if p["hook_event_name"] == "afterShellExecution")
    for payload in [{**after, "tool_use_id": SHELL_ID}, *events]:
        silent(hook("cursor", payload, store_url))
    messages = stored(store_url, "cursor", CURSOR_CONVERSATION)
    assert [(m.metadata["kind"], m.source_id) for m in messages] == [
        ("tool_use", SHELL_ID),
        ("tool_result", f"{SHELL_ID}:result"),
    ]


# -- Gemini CLI -------------------------------------------------------------------------------


def gemini_recording(tmp_path: Path) -> Path:
    return tmp_path / ".gemini" / "tmp" / "9f2b6c1e" / "chats" / f"session-2026-12-01T09-00-{GEMINI_SESSION[:8]}.jsonl"


def test_a_gemini_session_stores_every_step_once(store_url: str, tmp_path: Path) -> None:
    recording = gemini_recording(tmp_path)
    append_lines(recording, [gemini_metadata_line()])
    base = {"session_id": GEMINI_SESSION, "transcript_path": str(recording), "cwd": GEMINI_CWD}
    start = hook(
        "gemini",
        {**base, "hook_event_name": "SessionStart", "source": "startup", "timestamp": "2026-12-01T09:00:00.200Z"},
        store_url,
    )
    assert start.exit_code == 0, start.output
    assert json.loads(start.stdout) == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": ""}
    }
    turns = gemini_turns()
    for lines, after in turns:
        append_lines(recording, lines)
        silent(hook("gemini", {**after, "transcript_path": str(recording)}, store_url))
    messages = stored(store_url, "gemini", GEMINI_SESSION)
    assert steps(messages) == GEMINI_EXPECTED
    assert_calls_paired(messages)
    assert [m.content for m in messages].count("Then fix it.") == 1
    assert messages[0].created_at.isoformat() == "2026-12-01T09:00:00.412000+00:00"
    failed = next(m for m in messages if m.content == "0 occurrences found")
    assert failed.metadata["is_error"] is True and failed.metadata["status"] == "error"
    text = next(m for m in messages if m.content == "The rotation drops the refresh token.")
    assert text.metadata["model"] == "gemini-3-pro" and text.metadata["source"] == "gemini-cli"
    for _, after in turns:  # every hook again, and the session's end
        silent(hook("gemini", {**after, "transcript_path": str(recording)}, store_url))
    silent(hook("gemini", {**base, "hook_event_name": "SessionEnd", "reason": "exit"}, store_url))
    assert steps(stored(store_url, "gemini", GEMINI_SESSION)) == GEMINI_EXPECTED


def test_gemini_clis_session_context_is_stored_as_injected_not_as_the_users_request(tmp_path: Path) -> None:
    """Gemini CLI opens a session with its environment as a user turn (shape: the
    ``<session_context>`` turn its ``getEnvironmentContext`` builds, seen in published
    Gemini CLI session exports); it is context, not the user's words."""
    store_url = f"sqlite:///{tmp_path / 'memory.db'}"
    recording = gemini_recording(tmp_path)
    context = (
        "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
        "Today's date is Tuesday, December 1, 2026 (formatted according to the user's locale).\n"
        "My operating system is: linux\n- **Workspace Directories:**\n  - /home/dev/auth-service\n"
        "</session_context>"
    )
    (lines, after), *_ = gemini_turns()
    injected = {"id": "u-0000", "timestamp": "2026-12-01T09:00:00.300Z", "type": "user", "content": [{"text": context}]}
    append_lines(recording, [gemini_metadata_line(), injected, *lines])
    silent(hook("gemini", {**after, "transcript_path": str(recording)}, store_url))
    first, second = stored(store_url, "gemini", GEMINI_SESSION)[:2]
    assert first.content == context
    assert first.metadata["injected"] is True and first.metadata["injected_as"] == "session_context"
    assert second.content == PROMPT_1 and "injected" not in second.metadata
    start = hook(
        "gemini",
        {"session_id": "next-session", "cwd": GEMINI_CWD, "hook_event_name": "SessionStart", "source": "startup"},
        store_url,
    )
    memory = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "tests/test_refresh.py" in memory and "This is the Gemini CLI" not in memory


def test_tool_results_and_plan_mode_notices_sent_as_user_turns_are_stored_but_never_requests(tmp_path: Path) -> None:
    """Newer Gemini CLI releases record what goes back to the model on the user's side as
    ``user`` records: each batch of tool results as ``functionResponse`` parts (the results
    its call already holds), and "User has manually exited Plan Mode. ..." when the user
    leaves Plan Mode (shapes: a published Gemini CLI 0.4x ``session-*.json``). They are kept,
    marked injected, and a new session's memory lists the user's own requests only."""
    store_url = f"sqlite:///{tmp_path / 'memory.db'}"
    recording = gemini_recording(tmp_path)
    (lines, after), *_ = gemini_turns()
    first = next(line for line in lines if line.get("tokens"))
    returned = {
        "id": "u-0001-results",
        "timestamp": "2026-12-01T09:00:03.601Z",
        "type": "user",
        "content": [call["result"][0] for call in first["toolCalls"]],
    }
    notice = _mode_notice()
    append_lines(recording, [gemini_metadata_line(), notice, *lines[:5], returned, *lines[5:]])
    silent(hook("gemini", {**after, "transcript_path": str(recording)}, store_url))
    messages = {m.source_id: m for m in stored(store_url, "gemini", GEMINI_SESSION)}
    assert messages["u-0001-results"].metadata["injected_as"] == "function_response"
    assert messages["u-0001-results"].content == "[functionResponse: run_shell_command][functionResponse: read_file]"
    assert messages["u-0000-mode"].metadata["injected_as"] == "mode_change"
    assert messages["u-0001"].content == PROMPT_1 and "injected" not in messages["u-0001"].metadata
    start = hook(
        "gemini",
        {"session_id": "next-session", "cwd": GEMINI_CWD, "hook_event_name": "SessionStart", "source": "startup"},
        store_url,
    )
    memory = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Asked (1)" in memory or PROMPT_1 in memory
    assert "functionResponse" not in memory and "Plan Mode" not in memory


def _mode_notice() -> dict[str, Any]:
    text = "User has manually exited Plan Mode. Switching to Default mode (edits will require confirmation)."
    return {"id": "u-0000-mode", "timestamp": "2026-12-01T09:00:00.300Z", "type": "user", "content": [{"text": text}]}


def test_a_gemini_recording_read_whole_at_the_end_stores_the_same(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    recording = gemini_recording(tmp_path)
    append_lines(recording, [gemini_metadata_line()])
    turns = gemini_turns()
    for lines, _ in turns:
        append_lines(recording, lines)
    first_answer = next(line for line in turns[0][0] if line.get("tokens"))
    masked_calls = [{**call, "result": [{"text": "<output masked>"}]} for call in first_answer["toolCalls"]]
    snapshot = {
        "id": "snap-1",
        "timestamp": "2026-12-01T09:01:30Z",
        "type": "user",
        "content": [{"text": "<state_snapshot>rotation fixed</state_snapshot>"}],
    }
    masking = {"$set": {"messages": [{**first_answer, "toolCalls": masked_calls}, snapshot]}}
    rewind = {"$rewindTo": "u-0003"}
    append_lines(
        recording,
        [
            masking,
            rewind,
            {
                "id": "u-0004",
                "timestamp": "2026-12-01T09:02:00Z",
                "type": "user",
                "content": "Start over from the edit.",
            },
        ],
    )
    end = {"session_id": GEMINI_SESSION, "transcript_path": str(recording), "cwd": GEMINI_CWD}
    silent(hook("gemini", {**end, "hook_event_name": "PreCompress", "trigger": "auto"}, url))
    assert steps(stored(url, "gemini", GEMINI_SESSION)) == [
        *GEMINI_EXPECTED,
        ("user", "text", "<state_snapshot>rotation fixed</state_snapshot>"),
        ("user", "text", "Start over from the edit."),
    ]


def test_the_older_whole_document_recording_is_read(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    messages = []
    for lines, _ in gemini_turns():
        for line in lines:
            if "id" in line:
                messages = [m for m in messages if m["id"] != line["id"]] + [line]
    document = tmp_path / "session-2026-12-01T09-00-5b0c7a9e.json"
    document.write_text(json.dumps({**gemini_metadata_line(), "messages": messages}, indent=2), encoding="utf-8")
    payload = {"session_id": GEMINI_SESSION, "transcript_path": str(document), "cwd": GEMINI_CWD}
    silent(hook("gemini", {**payload, "hook_event_name": "SessionEnd", "reason": "exit"}, url))
    silent(hook("gemini", {**payload, "hook_event_name": "SessionEnd", "reason": "exit"}, url))
    assert sorted(steps(stored(url, "gemini", GEMINI_SESSION))) == sorted(GEMINI_EXPECTED)


def test_without_a_recording_after_agent_stores_a_retried_prompt_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    for _replay in range(2):
        for _, after in gemini_turns():
            silent(hook("gemini", {**after, "transcript_path": str(tmp_path / "none.jsonl")}, url))
    assert [(m.role.value, m.content) for m in stored(url, "gemini", GEMINI_SESSION)] == [
        ("user", "Why does tests/test_refresh.py fail? Fix it."),
        ("assistant", "The rotation drops the refresh token."),
        ("user", "Then fix it."),
        ("assistant", "I could not apply the edit."),
        ("assistant", "The edit to auth/tokens.py failed."),
    ]


def test_a_subagent_recording_lands_in_the_session_thread(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    recording = gemini_recording(tmp_path)
    append_lines(recording, [gemini_metadata_line(), *gemini_turns()[0][0]])
    sub = recording.parent / GEMINI_SESSION / "c0ffee00-1111-2222-3333-444455556666.jsonl"
    append_lines(
        sub,
        [
            {**gemini_metadata_line(), "sessionId": "c0ffee00-1111-2222-3333-444455556666", "kind": "subagent"},
            {"id": "s-1", "timestamp": "2026-12-01T09:00:02Z", "type": "user", "content": [{"text": "Find callers"}]},
            {"id": "s-2", "timestamp": "2026-12-01T09:00:03Z", "type": "gemini", "content": "auth/refresh.py:41"},
        ],
    )
    after = gemini_turns()[0][1]
    silent(hook("gemini", {**after, "transcript_path": str(recording)}, url))
    messages = stored(url, "gemini", GEMINI_SESSION)
    tail = [(m.content, m.metadata.get("subagent")) for m in messages[-2:]]
    assert tail == [("Find callers", sub.stem), ("auth/refresh.py:41", sub.stem)]


def test_a_bad_gemini_record_exits_1_naming_the_line_and_stores_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    recording = gemini_recording(tmp_path)
    append_lines(
        recording, [gemini_metadata_line(), {"id": "u-1", "timestamp": "yesterday", "type": "user", "content": "hi"}]
    )
    payload = {"session_id": GEMINI_SESSION, "transcript_path": str(recording), "hook_event_name": "AfterAgent"}
    result = hook("gemini", payload, url)
    assert (result.exit_code, result.stdout) == (1, "")
    assert f"{recording}:2:" in result.stderr and result.stderr.count("\n") == 1
    stats = CliRunner().invoke(app, ["stats", "--store", url, "--all-partitions", "--json"], env=CLEAN_ENV)
    assert json.loads(stats.stdout)["messages"] == 0
