"""The memory a new session is handed: several earlier sessions in one budget, for Claude Code, Codex and Gemini CLI.

Every session goes in through the agent's real hook (``palimpsest hook AGENT`` with the
payload the agent sends when a turn ends), ``palimpsest maintain --once`` extracts its facts,
and the new session's ``SessionStart`` answer is read as the agent gets it. Shapes and their
sources: `tests/support/session_shapes.py`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.server.cli.main import app
from tests.support.session_shapes import CWD, Claude, Codex, cli, gemini_call, gemini_recording, memory

#: A line presenting a command that only reads: never in the memory.
READ_ONLY = re.compile(
    r"^\s*-?\s*`(?:ls|cat|head|tail|find|grep|rg|git (?:status|log|diff|show|branch))\b", re.MULTILINE
)


def day_session(folder: Path, day: int) -> Claude:
    """One day of work on the ledger: two requests, a change committed, a check, a finding."""
    s = Claude(folder, f"day{day:02d}-0000-4000-8000-000000000000", day=f"2025-07-{day:02d}")
    s.ask(f"Speed up the importer, part {day}: profile the schema lookups")
    s.bash("ls -la ledger/", "importer.py schema.py")
    s.bash("git status", "On branch main")
    s.tool("Edit", {"file_path": f"{CWD}/ledger/schema.py", "old_string": "a", "new_string": "b"}, "updated")
    s.bash("pytest -q tests/test_importer.py", "12 passed in 0.4s")
    s.bash(f"git commit -qam 'Cache schema lookups, part {day}'", "")
    s.say(
        f"I see the issue - `lookup_column` re-reads the schema for each of the {day}000 rows. "
        "Cached the lookups in `SchemaCache`; the importer tests pass."
    )
    s.ask(f"Why was part {day} slow before?")
    s.say(f"The importer called `schema.load()` once per row because `SchemaCache` did not exist before part {day}.")
    return s


def test_several_sessions_share_one_budget_and_the_latest_gets_the_most_room(store_url: str, tmp_path: Path) -> None:
    for day in (1, 2, 3):
        day_session(tmp_path, day).store(store_url)
    cli(store_url, "maintain", "--once")
    text = memory(store_url, PALIMPSEST_STARTUP_BUDGET="455")
    assert estimate_tokens(text) <= 455
    blocks = text.split("\n### ")[1:]
    assert [block[:5] for block in blocks] == ["day03", "day02", "day01"]
    for block in blocks:  # whole items: every session shown says how it ended and what is open
        assert "\n- Ended: " in block and "\n- Still open: nothing" in block
    lines = [block.count("\n") for block in blocks]
    assert lines[0] > max(lines[1:])
    # The newest has room for its finding and what it did; the older ones for what they were asked and how they ended.
    assert "  - I see the issue - `lookup_column` re-reads the schema for each of the 3000 rows. (msg_" in blocks[0]
    assert "- Did: edited ledger/schema.py" in blocks[0] and not any("- Did:" in block for block in blocks[1:])
    assert not READ_ONLY.search(text)
    # The same memory gives the same bytes; a larger budget shows more of the same, in the same order.
    assert memory(store_url, PALIMPSEST_STARTUP_BUDGET="455") == text
    large = memory(store_url, PALIMPSEST_STARTUP_BUDGET="4000")
    assert len(large) > len(text) and [b[:5] for b in large.split("\n### ")[1:]] == ["day03", "day02", "day01"]
    assert "I see the issue - `lookup_column` re-reads the schema for each of the 1000 rows." in large


def test_an_interrupted_and_a_rejected_session_say_so_and_leave_their_request_open(
    store_url: str, tmp_path: Path
) -> None:
    s = Claude(tmp_path, "eeee0000-interrupted")
    s.ask("Add the test credential to the README")
    s.reject("Edit", {"file_path": f"{CWD}/README.md", "old_string": "# Ledger", "new_string": "# Ledger\nAC12"})
    s.store(store_url)
    text = memory(store_url)
    ended = "- Ended: a tool call rejected by the user. the user rejected Edit README.md and interrupted the agent\n"
    assert ended in text
    assert "- Still open:\n  - unfinished request: Add the test credential to the README\n" in text
    assert "README.md" not in text.split("- Ended:")[0].split("- Asked:")[0]
    assert "- Did:" not in text  # a rejected edit changed nothing


def gemini_memory(store_url: str, tmp_path: Path, session: str, records: list[dict[str, Any]]) -> str:
    """Store a Gemini CLI recording of ``records`` through the real hook, then a new session's memory."""
    recording = tmp_path / f"session-{session}.json"
    recording.write_text(json.dumps(gemini_recording(session, records)), encoding="utf-8")
    payload = {"session_id": session, "transcript_path": str(recording), "cwd": CWD, "hook_event_name": "AfterAgent"}
    result = CliRunner().invoke(app, ["hook", "gemini", "--store", store_url], input=json.dumps(payload))
    assert result.exit_code == 0, result.output
    return memory(store_url, agent="gemini")


