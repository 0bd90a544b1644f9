"""Windsurf (Cascade) and Antigravity (``agy``) sessions, written in the shapes their real captures show.

Neither agent publishes its transcript's line schema; these fixtures follow what people
who logged the real agents published (their data is not copied, only its shape):

- Windsurf transcript rows are exactly ``{"status", "type": T, T: {...}}``, no time and
  no id: ``user_input`` (``user_response``, ``rules_applied``), ``planner_response``
  (``response``), ``code_action`` (``path``, ``new_content``), ``command_action``
  (``command``, ``output``), ``hook_progress`` (status ``in_progress``, no payload), in
  momhq/mom ``cli/internal/watcher/adapter_windsurf.go`` and
  ``cli/internal/watcher/adapter_windsurf_test.go``; a row's status may be ``canceled``
  or ``error``, and a row may grow a fourth key (``timestamp``), in the Windsurf tests of
  other hook loggers found through the search index. The tool steps' fields
  (``run_command``: ``command``, ``cwd``, ``exit_code``, ``output``; ``view_file``:
  ``content``; ``grep_search``, ``find``, ``list_directory``, ``list_resources``) are
  those the project's notes record from a real 27-step Cascade transcript. The hook
  payload (``agent_action_name``, ``trajectory_id``, ``execution_id``, ``timestamp``,
  ``tool_info.transcript_path``, no ``cwd``) is the one Windsurf's Cascade hooks
  documentation gives (docs.windsurf.com, ``windsurf/cascade/hooks``).
- ``agy`` transcript lines ``{"step_index", "source", "type", "status", "created_at",
  "content", "thinking", "tool_calls"}``, ``USER_INPUT`` wrapped in ``<USER_REQUEST>``,
  ``<ADDITIONAL_METADATA>`` and ``<USER_SETTINGS_CHANGE>``, ``CONVERSATION_HISTORY`` and
  ``KNOWLEDGE_ARTIFACTS`` without content, tool calls whose ``args`` values are
  JSON-encoded strings (``"\\"/path\\""``, ``toolAction``, ``toolSummary``), results as
  their own ``MODEL`` steps starting ``Created At: ...`` (``LIST_DIRECTORY``,
  ``RUN_COMMAND``), a background command's ``RUNNING`` step (``Tool is running as a
  background task with task id: ...``), ``SYSTEM_MESSAGE`` and ``CHECKPOINT`` steps: the
  shapes of a real Antigravity conversation exported to Markdown with its raw
  ``transcript.jsonl`` lines (a French-language session log found through the search
  index) and of agy transcript parsers' fixtures. The hook payloads (``conversationId``,
  ``workspacePaths``, ``transcriptPath``, ``artifactDirectoryPath``, ``invocationNum`` and
  ``initialNumSteps``, ``executionNum``, ``terminationReason``, ``fullyIdle``, no event
  name) are the fields of antigravity.google/docs/hooks as hook shims quote them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.errors import NotFound
from palimpsest.graph_schema.models import Message

#: What one step is expected to become: (role, kind, content) per message.
Expected = list[tuple[str, str, str]]


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> None:
    """Write (or rewrite from the start) a transcript, as the agents do."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _call(name: str, given: dict[str, Any]) -> str:
    return f"{name} {json.dumps(given, ensure_ascii=False)}"


def _windsurf(kind: str, **inner: Any) -> dict[str, Any]:
    return {"status": "done", "type": kind, kind: inner}


def _agy(index: int, source: str, kind: str, at: str) -> dict[str, Any]:
    """A step with no content (``CONVERSATION_HISTORY``, ``KNOWLEDGE_ARTIFACTS``)."""
    return {"step_index": index, "source": source, "type": kind, "status": "DONE", "created_at": at}


def _encoded(args: dict[str, Any]) -> dict[str, str]:
    """Tool call args as ``agy`` writes them: each value JSON-encoded."""
    return {key: json.dumps(value) for key, value in args.items()}


# -- Windsurf ---------------------------------------------------------------------------------

WINDSURF_TRAJECTORY = "0b8e2f4c-5a1d-4c7e-9f3b-2d6a8c1e7f90"
_ROOT = "/home/dev/billing-api"
_LOGIN = "def login(user, password):\n    session = Session(user)\n    session.cookie.secure = True\n"


