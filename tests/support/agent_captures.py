"""Sessions of Cursor and Gemini CLI, written in exactly the shapes their real captures show.

Nothing here is copied from a capture; each shape is taken from one, named where it is built:

- Cursor 3.9 hook payloads: the common fields (``conversation_id``, ``generation_id``,
  ``model``, ``hook_event_name``, ``cursor_version``, ``workspace_roots``, ``user_email``,
  ``transcript_path``) and the per-event fields of ``sessionStart``, ``sessionEnd``,
  ``preToolUse`` / ``postToolUse`` (``tool_use_id`` of the form ``call_…\\nctc_…``, a
  ``tool_output`` that is a JSON string, ``duration``), ``subagentStart`` / ``subagentStop``
  are those captured by entireio/cli (``cmd/entire/cli/agent/cursor/AGENT.md``, "Captured
  Payloads"); ``beforeShellExecution`` / ``afterShellExecution`` (``command``, ``cwd``,
  ``output``, ``duration``, ``sandbox``), ``afterFileEdit`` (``file_path``, ``edits``),
  ``afterAgentThought`` (``text``, ``duration_ms``), ``stop`` (``status``, ``loop_count``) and
  ``postToolUseFailure`` (``error_message``, ``failure_type``, ``is_interrupt``) follow Cursor's
  hooks reference (cursor.com/docs/hooks) as mirrored by pcomans/caruso
  (``reference/cursor_hooks.md``) and CorridorSecurity/hookshot's tests. The order (pre, before,
  after, post around each tool) is the agent loop's.
- Gemini CLI chat recordings: the JSON Lines records (a metadata line, message records written
  again as they grow, ``$set`` lines, ``$rewindTo``) as google-gemini/gemini-cli writes them
  (``packages/core/src/services/chatRecordingService.ts``, ``chatRecordingTypes.ts``); a
  message's fields (``thoughts`` with ``subject``/``description``, ``toolCalls`` with
  ``functionResponse`` results, ``resultDisplay``, ``status``, ``displayName``, ``tokens``) as in
  entireio/cli's ``cmd/entire/cli/agent/geminicli/testdata/attribution_session.json``; hook
  payloads as in gemini-cli's ``docs/hooks/reference.md`` and ``packages/core/src/hooks/types.ts``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EMAIL = "dana.kowalski@example.org"
CURSOR_CONVERSATION = "6f1d2c4e-8b7a-4e1f-9c3d-2a5b6c7d8e9f"
WORKSPACE = "/home/dana/src/billing-api"

READ_ID = "call_Q2h1bmsgb2YgYSBpZA\nctc_0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071"
SHELL_ID = "call_cnVuIHRoZSB0ZXN0cw\nctc_1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182"
EDIT_ID = "call_ZWRpdCB0aGUgZmlsZQ\nctc_2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293"
FAIL_ID = "call_ZmFpbGluZyBzaGVsbA\nctc_3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071829304"
TASK_ID = "call_c3ViYWdlbnQgdGFzaw\nctc_4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182930415"
PYTEST_OUT = "F.\n=== FAILURES ===\ntest_refresh_after_rotation: assert 401 == 200\n1 failed, 1 passed in 0.31s"
SHELL_OUTPUT = json.dumps({"exitCode": 1, "stdout": PYTEST_OUT, "stderr": ""})
READ_OUTPUT = json.dumps({"content": "def rotate(token):\n    return issue(token.sub)\n", "totalLines": 2})
EDIT_INPUT = {
    "path": f"{WORKSPACE}/auth/tokens.py",
    "old_string": "return issue(token.sub)",
    "new_string": "return issue(token.sub, keep_refresh=True)",
}


def cursor_session() -> list[dict[str, Any]]:
    """One Cursor 3.9 conversation, every hook payload in the order Cursor sends them."""
    base = {
        "conversation_id": CURSOR_CONVERSATION,
        "model": "claude-4.6-sonnet",
        "cursor_version": "3.9.2",
        "workspace_roots": [WORKSPACE],
        "user_email": EMAIL,
        "transcript_path": None,
    }

    def event(name: str, generation: str, **fields: Any) -> dict[str, Any]:
        return {**base, "hook_event_name": name, "generation_id": generation, **fields}

    g1, g2 = "3a9f0e12-77c1-4d0b-a5e2-1f9c8b7d6e51", "8c2d4f6a-1b3e-4c5d-9e7f-0a1b2c3d4e5f"
    shell = {"command": "pytest -q tests/test_refresh.py", "working_directory": WORKSPACE}
    failing = {"command": "pytest -q tests/test_rotation.py", "working_directory": WORKSPACE}
    task = {"description": "Find every caller of rotate", "prompt": "List the callers of rotate()"}
    return [
        event(
            "sessionStart",
            g1,
            session_id=CURSOR_CONVERSATION,
            is_background_agent=False,
            composer_mode="agent",
        ),
        event("beforeSubmitPrompt", g1, prompt="The refresh test fails after rotation; fix it.", attachments=[]),
        event("afterAgentThought", g1, text="Read the rotation code before touching the test.", duration_ms=1840),
        event(
            "preToolUse", g1, tool_name="Read", tool_input={"path": f"{WORKSPACE}/auth/tokens.py"}, tool_use_id=READ_ID
        ),
        event("beforeReadFile", g1, file_path=f"{WORKSPACE}/auth/tokens.py", content="def rotate(token): ..."),
        event(
            "postToolUse",
            g1,
            tool_name="Read",
            tool_input={"path": f"{WORKSPACE}/auth/tokens.py"},
            tool_output=READ_OUTPUT,
            duration=12.4,
            tool_use_id=READ_ID,
            cwd=WORKSPACE,
        ),
        event("preToolUse", g1, tool_name="Shell", tool_input=shell, tool_use_id=SHELL_ID),
        event("beforeShellExecution", g1, command=shell["command"], cwd=WORKSPACE, sandbox=False),
        event("afterShellExecution", g1, command=shell["command"], output=PYTEST_OUT, duration=1310, sandbox=False),
        event(
            "postToolUse",
            g1,
            tool_name="Shell",
            tool_input=shell,
            tool_output=SHELL_OUTPUT,
            duration=1322.7,
            tool_use_id=SHELL_ID,
            cwd=WORKSPACE,
        ),
        event("preToolUse", g1, tool_name="StrReplace", tool_input=EDIT_INPUT, tool_use_id=EDIT_ID),
        event(
            "afterFileEdit",
            g1,
            file_path=EDIT_INPUT["path"],
            edits=[{"old_string": EDIT_INPUT["old_string"], "new_string": EDIT_INPUT["new_string"]}],
        ),
        event(
            "postToolUse",
            g1,
            tool_name="StrReplace",
            tool_input=EDIT_INPUT,
            tool_output=json.dumps({"success": True}),
            duration=36.8,
            tool_use_id=EDIT_ID,
            cwd=WORKSPACE,
        ),
        event("preToolUse", g1, tool_name="Shell", tool_input=failing, tool_use_id=FAIL_ID),
        event(
            "postToolUseFailure",
            g1,
            tool_name="Shell",
            tool_input=failing,
            tool_use_id=FAIL_ID,
            cwd=WORKSPACE,
            error_message="Command timed out after 30000ms",
            failure_type="timeout",
            duration=30001,
            is_interrupt=False,
        ),
        event(
            "subagentStart",
            g1,
            subagent_id="a7e3c1d9-5b2f-4e8a-9c6d-3f1e2b4a5c7d",
            subagent_type="generalPurpose",
            subagent_model="composer-2",
            task=task["prompt"],
            parent_conversation_id=CURSOR_CONVERSATION,
            tool_call_id=TASK_ID,
            is_parallel_worker=False,
        ),
        event(
            "subagentStop",
            g1,
            subagent_id="a7e3c1d9-5b2f-4e8a-9c6d-3f1e2b4a5c7d",
            subagent_type="generalPurpose",
            status="completed",
            duration_ms=8120,
            summary="rotate() is called from auth/refresh.py:41 and jobs/sweep.py:12.",
            parent_conversation_id=CURSOR_CONVERSATION,
            message_count=6,
            tool_call_count=2,
            modified_files=[],
            loop_count=0,
            task=task["prompt"],
            description=task["description"],
            agent_transcript_path="/home/dana/.cursor/projects/x/agent-transcripts/a7e3/a7e3.jsonl",
        ),
        event("afterAgentResponse", g1, text="Fixed: rotation now keeps the refresh token; the test passes."),
        event("stop", g1, status="completed", loop_count=0, session_id=CURSOR_CONVERSATION),
        event("beforeSubmitPrompt", g2, prompt="Thanks. Add a changelog line.", attachments=[]),
        event("afterAgentResponse", g2, text="Added under Unreleased."),
        event("stop", g2, status="completed", loop_count=0, session_id=CURSOR_CONVERSATION),
        event(
            "sessionEnd",
            g2,
            session_id=CURSOR_CONVERSATION,
            reason="completed",
            duration_ms=94012,
            is_background_agent=False,
            final_status="completed",
        ),
    ]


#: What the Cursor session stores, in order: (role, kind, content).
CURSOR_EXPECTED = [
    ("user", "text", "The refresh test fails after rotation; fix it."),
    ("assistant", "thinking", "Read the rotation code before touching the test."),
    ("assistant", "tool_use", f'Read {{"path": "{WORKSPACE}/auth/tokens.py"}}'),
    ("tool", "tool_result", READ_OUTPUT),
    (
        "assistant",
        "tool_use",
        f'Shell {{"command": "pytest -q tests/test_refresh.py", "working_directory": "{WORKSPACE}"}}',
    ),
    ("tool", "tool_result", SHELL_OUTPUT),
    ("assistant", "tool_use", "StrReplace " + json.dumps(EDIT_INPUT)),
    ("tool", "tool_result", '{"success": true}'),
    (
        "assistant",
        "tool_use",
        f'Shell {{"command": "pytest -q tests/test_rotation.py", "working_directory": "{WORKSPACE}"}}',
    ),
    ("tool", "tool_result", "Command timed out after 30000ms"),
    ("assistant", "subagent", "rotate() is called from auth/refresh.py:41 and jobs/sweep.py:12."),
    ("assistant", "text", "Fixed: rotation now keeps the refresh token; the test passes."),
    ("user", "text", "Thanks. Add a changelog line."),
    ("assistant", "text", "Added under Unreleased."),
]

# -- Gemini CLI -------------------------------------------------------------------------------

GEMINI_SESSION = "5b0c7a9e-3d2f-4a61-8e4b-9c1d2e3f4a5b"
GEMINI_CWD = "/home/dana/src/billing-api"
SHELL_CALL = "run_shell_command-1764579601200-7f3a2c1d9e8b"
READ_CALL = "read_file-1764579601200-0c9d8e7f6a5b"
EDIT_CALL = "replace-1764579662480-1a2b3c4d5e6f"


def _user(record_id: str, at: str, text: str) -> dict[str, Any]:
    return {"id": record_id, "timestamp": at, "type": "user", "content": [{"text": text}]}


def _gemini(record_id: str, at: str, text: str, **fields: Any) -> dict[str, Any]:
    return {"id": record_id, "timestamp": at, "type": "gemini", "content": text, "thoughts": [], **fields}


def _call(call_id: str, name: str, args: dict[str, Any], at: str, output: str | None, status: str) -> dict[str, Any]:
    call: dict[str, Any] = {"id": call_id, "name": name, "args": args, "status": status, "timestamp": at}
    if output is not None:
        key = "error" if status == "error" else "output"
        call["result"] = [{"functionResponse": {"id": call_id, "name": name, "response": {key: output}}}]
        call["resultDisplay"] = output
    call["displayName"] = {"run_shell_command": "Shell", "read_file": "ReadFile", "replace": "Edit"}[name]
    call["description"] = "tool description shown in the UI"
    call["renderOutputAsMarkdown"] = name != "run_shell_command"
    return call


TOKENS = {"input": 5210, "output": 88, "cached": 4096, "thoughts": 140, "tool": 0, "total": 5438}
THOUGHT = {"subject": "Checking the failing test", "description": "Run it first to see the assertion."}
PROMPT_1 = "Why does tests/test_refresh.py fail? Fix it."
RETRY_REASON = "Your answer does not say which file changed. Name it."


def gemini_turns() -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Each turn: the lines Gemini CLI appends to the recording, then the AfterAgent payload it sends."""
    shell_args = {"command": "pytest -q tests/test_refresh.py", "description": "Run the refresh tests"}
    read_args = {"absolute_path": f"{GEMINI_CWD}/auth/tokens.py"}
    edit_args = {
        "file_path": f"{GEMINI_CWD}/auth/tokens.py",
        "old_string": "return issue(token.sub)",
        "new_string": "return issue(token.sub, keep_refresh=True)",
        "instruction": "keep the refresh token on rotation",
    }
    calls_pending = [
        {**_call(SHELL_CALL, "run_shell_command", shell_args, "2026-12-01T09:00:01.200Z", None, "executing")},
        {**_call(READ_CALL, "read_file", read_args, "2026-12-01T09:00:01.200Z", None, "scheduled")},
    ]
    calls_done = [
        _call(SHELL_CALL, "run_shell_command", shell_args, "2026-12-01T09:00:03.410Z", PYTEST_OUT, "success"),
        _call(READ_CALL, "read_file", read_args, "2026-12-01T09:00:03.520Z", "def rotate(token): ...\n", "success"),
    ]
    thoughts = [{**THOUGHT, "timestamp": "2026-12-01T09:00:00.950Z"}]
    first = _gemini("c1f0a3b2-0001", "2026-12-01T09:00:01.200Z", "", model="gemini-3-pro", thoughts=thoughts)
    turn_one = [
        _user("u-0001", "2026-12-01T09:00:00.412Z", PROMPT_1),
        {"$set": {"lastUpdated": "2026-12-01T09:00:00.413Z"}},
        {**first, "toolCalls": calls_pending},
        {**first, "toolCalls": calls_done},
        {**first, "toolCalls": calls_done, "tokens": TOKENS},
        {"$set": {"lastUpdated": "2026-12-01T09:00:03.600Z"}},
        _gemini(
            "c1f0a3b2-0002", "2026-12-01T09:00:07.031Z", "The rotation drops the refresh token.", model="gemini-3-pro"
        ),
        {"$set": {"lastUpdated": "2026-12-01T09:00:07.032Z"}},
    ]
    edit_failed = _call(EDIT_CALL, "replace", edit_args, "2026-12-01T09:01:02.600Z", "0 occurrences found", "error")
    turn_two = [
        _user("u-0002", "2026-12-01T09:01:00.100Z", "Then fix it."),
        _gemini("c1f0a3b2-0003", "2026-12-01T09:01:02.480Z", "", model="gemini-3-pro", toolCalls=[edit_failed]),
        {"id": "i-0001", "timestamp": "2026-12-01T09:01:02.700Z", "type": "info", "content": "Request cancelled."},
        _gemini("c1f0a3b2-0004", "2026-12-01T09:01:05.000Z", "I could not apply the edit.", model="gemini-3-pro"),
    ]
    retry = [
        _user("u-0003", "2026-12-01T09:01:06.000Z", RETRY_REASON),
        _gemini(
            "c1f0a3b2-0005", "2026-12-01T09:01:08.000Z", "The edit to auth/tokens.py failed.", model="gemini-3-pro"
        ),
    ]
    payload = {"session_id": GEMINI_SESSION, "cwd": GEMINI_CWD, "hook_event_name": "AfterAgent"}
    return [
        (
            turn_one,
            {
                **payload,
                "timestamp": "2026-12-01T09:00:07.100Z",
                "prompt": PROMPT_1,
                "prompt_response": "The rotation drops the refresh token.",
                "stop_hook_active": False,
            },
        ),
        (
            turn_two,
            {
                **payload,
                "timestamp": "2026-12-01T09:01:05.100Z",
                "prompt": "Then fix it.",
                "prompt_response": "I could not apply the edit.",
                "stop_hook_active": False,
            },
        ),
        (
            retry,
            {
                **payload,
                "timestamp": "2026-12-01T09:01:08.100Z",
                "prompt": "Then fix it.",
                "prompt_response": "The edit to auth/tokens.py failed.",
                "stop_hook_active": True,
            },
        ),
    ]