def test_a_gemini_session_through_its_hook(store_url: str, tmp_path: Path) -> None:
    session = "f7633853-6663-4dbb-bbf4-6159afa29df8"
    at = "2026-01-15T20:5{}:{:02d}.000Z".format
    records = [
        {"id": "u1", "timestamp": at(1, 0), "type": "user", "content": "create a color file inside docs"},
        {
            "id": "g1",
            "timestamp": at(1, 10),
            "type": "gemini",
            "content": "I will create `docs/blue.md`.",
            "toolCalls": [
                gemini_call(
                    "write_file-1",
                    "write_file",
                    {"file_path": "docs/blue.md", "content": "# Blue"},
                    "Successfully created and wrote to new file: docs/blue.md.",
                    "success",
                    at(1, 11),
                ),
                gemini_call(
                    "run_shell_command-2",
                    "run_shell_command",
                    {"command": "git status"},
                    "Command: git status\nOutput: On branch main\nExit Code: 0",
                    "success",
                    at(1, 12),
                ),
                gemini_call(
                    "run_shell_command-3",
                    "run_shell_command",
                    {"command": "rm docs/blue.md"},
                    "Command: rm docs/blue.md\nOutput: (empty)\nExit Code: 0",
                    "success",
                    at(1, 13),
                ),
                gemini_call(
                    "run_shell_command-4",
                    "run_shell_command",
                    {"command": 'echo -e "\\n# Red" >> docs/color.md'},
                    "Output: (empty)\nExit Code: 0",
                    "success",
                    at(1, 14),
                ),
            ],
        },  # fmt: skip
        {"id": "u2", "timestamp": at(1, 20), "type": "user", "content": "System: Please continue."},
        {"id": "g2", "timestamp": at(1, 30), "type": "gemini", "content": 'Appended "Red" to `docs/color.md`.'},
    ]
    text = gemini_memory(store_url, tmp_path, session, records)
    assert "- Asked:\n  1. create a color file inside docs\n" in text
    assert "Please continue" not in text
    assert "- Did: created then deleted docs/blue.md; edited docs/color.md\n" in text
    assert '- Ended: completed. Appended "Red" to `docs/color.md`.\n' in text
    assert not READ_ONLY.search(text)


def test_a_gemini_shell_call_that_exited_non_zero_failed_though_gemini_marks_it_a_success(
    store_url: str, tmp_path: Path
) -> None:
    """Gemini CLI marks a shell call ``success`` whatever the command's status, and closes its output on the status:
    ``Exit Code: 2`` after a long stack, then the process group (shape: a Gemini CLI 0.37 JSON Lines recording of
    AnthonyontheHub/TP-Tutor, its lint broken by an ESLint config)."""
    session = "ab395b98-0000-4000-8000-00000000e221"
    at = "2026-04-25T02:4{}:{:02d}.000Z".format
    stack = "".join(f"    at async step{n} (file:///home/dev/app/node_modules/eslint/x.js:{n}:1)\n" for n in range(12))
    output = (
        "Output: \n> app@0.1.0 lint\n> eslint .\n\nOops! Something went wrong! :(\n\nESLint: 9.39.4\n\n"
        f"TypeError: Cannot read properties of undefined (reading 'recommended')\n{stack}Exit Code: 2\n"
        "Process Group PGID: 10550"
    )
    records = [
        {"id": "u1", "timestamp": at(1, 0), "type": "user", "content": "restore buildOfflineTranslation"},
        {
            "id": "g1",
            "timestamp": at(1, 10),
            "type": "gemini",
            "content": "I'll run a lint check.",
            "toolCalls": [
                gemini_call(
                    "run_shell_command-1",
                    "run_shell_command",
                    {"command": "npm run lint"},
                    output,
                    "success",
                    at(1, 11),
                ),
            ],
        },  # fmt: skip
        {"id": "g2", "timestamp": at(1, 30), "type": "gemini", "content": "The lint failed on `eslint.config.js`."},
    ]
    text = gemini_memory(store_url, tmp_path, session, records)
    assert "  - `npm run lint` still failing: TypeError: Cannot read properties of undefined (reading" in text


def test_a_gemini_session_cut_off_by_its_quota_leaves_its_request_open(store_url: str, tmp_path: Path) -> None:
    """Gemini CLI records an API error (a quota hit, a licence refused) as a notice of type
    ``error`` after the turn it cut short (shape: published Gemini CLI ``session-*.json``
    files); the user's later slash-command errors follow it. A quota hit cut the session off
    there: no failure of the work."""
    session = "a1b2c3d4-0000-4000-8000-00000000e220"
    at = "2026-01-22T20:5{}:{:02d}.000Z".format
    records = [
        {"id": "u1", "timestamp": at(8, 0), "type": "user", "content": "delete color.txt"},
        {
            "id": "g1",
            "timestamp": at(8, 30),
            "type": "gemini",
            "content": "I will delete `docs/color.txt`.",
            "toolCalls": [
                gemini_call(
                    "run_shell_command-1",
                    "run_shell_command",
                    {"command": "rm docs/color.txt"},
                    "Command: rm docs/color.txt\nOutput: (empty)\nExit Code: 0",
                    "success",
                    at(8, 31),
                )
            ],
        },
        {"id": "g2", "timestamp": at(8, 40), "type": "gemini", "content": "I have deleted the file."},
        {"id": "u2", "timestamp": at(9, 0), "type": "user", "content": "now list what is left in docs"},
        {
            "id": "e1",
            "timestamp": at(9, 5),
            "type": "error",
            "content": "[API Error: You have exhausted your capacity on this model. Your quota will reset after 0s.]",
        },
        {"id": "i1", "timestamp": at(9, 6), "type": "info", "content": "This request failed. Press F12 for details."},
        {
            "id": "e2",
            "timestamp": at(9, 30),
            "type": "error",
            "content": "Failed to export session: EISDIR: illegal operation on a directory, open '/home/dev'",
        },
    ]
    text = gemini_memory(store_url, tmp_path, session, records)
    assert (
        "- Ended: stopped mid-work, cut off or interrupted by a usage limit: [API Error: You have exhausted your "
        "capacity on this model. Your quota will reset after 0s.]\n"
    ) in text
    assert "- Still open:\n  - unfinished request: now list what is left in docs\n" in text