def windsurf_turns() -> list[list[tuple[dict[str, Any], Expected]]]:
    """Three Cascade turns, 27 steps, each with what it must become."""
    grep = {
        "query": "cookie.secure",
        "search_path": _ROOT,
        "includes": ["*.py"],
        "results": "app/auth.py:3:    session.cookie.secure = False",
    }
    listing = {"directory_path": f"{_ROOT}/app", "results": "auth.py\nmodels.py\nviews.py"}
    tests_run = {
        "command": "pytest -q tests/test_login.py",
        "cwd": _ROOT,
        "exit_code": 1,
        "output": "F\nFAILED tests/test_login.py::test_cookie_is_secure - AssertionError",
    }
    tests_pass = {**tests_run, "exit_code": 0, "output": "1 passed in 0.12s"}
    ran = {"command": tests_run["command"], "cwd": tests_run["cwd"]}
    return [
        [
            (
                {
                    "status": "done",
                    "type": "user_input",
                    "user_input": {
                        "user_response": "The login cookie is sent over http. Find out why and fix it.",
                        "rules_applied": {"always_on": ["palimpsest.md"]},
                    },
                },
                [("user", "text", "The login cookie is sent over http. Find out why and fix it.")],
            ),
            (
                {"status": "done", "type": "planner_response", "planner_response": {"response": "Searching first."}},
                [("assistant", "text", "Searching first.")],
            ),
            (
                {"status": "done", "type": "grep_search", "grep_search": grep},
                [
                    ("assistant", "tool_use", _call("grep_search", {k: v for k, v in grep.items() if k != "results"})),
                    ("tool", "tool_result", grep["results"]),
                ],
            ),
            (
                {"status": "done", "type": "list_directory", "list_directory": listing},
                [
                    ("assistant", "tool_use", _call("list_directory", {"directory_path": listing["directory_path"]})),
                    ("tool", "tool_result", listing["results"]),
                ],
            ),
            (
                {
                    "status": "done",
                    "type": "view_file",
                    "view_file": {"absolute_path": f"{_ROOT}/app/auth.py", "content": _LOGIN},
                },
                [
                    ("assistant", "tool_use", _call("view_file", {"absolute_path": f"{_ROOT}/app/auth.py"})),
                    ("tool", "tool_result", _LOGIN),
                ],
            ),
            (
                {
                    "status": "done",
                    "type": "planner_response",
                    "planner_response": {"response": "The flag is False in auth.py; a test first."},
                },
                [("assistant", "text", "The flag is False in auth.py; a test first.")],
            ),
            (
                {"status": "done", "type": "run_command", "run_command": tests_run},
                [
                    ("assistant", "tool_use", _call("run_command", ran)),
                    ("tool", "tool_result", tests_run["output"]),
                ],
            ),
            (
                {
                    "status": "done",
                    "type": "code_action",
                    "code_action": {"path": f"{_ROOT}/app/auth.py", "new_content": _LOGIN},
                },
                [
                    (
                        "assistant",
                        "tool_use",
                        _call("code_action", {"path": f"{_ROOT}/app/auth.py", "new_content": _LOGIN}),
                    )
                ],
            ),
            (
                {"status": "done", "type": "run_command", "run_command": tests_pass},
                [
                    ("assistant", "tool_use", _call("run_command", ran)),
                    ("tool", "tool_result", tests_pass["output"]),
                ],
            ),
            (
                {
                    "status": "done",
                    "type": "planner_response",
                    "planner_response": {"response": "Fixed: the cookie is now secure and a test covers it."},
                },
                [("assistant", "text", "Fixed: the cookie is now secure and a test covers it.")],
            ),
        ],
        [
            (
                _windsurf("user_input", user_response="Which MCP resources can you see?"),
                [("user", "text", "Which MCP resources can you see?")],
            ),
            (
                {
                    "status": "done",
                    "type": "list_resources",
                    "list_resources": {"server_name": "palimpsest", "resources": ["memory://threads"]},
                },
                [
                    ("assistant", "tool_use", _call("list_resources", {"server_name": "palimpsest"})),
                    ("tool", "tool_result", '["memory://threads"]'),
                ],
            ),
            (
                {"status": "in_progress", "type": "hook_progress"},
                [("system", "step", "[hook_progress]")],
            ),
            (
                {
                    "status": "done",
                    "type": "find",
                    "find": {"pattern": "*.md", "search_directory": _ROOT, "results": "README.md"},
                },
                [
                    ("assistant", "tool_use", _call("find", {"pattern": "*.md", "search_directory": _ROOT})),
                    ("tool", "tool_result", "README.md"),
                ],
            ),
            (
                {
                    "status": "canceled",
                    "type": "planner_response",
                    "planner_response": {"response": "One resource: memory://thr"},
                },
                [("assistant", "text", "One resource: memory://thr")],
            ),
            (
                {
                    "status": "done",
                    "type": "planner_response",
                    "planner_response": {"response": "One resource: memory://threads."},
                },
                [("assistant", "text", "One resource: memory://threads.")],
            ),
        ],
        [
            (
                {"status": "done", "type": "user_input", "user_input": {"user_response": "Run the whole suite."}},
                [("user", "text", "Run the whole suite.")],
            ),
            (
                {"status": "done", "type": "planner_response", "planner_response": {"response": "Running it."}},
                [("assistant", "text", "Running it.")],
            ),
            (
                {
                    "status": "done",
                    "type": "command_action",
                    "command_action": {"command": "pytest -q", "output": "41 passed"},
                },
                [
                    ("assistant", "tool_use", _call("command_action", {"command": "pytest -q"})),
                    ("tool", "tool_result", "41 passed"),
                ],
            ),
            (
                {
                    "status": "error",
                    "type": "run_command",
                    "run_command": {"command": "ruff check .", "cwd": _ROOT, "exit_code": 1},
                },
                [
                    ("assistant", "tool_use", _call("run_command", {"command": "ruff check .", "cwd": _ROOT})),
                    ("tool", "tool_result", "[run_command result]"),
                ],
            ),
            (
                {"status": "done", "type": "checkpoint", "checkpoint": {"summary": "Cookie fixed; suite green."}},
                [("system", "step", "[checkpoint]\nCookie fixed; suite green.")],
            ),
            (
                {"status": "done", "type": "view_file", "view_file": {"absolute_path": f"{_ROOT}/README.md"}},
                [("assistant", "tool_use", _call("view_file", {"absolute_path": f"{_ROOT}/README.md"}))],
            ),
            (
                _windsurf("planner_response", response="41 passed; ruff fails."),
                [("assistant", "text", "41 passed; ruff fails.")],
            ),
            (
                {
                    "status": "done",
                    "type": "planner_response",
                    "planner_response": {"response": "Want me to fix the lint?"},
                    "timestamp": "2026-11-30T11:07:30Z",
                },
                [("assistant", "text", "Want me to fix the lint?")],
            ),
            (
                _windsurf("ephemeral_message", text="<reminder>be brief</reminder>"),
                [("system", "step", "[ephemeral_message]\n<reminder>be brief</reminder>")],
            ),
            (
                {"status": "done", "type": "planner_response", "planner_response": {"response": "Done for now."}},
                [("assistant", "text", "Done for now.")],
            ),
            (
                {"status": "done", "type": "user_input", "user_input": {}},
                [("system", "step", "[user_input]")],
            ),
        ],
    ]


