"""``palimpsest hook codex|windsurf|cursor`` on recorded sessions, through the real CLI.

For each agent, replaying a session through its hook calls stores exactly that
session's messages, once, in order, in the agent's partition and the thread its
session id names; replaying again adds nothing; bad input exits 1 with one line and
changes nothing; and the events that can take memory back get it in the agent's shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from palimpsest.server.cli.main import app
from tests.support.hooks import CLEAN_ENV, hook, silent, stored, thread_ids
from tests.support.transcripts import CODEX_EXPECTED_CONTENT, PROJECT_CWD, append_jsonl, codex_lines

CODEX_SESSION = "019d036d-c7fa-72d2-b6fd-78878bfe34e4"


def contents(store_url: str, partition: str, thread: str) -> list[tuple[str, str]]:
    return [(m.role.value, m.content) for m in stored(store_url, partition, thread)]


# -- Codex ------------------------------------------------------------------------------------


def test_codex_session_replayed_through_its_hooks(store_url: str, tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    rollout = home / "sessions" / "2026" / "11" / "30" / f"rollout-2026-11-30T10-00-00-{CODEX_SESSION}.jsonl"
    base = {"session_id": CODEX_SESSION, "cwd": PROJECT_CWD, "model": "gpt-5.5-codex", "permission_mode": "default"}
    start = hook(
        "codex",
        {**base, "hook_event_name": "SessionStart", "source": "startup", "transcript_path": None},
        store_url,
        CODEX_HOME=str(home),
    )
    assert start.exit_code == 0, start.output
    assert json.loads(start.stdout) == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": ""}
    }
    for turn in range(2):
        append_jsonl(rollout, codex_lines(CODEX_SESSION, turn))
        stop = {
            **base,
            "hook_event_name": "Stop",
            "turn_id": f"t{turn}",
            "stop_hook_active": False,
            "last_assistant_message": None,
        }
        # transcript_path null: the rollout is found under $CODEX_HOME/sessions by the session id.
        silent(hook("codex", {**stop, "transcript_path": None}, store_url, CODEX_HOME=str(home)))
    assert contents(store_url, "codex", CODEX_SESSION) == CODEX_EXPECTED_CONTENT
    messages = stored(store_url, "codex", CODEX_SESSION)
    assert [m.source_id for m in messages][:2] == ["line-3", "line-5"]
    again = {
        **base,
        "hook_event_name": "PreCompact",
        "turn_id": "t1",
        "trigger": "auto",
        "transcript_path": str(rollout),
    }
    silent(hook("codex", again, store_url))
    assert len(stored(store_url, "codex", CODEX_SESSION)) == len(CODEX_EXPECTED_CONTENT)


def test_codex_without_a_rollout_stores_nothing_and_says_nothing(tmp_path: Path) -> None:
    # Not written yet, or never: the next hook call (or the Stop's follow-up) reads it.
    url = f"sqlite:///{tmp_path / 'm.db'}"
    for given in (None, str(tmp_path / "rollout-missing.jsonl")):
        payload = {"session_id": "nope", "transcript_path": given, "hook_event_name": "Stop"}
        silent(hook("codex", payload, url, CODEX_HOME=str(tmp_path)))
    assert thread_ids(url) == []


# -- Windsurf ---------------------------------------------------------------------------------


def test_windsurf_prompt_and_response_hooks_store_the_turn(store_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "billing-api"
    common = {"trajectory_id": "t-9", "timestamp": "2026-11-30T11:00:00Z", "cwd": str(workspace)}
    turns = [
        ("pre_user_prompt", "x1", {"user_prompt": "Fix the login bug"}),
        ("post_cascade_response", "x2", {"response": "Fixed: the session cookie was not secure."}),
        ("pre_user_prompt", "x3", {"prompt": "Thanks, add a test"}),
        ("post_cascade_response", "x4", {"response": "Added tests/test_login.py."}),
    ]
    for _replay in range(2):
        for event, execution, info in turns:
            silent(
                hook(
                    "windsurf",
                    {**common, "agent_action_name": event, "execution_id": execution, "tool_info": info},
                    store_url,
                )
            )
    assert contents(store_url, "windsurf", "t-9") == [
        ("user", "Fix the login bug"),
        ("assistant", "Fixed: the session cookie was not secure."),
        ("user", "Thanks, add a test"),
        ("assistant", "Added tests/test_login.py."),
    ]
    assert (workspace / ".windsurf" / "rules" / "palimpsest.md").is_file()


# -- Cursor -----------------------------------------------------------------------------------


def test_cursor_session_replayed_through_its_hooks(store_url: str, tmp_path: Path) -> None:
    base = {"conversation_id": "c0a1", "workspace_roots": [PROJECT_CWD], "cursor_version": "2.4.1"}
    start = hook(
        "cursor", {**base, "hook_event_name": "sessionStart", "session_id": "c0a1", "generation_id": "g0"}, store_url
    )
    assert start.exit_code == 0 and json.loads(start.stdout) == {"additional_context": ""}
    events = [
        ("beforeSubmitPrompt", "g1", {"prompt": "Rename issue_token", "attachments": []}),
        ("afterAgentThought", "g1", {"text": "Search every caller first.", "duration_ms": 120}),
        ("afterAgentResponse", "g1", {"text": "Renamed in 4 files."}),
        ("stop", "g1", {"status": "completed", "loop_count": 0, "transcript_path": None}),
        ("beforeSubmitPrompt", "g2", {"prompt": "Keep an alias"}),
        ("afterAgentResponse", "g2", {"text": "Alias added."}),
    ]
    for _replay in range(2):
        for event, generation, extra in events:
            silent(hook("cursor", {**base, "hook_event_name": event, "generation_id": generation, **extra}, store_url))
    messages = stored(store_url, "cursor", "c0a1")
    assert [(m.role.value, m.content, m.metadata["kind"]) for m in messages] == [
        ("user", "Rename issue_token", "text"),
        ("assistant", "Search every caller first.", "thinking"),
        ("assistant", "Renamed in 4 files.", "text"),
        ("user", "Keep an alias", "text"),
        ("assistant", "Alias added.", "text"),
    ]


@pytest.mark.parametrize(
    ("agent", "stdin", "reason"),
    [
        ("cursor", {"hook_event_name": "stop"}, "missing field 'conversation_id'"),
        ("cursor", {"conversation_id": "c", "hook_event_name": "postToolUse"}, "postToolUse without 'tool_name'"),
        ("gemini", {"hook_event_name": "AfterAgent", "prompt": "x"}, "missing field 'session_id'"),
        (
            "gemini",
            {"session_id": "g", "hook_event_name": "AfterAgent", "prompt": "x", "timestamp": "soon"},
            "created_at",
        ),
        ("windsurf", {"agent_action_name": "pre_user_prompt", "tool_info": {}}, "missing field 'trajectory_id'"),
        ("windsurf", {"trajectory_id": "t", "agent_action_name": "pre_user_prompt", "tool_info": [1]}, "tool_info"),
        ("antigravity", {"fullyIdle": True}, "missing field 'conversationId'"),
        (
            "windsurf",
            {
                "trajectory_id": "t",
                "agent_action_name": "pre_user_prompt",
                "timestamp": "soon",
                "tool_info": {"user_prompt": "x"},
            },
            "created_at",
        ),
        ("codex", "[]", "must be a JSON object"),
    ],
)
def test_bad_payloads_exit_1_in_one_line_and_store_nothing(tmp_path: Path, agent: str, stdin: Any, reason: str) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    result = hook(agent, stdin, url)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1 and reason in result.stderr
    stats = CliRunner().invoke(app, ["stats", "--store", url, "--all-partitions", "--json"], env=CLEAN_ENV)
    assert json.loads(stats.stdout)["messages"] == 0