def gemini_metadata_line() -> dict[str, Any]:
    """The first line of a recording."""
    return {
        "sessionId": GEMINI_SESSION,
        "projectHash": "9f2b6c1e0d4a8b7c3e5f1a2d4c6b8e0f9a1c3e5d7b9f1a3c5e7d9b1f3a5c7e9d",
        "startTime": "2026-12-01T09:00:00.100Z",
        "lastUpdated": "2026-12-01T09:00:00.100Z",
        "kind": "main",
    }


#: What the Gemini session stores, in order: (role, kind, content).
GEMINI_EXPECTED = [
    ("user", "text", PROMPT_1),
    ("assistant", "thinking", "Checking the failing test\n\nRun it first to see the assertion."),
    (
        "assistant",
        "tool_use",
        'run_shell_command {"command": "pytest -q tests/test_refresh.py", "description": "Run the refresh tests"}',
    ),
    ("assistant", "tool_use", f'read_file {{"absolute_path": "{GEMINI_CWD}/auth/tokens.py"}}'),
    ("tool", "tool_result", PYTEST_OUT),
    ("tool", "tool_result", "def rotate(token): ...\n"),
    ("assistant", "text", "The rotation drops the refresh token."),
    ("user", "text", "Then fix it."),
    (
        "assistant",
        "tool_use",
        "replace "
        + json.dumps(
            {
                "file_path": f"{GEMINI_CWD}/auth/tokens.py",
                "old_string": "return issue(token.sub)",
                "new_string": "return issue(token.sub, keep_refresh=True)",
                "instruction": "keep the refresh token on rotation",
            }
        ),
    ),
    ("tool", "tool_result", "0 occurrences found"),
    ("system", "info", "Request cancelled."),
    ("assistant", "text", "I could not apply the edit."),
    ("user", "text", RETRY_REASON),
    ("assistant", "text", "The edit to auth/tokens.py failed."),
]


