"""Deterministic, realistic coding-agent transcripts for the compaction tests.

Compaction is only exercised honestly on content that looks like what agents write:
user requests, assistant turns that call tools, tool results with the same
``tool_call_id``, file paths and error messages. Seeded, so a failure reproduces.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.models import NewMessage, Role

_FILES = [
    "src/auth/jwt.py",
    "src/api/routes.py",
    "src/db/migrations/0007_tokens.sql",
    "tests/test_refresh.py",
    "pyproject.toml",
    "README.md",
    "src/cache/redis_client.py",
]
_ASKS = [
    "The refresh endpoint returns 401 after the token rotates. Can you find out why?",
    "Please add a regression test for the expired-token path.",
    "Rename `issue_token` to `mint_access_token` everywhere and keep the old name as an alias.",
    "Why does the migration fail on Postgres 16 but not on SQLite?",
    "Let's cache the JWKS response for five minutes; make sure tests still pass.",
    "Run the test suite and tell me what is still red.",
]
_THOUGHTS = [
    "I'll read {file} first to see how the token is validated.",
    "The failure comes from {file}: the clock skew check uses naive datetimes.",
    "Decision: keep refresh tokens opaque and store their hash in the `tokens` table.",
    "That approach failed because the fixture reuses a revoked token; trying a fresh one.",
    "Next step: patch {file} and rerun `pytest -k refresh`.",
    "Done. {file} now compares aware datetimes and the new test covers expiry.",
]
_RESULTS = [
    'def verify(token: str) -> Claims:\n    claims = jwt.decode(token, key, algorithms=["RS256"])\n'
    "    if claims.exp < datetime.utcnow():\n        raise Expired(claims.sub)\n    return claims\n",
    "FAILED tests/test_refresh.py::test_rotated_token - AssertionError: 401 != 200\n1 failed, 41 passed in 3.21s",
    'ERROR: relation "tokens" does not exist\nLINE 1: INSERT INTO tokens (hash, sub, exp) VALUES ($1, $2, $3)',
    "42 passed in 2.87s",
    "$ git diff --stat\n src/auth/jwt.py | 6 +++---\n tests/test_refresh.py | 18 ++++++++++++++++++\n",
]


def transcript(count: int, *, seed: int = 7, prefix: str = "m") -> list[NewMessage]:
    """``count`` messages of a plausible agent session, tool calls paired with results.

    Args:
        count: How many messages.
        seed: Seeds the choice of sentences, so a run is reproducible.
        prefix: Prefix of each ``message_id`` (``{prefix}{index}``), so appends are idempotent.
    """
    rng = random.Random(seed)
    messages: list[NewMessage] = []
    call = 0
    while len(messages) < count:
        file = rng.choice(_FILES)
        step = rng.randrange(4)
        if step == 0:
            messages.append(NewMessage(role=Role.user, content=rng.choice(_ASKS)))
        elif step in (1, 2) and len(messages) + 1 < count:
            call += 1
            call_id = f"call_{call}"
            messages.append(
                NewMessage(
                    role=Role.assistant,
                    content=f"Reading {file}.\n" + rng.choice(_THOUGHTS).format(file=file),
                    tool_call_id=call_id,
                    metadata={"tool": "read_file", "path": file},
                )
            )
            messages.append(NewMessage(role=Role.tool, content=rng.choice(_RESULTS), tool_call_id=call_id))
        else:
            lines = [rng.choice(_THOUGHTS).format(file=rng.choice(_FILES)) for _ in range(rng.randint(1, 4))]
            messages.append(NewMessage(role=Role.assistant, content="\n".join(lines)))
    return [message.model_copy(update={"message_id": f"{prefix}{index}"}) for index, message in enumerate(messages)]


# -- agents' own transcripts and hook payloads, as each agent writes them -------------------
#
# The hook tests replay recorded sessions: the lines an agent appends to its files turn
# by turn, and the JSON it hands its hook after each. Kept here so every agent's test
# builds its session the same way.

PROJECT_CWD = "/home/ada/src/billing-api"


def claude_line(
    kind: str, uuid: str, content: Any, second: int, *, session: str, parent: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A Claude Code conversation line (``user`` or ``assistant``)."""
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message = {"id": f"msg_{uuid}", "type": "message", "model": "claude-opus-4-5", **message}
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": PROJECT_CWD,
        "sessionId": session,
        "version": "2.1.300",
        "gitBranch": "main",
        "type": kind,
        "message": message,
        "uuid": uuid,
        "timestamp": f"2026-11-30T09:{second // 60:02d}:{second % 60:02d}.000Z",
        **extra,
    }