def windsurf_payload(transcript: Path, execution: str) -> dict[str, Any]:
    """``post_cascade_response_with_transcript`` as Cascade sends it (no ``cwd``)."""
    return {
        "agent_action_name": "post_cascade_response_with_transcript",
        "trajectory_id": WINDSURF_TRAJECTORY,
        "execution_id": execution,
        "timestamp": "2026-11-30T11:08:00.000Z",
        "tool_info": {"transcript_path": str(transcript)},
    }


# -- Antigravity ------------------------------------------------------------------------------

AGY_CONVERSATION = "9e1c3a57-2b4d-4f60-8a7e-5c3d1b9f0a24"
AGY_WORKSPACE = "/home/dev/suivi-ca"


def agy_payload(transcript: Path, **fields: Any) -> dict[str, Any]:
    """An ``agy`` hook payload: the common fields, and the event's own (no event name)."""
    return {
        "conversationId": AGY_CONVERSATION,
        "workspacePaths": [AGY_WORKSPACE],
        "transcriptPath": str(transcript),
        "artifactDirectoryPath": str(transcript.parent.parent.parent),
        "modelName": "Gemini 3.5 Flash (High)",
        **fields,
    }


STOP = {"executionNum": 1, "terminationReason": "model_stop", "error": "", "fullyIdle": True}
PRE_INVOCATION = {"invocationNum": 0, "initialNumSteps": 6}


def _at(second: int) -> str:
    return f"2026-11-30T20:02:{second:02d}Z"