def append_lines(path: Path, lines: list[dict[str, Any]]) -> None:
    """Append records the way Gemini CLI does: one compact JSON object a line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line, separators=(",", ":")) + "\n")


# -- Claude Code and Codex: what the agents write themselves ------------------------------
#
# Shapes taken from public captures (nothing copied):
#
# - Claude Code, a turn that never reached the model: an ``assistant`` line with top-level
#   ``isApiErrorMessage: true``, ``error`` (``authentication_failed``, ``rate_limit``,
#   ``server_error``) and ``apiErrorStatus``, whose ``message.model`` is ``<synthetic>`` and
#   whose content is one text block ("Please run /login · API Error: 401 ...", "API Error:
#   529 Overloaded ...", "Not logged in · Please run /login"): the record k-k1/agent-fleet
#   measured on Claude Code's transcripts (``workspace/agent/internal/transcript``, an expired
#   login, 2026-08-06), and the persisted API-error records (rate limit, 2026-08-09) that
#   Claude Code transcript readers' tests rebuild from Claude Code 2.1's own.
# - Claude Code fires ``SessionEnd`` for a session whose transcript was never written (every
#   ``claude mcp list``): ``{"session_id", "transcript_path", "cwd", "hook_event_name":
#   "SessionEnd", "reason": "other"}``, the path naming no file (seen running Claude Code 2.1
#   on a scratch HOME).
# - Codex rollouts: the user message Codex writes at a session's start, one ``input_text``
#   part ``# AGENTS.md instructions for <cwd>\n\n<INSTRUCTIONS>\n...\n</INSTRUCTIONS>`` and
#   another ``<environment_context>\n  <cwd>...</cwd>\n  <shell>zsh</shell>\n</environment_context>``;
#   ``<skills_instructions>``, ``<turn_aborted>`` and ``<codex_internal_context source="goal">``
#   user messages; a ``developer`` message of permission instructions: as Codex rollout
#   importers' test fixtures hold them (public code found by the code search for
#   ``environment_context`` rollouts).

CLAUDE_SESSION = "8d0e6f2a-1b3c-4d5e-9f7a-6b5c4d3e2f1a"
CODEX_SESSION = "019e2a41-5c3b-7d20-a1f4-3e9b8c7d6a5f"
CODEX_CWD = "/home/dana/src/ledger"


def claude_record(kind: str, uuid: str, text: str, second: int, parent: str | None, **extra: Any) -> dict[str, Any]:
    """A Claude Code transcript line (``user`` or ``assistant``), one text block."""
    message: dict[str, Any] = {"role": kind, "content": [{"type": "text", "text": text}]}
    if kind == "assistant":
        message = {"id": f"msg_{uuid}", "type": "message", "model": "claude-opus-4-5", **message}
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": WORKSPACE,
        "sessionId": CLAUDE_SESSION,
        "version": "2.1.226",
        "gitBranch": "main",
        "type": kind,
        "message": message,
        "uuid": uuid,
        "timestamp": f"2026-08-09T10:0{second // 60}:{second % 60:02d}.000Z",
        **extra,
    }


def claude_synthetic(uuid: str, text: str, second: int, parent: str, error: str, status: int) -> dict[str, Any]:
    """The line Claude Code writes in the model's place when it never reached it."""
    line = claude_record(
        "assistant", uuid, text, second, parent, error=error, isApiErrorMessage=True, apiErrorStatus=status
    )
    line["message"]["model"] = "<synthetic>"
    line["message"]["usage"] = {"input_tokens": 0, "output_tokens": 0}
    return line


