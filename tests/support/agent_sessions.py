"""Coding sessions written in the file formats of Claude Code and Codex, with what each tool call did.

The checkpoint tests and ``bench/checkpoints.py`` need transcripts shaped like real ones
(tool calls as ``tool_use`` blocks or ``function_call`` items, results marked as
errors, thinking, todo lists, file reads full of line numbers and TODOs) and the truth
about every call, to score a checkpoint against. Seeded, so a failure reproduces.
They go through the real parsers of ``server/feeds``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.models import Message, NewMessage, Role
from palimpsest.graph_schema.prepare import prepare_append
from palimpsest.server.agents.claude.transcript import parse_claude_code
from palimpsest.server.agents.codex.transcript import parse_codex

_FILES = [
    "src/auth/jwt.py",
    "src/api/routes.py",
    "src/db/migrations/0007_tokens.sql",
    "tests/test_refresh.py",
    "src/cache/redis_client.py",
    "lib/palimpsest_web/live/thread_live.ex",
    "web/src/components/ThreadList.tsx",
]
_ASKS = [
    "The refresh endpoint returns 401 after the token rotates. Can you find out why and fix it?",
    "Please add a regression test for the expired-token path.",
    "Rename `issue_token` to `mint_access_token` everywhere and keep the old name as an alias.",
    "Why does the migration fail on Postgres 16 but not on SQLite? Make it work on both.",
    "Let's cache the JWKS response for five minutes; make sure tests still pass.",
    "Run the linters and fix whatever they report in the thread list component.",
]
_SAYS = [
    "I'll read {file} first to see how the token is validated.",
    "The failure comes from {file}: the clock skew check uses naive datetimes.",
    "Decision: keep refresh tokens opaque and store their hash in the `tokens` table instead of a JWT.",
    "Next step: patch {file} and rerun the refresh tests.",
    "Done. {file} now compares aware datetimes and the new test covers expiry.",
]
_COMMANDS = [
    "pytest -q tests/test_refresh.py",
    "ruff check src/",
    "mix dialyzer",
    "npm run lint -- --fix",
    "git diff --stat",
    "alembic upgrade head",
]
_FAILURES = [
    "FAILED tests/test_refresh.py::test_rotated_token - AssertionError: 401 != 200",
    'psycopg.errors.UndefinedTable: relation "tokens" does not exist',
    "lib/palimpsest_web/live/thread_live.ex:42: The pattern can never match the type.",
    "TypeError: Cannot read properties of undefined (reading 'map')",
]


@dataclass
class Truth:
    """What the tool calls of a session did, by call id."""

    modified: dict[str, str] = field(default_factory=dict)
    read: dict[str, str] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


def _file_body(rng: random.Random, path: str) -> str:
    """A Read result the way Claude Code shows it: numbered lines, some TODOs in them."""
    lines = [f'    """Module {path}."""', "def verify(token: str) -> Claims:", "    return decode(token)"]
    lines += [f"    # TODO: Add description {i}" if rng.random() < 0.2 else f"    value_{i} = {i}" for i in range(20)]
    return "\n".join(f"{number:>6}→{line}" for number, line in enumerate(lines, start=1))


@dataclass
class _Writer:
    rng: random.Random
    truth: Truth = field(default_factory=Truth)
    calls: int = 0

    def step(self) -> list[tuple[str, Any]]:
        """One turn of the agent: ``(kind, detail)`` events the formats then write."""
        self.calls += 1
        call_id = f"toolu_{self.calls:05d}"
        path = self.rng.choice(_FILES)
        roll = self.rng.random()
        if roll < 0.3:
            self.truth.read[call_id] = path
            return [("read", (call_id, path, _file_body(self.rng, path)))]
        if roll < 0.55:
            self.truth.modified[call_id] = path
            failed = self.rng.random() < 0.15
            if failed:
                self.truth.failures[call_id] = "String to replace not found in file."
            return [("edit", (call_id, path, failed))]
        command = self.rng.choice(_COMMANDS)
        self.truth.commands[call_id] = command
        if self.rng.random() < 0.35:
            error = self.rng.choice(_FAILURES)
            self.truth.failures[call_id] = error
            return [("shell", (call_id, command, 1, f"===== test session starts =====\n{error}\n1 failed, 9 passed"))]
        return [("shell", (call_id, command, 0, "----\nAll checks passed!\n12 passed in 0.8s"))]


def claude_code_lines(turns: int, *, seed: int = 1, session: str = "sess-claude") -> tuple[list[dict[str, Any]], Truth]:
    """A Claude Code transcript of ``turns`` user turns, as the JSON objects of its lines."""
    rng = random.Random(seed)
    writer = _Writer(rng)
    lines: list[dict[str, Any]] = []
    clock = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def line(role: str, content: Any, **extra: Any) -> None:
        nonlocal clock
        clock += timedelta(seconds=7)
        lines.append(
            {
                "type": role,
                "uuid": f"{session}-{len(lines):05d}",
                "sessionId": session,
                "timestamp": clock.isoformat().replace("+00:00", "Z"),
                "cwd": "/home/dev/palimpsest-web",
                "message": {"role": role, "content": content},
                **extra,
            }
        )

    for _ in range(turns):
        line("user", rng.choice(_ASKS))
        if rng.random() < 0.3:
            line("user", "<command-name>/clear</command-name>", isMeta=True)
        for _ in range(rng.randint(2, 5)):
            if rng.random() < 0.4:
                line("assistant", [{"type": "thinking", "thinking": "Maybe the fixture is stale; better to check."}])
            say = rng.choice(_SAYS).format(file=rng.choice(_FILES))
            for kind, detail in writer.step():
                call_id = detail[0]
                if kind == "read":
                    _, path, body = detail
                    use = {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": path}}
                    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": body}
                elif kind == "edit":
                    _, path, failed = detail
                    tool = rng.choice(["Edit", "Write", "MultiEdit"])
                    given = {"file_path": path, "old_string": "return decode(token)", "new_string": "return x"}
                    if tool == "Write":
                        given = {"file_path": path, "content": "def verify(token):\n    return {'a': 1}\n"}
                    use = {"type": "tool_use", "id": call_id, "name": tool, "input": given}
                    text = "<tool_use_error>String to replace not found in file.</tool_use_error>"
                    result = {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": True}
                    if not failed:
                        result = {"type": "tool_result", "tool_use_id": call_id, "content": f"The file {path} has "
                                  "been updated. Here's the result of running `cat -n`:\n     1→x"}  # fmt: skip
                else:
                    _, command, code, output = detail
                    given = {"command": command, "description": "Run the check"}
                    use = {"type": "tool_use", "id": call_id, "name": "Bash", "input": given}
                    text = f"Exit code {code}\n{output}" if code else output
                    result = {"type": "tool_result", "tool_use_id": call_id, "content": text}
                    if code:
                        result["is_error"] = True
                line("assistant", [{"type": "text", "text": say}, use])
                line("user", [result])
        line("assistant", rng.choice(_SAYS).format(file=rng.choice(_FILES)))
    return lines, writer.truth


def codex_lines(turns: int, *, seed: int = 2, session: str = "sess-codex") -> tuple[list[dict[str, Any]], Truth]:
    """A Codex rollout of ``turns`` user turns: shell calls, apply_patch edits, JSON outputs with exit codes."""
    rng = random.Random(seed)
    writer = _Writer(rng)
    stamp = "2026-03-02T10:00:00Z"
    lines: list[dict[str, Any]] = [
        {"timestamp": stamp, "type": "session_meta", "payload": {"id": session, "cwd": "/home/dev/api"}}
    ]

    def item(payload: dict[str, Any]) -> None:
        lines.append({"timestamp": stamp, "type": "response_item", "payload": payload})

    def text(role: str, said: str) -> None:
        kind = "input_text" if role == "user" else "output_text"
        item({"type": "message", "role": role, "content": [{"type": kind, "text": said}]})

    for _ in range(turns):
        text("user", rng.choice(_ASKS))
        for _ in range(rng.randint(2, 5)):
            text("assistant", rng.choice(_SAYS).format(file=rng.choice(_FILES)))
            for kind, detail in writer.step():
                call_id = detail[0]
                if kind == "edit":
                    _, path, failed = detail
                    patch = f"*** Begin Patch\n*** Update File: {path}\n@@\n-    return decode(token)\n+    return x\n"
                    item({"type": "custom_tool_call", "name": "apply_patch", "call_id": call_id, "input": patch})
                    said = "error: patch did not apply: String to replace not found in file." if failed else "Done!"
                    output = {"output": said, "metadata": {"exit_code": 1 if failed else 0}}
                    item({"type": "custom_tool_call_output", "call_id": call_id, "output": json.dumps(output)})
                    continue
                if kind == "read":
                    _, path, body = detail
                    argv, code, out = ["bash", "-lc", f"sed -n '1,200p' {path}"], 0, body
                    writer.truth.commands[call_id] = argv[2]
                else:
                    _, command, code, out = detail
                    argv = ["bash", "-lc", command]
                arguments = json.dumps({"command": argv, "workdir": "/home/dev/api"})
                item({"type": "function_call", "name": "shell", "arguments": arguments, "call_id": call_id})
                output = json.dumps({"output": out, "metadata": {"exit_code": code, "duration_seconds": 0.4}})
                item({"type": "function_call_output", "call_id": call_id, "output": output})
    return lines, writer.truth


def write_lines(lines: list[dict[str, Any]], path: Path) -> Path:
    """The lines as a JSONL file."""
    path.write_text("".join(json.dumps(value) + "\n" for value in lines), encoding="utf-8")
    return path


def parsed_messages(lines: list[dict[str, Any]], path: Path, fmt: str) -> list[NewMessage]:
    """The session's messages as the real parser of its format reads them."""
    parse = parse_claude_code if fmt == "claude" else parse_codex
    transcript = parse(write_lines(lines, path), partition=fmt)
    return [message for batch in transcript.batches for message in batch.messages]


def stored(
    new: list[NewMessage], *, thread_id: str = "thread-1", partition: str = "test", first_seq: int = 1
) -> list[Message]:
    """Messages as a store hands them back (metadata kept), derived by the real `prepare_append`."""
    return [
        Message(
            id=prepared.id,
            source_id=prepared.source_id,
            thread_id=thread_id,
            partition=partition,
            seq=seq,
            role=Role(prepared.role),
            content=prepared.content,
            sha256=prepared.sha256,
            tokens=prepared.tokens,
            created_at=prepared.created_at,
            tool_call_id=prepared.tool_call_id,
            metadata=prepared.metadata,
        )
        for seq, prepared in enumerate(prepare_append(partition, thread_id, new, None), start=first_seq)
    ]