def agy_turns() -> list[list[tuple[dict[str, Any], Expected]]]:
    """Two ``agy`` turns, each step with what it must become."""
    listing = (
        "Created At: 2026-11-30T20:02:05Z\nCompleted At: 2026-11-30T20:02:06Z\n"
        '{"name":"README.md","sizeBytes":"1157"}\n{"name":"src","isDir":true}\n\n'
        "Summary: This directory contains 1 subdirectories and 1 files."
    )
    running = (
        "Created At: 2026-11-30T20:02:12Z\nTool is running as a background task with task id: "
        f"{AGY_CONVERSATION}/task-9\nTask Description: npm test"
    )
    listed = {"DirectoryPath": AGY_WORKSPACE, "toolAction": "Listing workspace directory", "toolSummary": "Listing"}
    ran = {"CommandLine": "npm test", "Cwd": AGY_WORKSPACE, "WaitMsBeforeAsync": 5000}
    return [
        [
            (
                {
                    "step_index": 0,
                    "source": "USER_EXPLICIT",
                    "type": "USER_INPUT",
                    "status": "DONE",
                    "created_at": _at(1),
                    "content": "<USER_REQUEST>\nList the project, then run the tests.\n</USER_REQUEST>\n"
                    "<ADDITIONAL_METADATA>\nThe current local time is: 2026-11-30T21:02:01+01:00.\n"
                    "</ADDITIONAL_METADATA>\n<USER_SETTINGS_CHANGE>\nThe user changed setting `Model Selection` "
                    "from None to Gemini 3.5 Flash (High).\n</USER_SETTINGS_CHANGE>",
                },
                [("user", "text", "List the project, then run the tests.")],
            ),
            (
                _agy(1, "SYSTEM", "CONVERSATION_HISTORY", _at(2)),
                [("system", "step", "[CONVERSATION_HISTORY]")],
            ),
            (
                _agy(2, "SYSTEM", "KNOWLEDGE_ARTIFACTS", _at(2)),
                [("system", "step", "[KNOWLEDGE_ARTIFACTS]")],
            ),
            (
                {
                    "step_index": 3,
                    "source": "MODEL",
                    "type": "PLANNER_RESPONSE",
                    "status": "DONE",
                    "created_at": _at(3),
                    "content": "I will list the workspace first.",
                    "thinking": "**Surveying the project**\n\nA listing shows what to run.",
                    "tool_calls": [{"name": "list_dir", "args": _encoded(listed)}],
                },
                [
                    ("assistant", "thinking", "**Surveying the project**\n\nA listing shows what to run."),
                    ("assistant", "text", "I will list the workspace first."),
                    ("assistant", "tool_use", _call("list_dir", listed)),
                ],
            ),
            (
                {
                    "step_index": 5,
                    "source": "MODEL",
                    "type": "LIST_DIRECTORY",
                    "status": "DONE",
                    "created_at": _at(5),
                    "content": listing,
                },
                [("tool", "tool_result", listing)],
            ),
            (
                {
                    "step_index": 6,
                    "source": "MODEL",
                    "type": "PLANNER_RESPONSE",
                    "status": "DONE",
                    "created_at": _at(10),
                    "thinking": "Tests next.",
                    "tool_calls": [{"name": "run_command", "args": _encoded(ran)}],
                },
                [("assistant", "thinking", "Tests next."), ("assistant", "tool_use", _call("run_command", ran))],
            ),
            (
                {
                    "step_index": 7,
                    "source": "MODEL",
                    "type": "RUN_COMMAND",
                    "status": "RUNNING",
                    "created_at": _at(12),
                    "content": running,
                },
                [("tool", "tool_result", running)],
            ),
            (
                {
                    "step_index": 8,
                    "source": "MODEL",
                    "type": "PLANNER_RESPONSE",
                    "status": "DONE",
                    "created_at": _at(14),
                    "content": "The tests are running in the background.",
                    "usage": {"input_tokens": 1830, "output_tokens": 41},
                },
                [("assistant", "text", "The tests are running in the background.")],
            ),
        ],
        [
            (
                {
                    "step_index": 9,
                    "source": "SYSTEM",
                    "type": "SYSTEM_MESSAGE",
                    "status": "DONE",
                    "created_at": _at(30),
                    "content": f'<SYSTEM_MESSAGE>\nTask id "{AGY_CONVERSATION}/task-9" finished with result: '
                    "The command exited with code 0.\n</SYSTEM_MESSAGE>",
                },
                [
                    (
                        "system",
                        "step",
                        f'[SYSTEM_MESSAGE]\n<SYSTEM_MESSAGE>\nTask id "{AGY_CONVERSATION}/task-9" finished with '
                        "result: The command exited with code 0.\n</SYSTEM_MESSAGE>",
                    )
                ],
            ),
            (
                {
                    "step_index": 10,
                    "source": "MODEL",
                    "type": "PLANNER_RESPONSE",
                    "status": "DONE",
                    "created_at": _at(31),
                    "tool_calls": [
                        {"name": "view_file", "args": {"AbsolutePath": json.dumps(f"{AGY_WORKSPACE}/missing.txt")}},
                        {"name": "list_dir", "args": {"DirectoryPath": json.dumps(f"{AGY_WORKSPACE}/src")}},
                    ],
                },
                [
                    ("assistant", "tool_use", _call("view_file", {"AbsolutePath": f"{AGY_WORKSPACE}/missing.txt"})),
                    ("assistant", "tool_use", _call("list_dir", {"DirectoryPath": f"{AGY_WORKSPACE}/src"})),
                ],
            ),
            (
                {
                    "step_index": 11,
                    "source": "MODEL",
                    "type": "VIEW_FILE",
                    "status": "ERROR",
                    "created_at": _at(32),
                    "content": "Created At: 2026-11-30T20:02:32Z\nfile does not exist",
                },
                [("tool", "tool_result", "Created At: 2026-11-30T20:02:32Z\nfile does not exist")],
            ),
            (
                {
                    "step_index": 12,
                    "source": "MODEL",
                    "type": "LIST_DIRECTORY",
                    "status": "DONE",
                    "created_at": _at(33),
                    "content": 'Created At: 2026-11-30T20:02:33Z\n{"name":"main.ts","sizeBytes":"88"}',
                },
                [("tool", "tool_result", 'Created At: 2026-11-30T20:02:33Z\n{"name":"main.ts","sizeBytes":"88"}')],
            ),
            (
                {
                    "step_index": 13,
                    "source": "MODEL",
                    "type": "PLANNER_RESPONSE",
                    "status": "DONE",
                    "created_at": _at(35),
                    "content": "All tests passed; src holds main.ts.",
                },
                [("assistant", "text", "All tests passed; src holds main.ts.")],
            ),
        ],
    ]