def claude_session_with_failed_turns() -> list[dict[str, Any]]:
    """A session whose first two turns never reached the model (logged out, then rate limited), then one that did."""
    return [
        claude_record("user", "u1", "Why does the refresh test fail?", 0, None),
        claude_synthetic(
            "a1",
            "Please run /login · API Error: 401 OAuth access token has expired. Re-authenticate to continue.",
            1,
            "u1",
            "authentication_failed",
            401,
        ),
        claude_record("user", "u2", "Why does the refresh test fail?", 60, "a1"),
        claude_synthetic("a2", "API Error: Usage credits required.", 61, "u2", "rate_limit", 429),
        claude_record("user", "u3", "Why does the refresh test fail?", 120, "a2"),
        claude_record("assistant", "a3", "rotate() drops the token's audience; the test expects it kept.", 125, "u3"),
    ]


def codex_line(second: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": f"2026-08-10T08:00:{second:02d}.000Z", "type": kind, "payload": payload}


def codex_message(second: int, role: str, *texts: str) -> dict[str, Any]:
    part = "output_text" if role == "assistant" else "input_text"
    content = [{"type": part, "text": text} for text in texts]
    return codex_line(second, "response_item", {"type": "message", "role": role, "content": content})


AGENTS_MD = (
    f"# AGENTS.md instructions for {CODEX_CWD}\n\n<INSTRUCTIONS>\nRun pytest -q before you answer.\n</INSTRUCTIONS>"
)
ENVIRONMENT = f"<environment_context>\n  <cwd>{CODEX_CWD}</cwd>\n  <shell>zsh</shell>\n</environment_context>"
SKILLS = "<skills_instructions>\n## Skills\n- ledger-import: how rows are read\n</skills_instructions>"
GOAL = (
    '<codex_internal_context source="goal">\nContinue working toward the active thread goal.\n</codex_internal_context>'
)
PERMISSIONS = "<permissions instructions>\nFilesystem sandboxing: workspace-write.\n</permissions instructions>"
CODEX_PROMPT = "Make the importer skip blank rows"
CODEX_ANSWER = "The importer now skips blank rows; the 9 importer tests pass."


def codex_rollout_with_injections() -> list[dict[str, Any]]:
    """A Codex rollout: what Codex writes itself around one request of the user and its answer."""
    meta = {
        "id": CODEX_SESSION,
        "timestamp": "2026-08-10T08:00:00.000Z",
        "cwd": CODEX_CWD,
        "originator": "codex_cli_rs",
    }
    return [
        codex_line(0, "session_meta", meta),
        codex_message(1, "developer", PERMISSIONS),
        codex_message(2, "user", AGENTS_MD, ENVIRONMENT),
        codex_message(3, "user", SKILLS),
        codex_line(4, "turn_context", {"turn_id": "t0", "cwd": CODEX_CWD, "model": "gpt-5.5-codex"}),
        codex_message(5, "user", CODEX_PROMPT),
        codex_message(6, "assistant", CODEX_ANSWER),
        codex_message(7, "user", GOAL),
    ]


#: (role, injected_as) of each message the rollout stores, in order.
CODEX_MARKS = [
    ("system", "developer_instructions"),
    ("user", "agents_md"),
    ("user", "skills_instructions"),
    ("user", None),
    ("assistant", None),
    ("user", "codex_internal_context"),
]