def test_a_call_gemini_cli_marks_cancelled_is_told_in_its_word(store_url: str, tmp_path: Path) -> None:
    """Gemini CLI marks ``cancelled`` both a call the user declined and one they stopped (shape:
    SamuelRodriguess/acmebank-service's ``session-*.json``): the memory says cancelled, not rejected."""
    session = "a1b2c3d4-0000-4000-8000-0000000cace1"
    at = "2026-02-26T21:4{}:{:02d}.000Z".format
    records = [
        {"id": "u1", "timestamp": at(0, 0), "type": "user", "content": "ajuste o redis store no arquivo main"},
        {
            "id": "g1",
            "timestamp": at(9, 0),
            "type": "gemini",
            "content": "I will ask `cli_help` which tools can write files.",
            "toolCalls": [gemini_call("cli_help-1", "cli_help", {"question": "tools?"}, "", "cancelled", at(9, 1))],
        },
    ]
    text = gemini_memory(store_url, tmp_path, session, records)
    assert "- Ended: a tool call rejected by the user. the user cancelled cli_help\n" in text
    assert "  - unfinished request: ajuste o redis store no arquivo main\n" in text


def test_a_codex_rollout_interrupted_through_its_hook(store_url: str, tmp_path: Path) -> None:
    rollout = Codex()
    rollout.message("user", "# Context from my IDE setup:\n\n## Open tabs:\n- importer.py\n\n## My request for Codex:\n"
                    "Make the importer skip blank rows")  # fmt: skip
    rollout.plan("p1", [("Skip blank rows", "in_progress"), ("Run the importer tests", "pending")])
    rollout.shell("c1", "pytest -q tests/test_importer.py", "1 failed, 8 passed", 1)
    rollout.message("assistant", "The blank-row test fails because `read_rows` keeps empty lines.")
    rollout.add("event_msg", {"type": "turn_aborted", "reason": "interrupted"})
    path = rollout.write(tmp_path / "rollout-2025-11-22T21-45-35-019e2a41.jsonl")
    payload = {"session_id": rollout.session, "transcript_path": str(path), "cwd": CWD, "hook_event_name": "Stop"}
    result = CliRunner().invoke(app, ["hook", "codex", "--store", store_url], input=json.dumps(payload))
    assert result.exit_code == 0, result.output
    text = memory(store_url, agent="codex")
    assert "  1. Make the importer skip blank rows" in text and "Open tabs" not in text
    assert "- Ended: interrupted by the user. The blank-row test fails because `read_rows` keeps empty lines.\n" in text
    assert (
        "- Still open:\n  - unfinished request: Make the importer skip blank rows\n"
        "  - `pytest -q tests/test_importer.py` still failing: 1 failed, 8 passed\n"
        "  - todo: Skip blank rows\n  - todo: Run the importer tests\n"
    ) in text


def test_a_long_request_cut_short_keeps_the_names_it_mentions(store_url: str, tmp_path: Path) -> None:
    s = Claude(tmp_path, "ffff0000-long-asks")
    named = ["IncrementalTypeTaskStart", "filesToArchive", "registry.go", "ENT-59"]
    for part, name in enumerate(named):
        s.ask(
            f"Please look at this again, the reviewer left a long note on part {part} of the change and I would "
            f"like you to fix what they found in {name} before we merge"
        )
        s.say(f"Fixed part {part}.")
    s.store(store_url)
    cli(store_url, "maintain", "--once")
    for budget in ("400", "200"):  # the requests as read (140 characters), then some cut for a tight budget
        text = memory(store_url, PALIMPSEST_STARTUP_BUDGET=budget)
        shown = re.findall(r"^  (\d)\. (.*)$", text, re.MULTILINE)
        assert shown[0][0] == "1" and shown[-1][0] == "4", text  # the first and last requests are always shown
        for number, line in shown:
            assert named[int(number) - 1] in line, line
    # How it opens ("Please") gives its room to the request's words.
    assert shown[0][1] == "look at this again, the reviewer left a long note on… [IncrementalTypeTaskStart]"