# -- Checks shared by both agents' tests ------------------------------------------------------


def stored(store_url: str, partition: str, thread: str) -> list[Message]:
    """The thread's stored messages, in order; none when the thread does not exist."""

    async def read() -> list[Message]:
        store = open_store(store_url)
        await store.initialize()
        try:
            return await store.get_messages(partition, thread)
        except NotFound:
            return []
        finally:
            await store.close()

    return asyncio.run(read())


def leaves(value: Any) -> Iterator[str]:
    """Every scalar a JSON value holds, as text, to look for in what was stored."""
    if isinstance(value, dict):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    elif value is not None:
        yield value if isinstance(value, str) else json.dumps(value)


def by_step(messages: list[Message]) -> list[list[Message]]:
    """Stored messages grouped by the step they came from (``<step id>`` and ``<step id>#k``), in order."""
    groups: dict[str, list[Message]] = {}
    for message in messages:
        assert message.source_id is not None
        groups.setdefault(message.source_id.split("#", 1)[0], []).append(message)
    return list(groups.values())


def unrecoverable(step: dict[str, Any], stored: list[Message], time_keys: tuple[str, ...]) -> list[str]:
    """What a step said that its stored messages hold nowhere (content, metadata, or ``created_at``)."""
    haystack = [message.content for message in stored]
    haystack += [text for message in stored for text in leaves(message.metadata)]
    # A call is ``Name {json input}``: its input's strings are found decoded.
    calls = [message.content.split(" ", 1)[1] for message in stored if message.metadata["kind"] == "tool_use"]
    haystack += [text for call in calls for text in leaves(json.loads(call))]
    missing = [
        leaf
        for key, item in step.items()
        if key not in time_keys
        for leaf in leaves(item)
        if not any(leaf in text for text in haystack)
    ]
    missing += [
        f"{key}={step[key]}"
        for key in time_keys
        if key in step and not all(message.created_at.isoformat().startswith(step[key][:19]) for message in stored)
    ]
    return missing