def append_jsonl(path: Path, records: list[dict[str, Any]], *, tail: str = "") -> Path:
    """Append records as JSON lines (``tail``: a half-written line after them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.write(tail)
    return path


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def claude_turns(session: str) -> list[dict[str, list[dict[str, Any]]]]:
    """A Claude Code session, turn by turn: the lines each turn adds to each file.

    Keys: ``main`` (the session's transcript) and ``subagents/agent-a1.jsonl`` (a Task
    subagent); turn 2 holds an image, turn 3 a compaction boundary and its summary, and
    a workflow journal that is not a transcript.
    """
    s = session
    return [
        {
            "main": [
                {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}},
                claude_line("user", "u1", "Add JWT auth to the billing API", 0, session=s),
                claude_line(
                    "assistant",
                    "a1",
                    [
                        {"type": "thinking", "thinking": "Look at auth.py first.", "signature": "c2ln"},
                        {"type": "text", "text": "Reading auth.py."},
                        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "auth.py"}},
                    ],
                    1,
                    session=s,
                    parent="u1",
                ),
                claude_line(
                    "user",
                    "u2",
                    [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def login(): ..."}],
                    2,
                    session=s,
                    parent="a1",
                    isMeta=None,
                ),
                claude_line(
                    "assistant",
                    "a2",
                    [{"type": "tool_use", "id": "toolu_2", "name": "Task", "input": {"prompt": "Find token uses"}}],
                    3,
                    session=s,
                    parent="u2",
                ),
                claude_line(
                    "user",
                    "u3",
                    [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_2",
                            "content": [
                                {"type": "text", "text": "3 uses"},
                                {"type": "tool_reference", "tool_name": "Grep"},
                            ],
                        }
                    ],
                    8,
                    session=s,
                    parent="a2",
                ),
                claude_line("assistant", "a3", [{"type": "text", "text": "Done: JWT auth added."}], 9, session=s),
            ],
            "subagents/agent-a1.jsonl": [
                claude_line("user", "s1", "Find token uses", 4, session=s, isSidechain=True, agentId="a1"),
                claude_line(
                    "assistant",
                    "s2",
                    [{"type": "text", "text": "Found 3 uses in routes.py."}],
                    5,
                    session=f"{s}#agent-a1",
                    isSidechain=True,
                    agentId="a1",
                ),
            ],
        },
        {
            "main": [
                claude_line(
                    "user",
                    "u4",
                    [
                        {"type": "text", "text": "Why does this screen fail?"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    ],
                    20,
                    session=s,
                ),
                claude_line("assistant", "a4", [{"type": "text", "text": "The token expired."}], 21, session=s),
            ],
            "subagents/workflows/w1/journal.jsonl": [{"event": "started", "workflow": "w1"}],
        },
        {
            "main": [
                {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted", "sessionId": s},
                claude_line(
                    "user",
                    "u5",
                    "Summary: JWT auth added; token expiry explained.",
                    30,
                    session=s,
                    isCompactSummary=True,
                ),
                claude_line("user", "u6", "Now rotate refresh tokens", 31, session=s),
                claude_line("assistant", "a6", "Rotating them every 15 minutes.", 32, session=s),
            ],
        },
    ]


#: (source id, role, content) of what the Claude session stores, in order.
CLAUDE_EXPECTED = [
    ("u1", "user", "Add JWT auth to the billing API"),
    ("a1", "assistant", "Look at auth.py first."),
    ("a1#1", "assistant", "Reading auth.py."),
    ("a1#2", "assistant", 'Read {"file_path": "auth.py"}'),
    ("u2", "tool", "def login(): ..."),
    ("a2", "assistant", 'Task {"prompt": "Find token uses"}'),
    ("u3", "tool", "3 uses\n[tool_reference: Grep]"),
    ("a3", "assistant", "Done: JWT auth added."),
    ("s1", "user", "Find token uses"),
    ("s2", "assistant", "Found 3 uses in routes.py."),
    ("u4", "user", "Why does this screen fail?\n\n[image: image/png]"),
    ("a4", "assistant", "The token expired."),
    ("u5", "user", "Summary: JWT auth added; token expiry explained."),
    ("u6", "user", "Now rotate refresh tokens"),
    ("a6", "assistant", "Rotating them every 15 minutes."),
]


def codex_lines(session: str, turn: int) -> list[dict[str, Any]]:
    """One turn of a Codex rollout (turn 0 starts with the session header); prompts only as events in turn 1."""
    at = f"2026-11-30T10:0{turn}:00.000Z"

    def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": at, "type": kind, "payload": payload}

    lines = []
    if turn == 0:
        lines.append(
            line(
                "session_meta",
                {
                    "id": session,
                    "timestamp": at,
                    "cwd": PROJECT_CWD,
                    "originator": "codex_cli_rs",
                    "git": {"branch": "main"},
                },
            )
        )
    prompt = ["Fix the failing test", "Now add a changelog entry"][turn]
    lines += [
        line("turn_context", {"turn_id": f"t{turn}", "cwd": PROJECT_CWD, "model": "gpt-5.5-codex"}),
    ]
    if turn == 0:
        lines.append(
            line(
                "response_item",
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
            )
        )
    lines += [
        line("event_msg", {"type": "user_message", "message": prompt, "images": []}),
        line(
            "response_item",
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Inspecting tests"}], "content": None},
        ),
        line(
            "response_item",
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": '{"cmd": "pytest -q"}',
                "call_id": f"call_{turn}",
            },
        ),
        line("response_item", {"type": "function_call_output", "call_id": f"call_{turn}", "output": "1 passed"}),
        line(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"Turn {turn} done."}],
            },
        ),
        line("event_msg", {"type": "agent_message", "message": f"Turn {turn} done."}),
    ]
    return lines


CODEX_EXPECTED_CONTENT = [
    ("user", "Fix the failing test"),
    ("assistant", "Inspecting tests"),
    ("assistant", 'exec_command {"cmd": "pytest -q"}'),
    ("tool", "1 passed"),
    ("assistant", "Turn 0 done."),
    ("user", "Now add a changelog entry"),
    ("assistant", "Inspecting tests"),
    ("assistant", 'exec_command {"cmd": "pytest -q"}'),
    ("tool", "1 passed"),
    ("assistant", "Turn 1 done."),
]
