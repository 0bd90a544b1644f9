"""Codex rollouts, and picking each file's format: parsed alone, then ingested into both stores.

The rollout the tests write has what real ones have: the session header, the
environment context Codex injects as a user message, turn contexts, UI events that
repeat the response items, a reasoning summary and an encrypted-only one, a shell
function call with its output, a patch through a custom tool that failed, a web
search, a developer message, a ghost snapshot and a compaction. Then a directory of
all three formats is ingested with ``--format auto``, through the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.agents.codex.transcript import parse_codex
from palimpsest.server.cli.main import app
from palimpsest.server.feeds.ingest import detect_format, ingest_files
from tests.support.claude_transcripts import SESSION, transcript, write_lines

ROLLOUT_ID = "0199a213-81c0-7800-8aa1-bbab2a035a53"
CWD = "/home/ada/src/payments"
ENVIRONMENT = "<environment_context>\n  <cwd>/home/ada/src/payments</cwd>\n</environment_context>"
PATCH = "*** Begin Patch\n*** Update File: app.py\n@@\n-old\n+new\n*** End Patch"


def item(second: int, payload: dict[str, Any], kind: str = "response_item") -> dict[str, Any]:
    """One rollout line."""
    return {"timestamp": f"2025-10-29T00:59:{second:02d}.317Z", "type": kind, "payload": payload}


def rollout() -> list[dict[str, Any]]:
    """Seventeen lines, ten of them messages."""
    meta = {
        "id": ROLLOUT_ID,
        "timestamp": "2025-10-29T00:59:38.308Z",
        "cwd": CWD,
        "originator": "codex_cli_rs",
        "cli_version": "0.46.0",
        "instructions": None,
        "git": {"commit_hash": "a1b2c3", "branch": "main", "repository_url": "git@example.com:ada/payments.git"},
    }
    return [
        item(38, meta, "session_meta"),
        item(38, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ENVIRONMENT}]}),
        item(39, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the façade ✓"}]}),
        item(39, {"type": "user_message", "message": "Fix the façade ✓", "kind": "plain"}, "event_msg"),
        item(
            39, {"cwd": CWD, "approval_policy": "on-request", "model": "gpt-5-codex", "effort": "high"}, "turn_context"
        ),
        item(
            40,
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "**Inspecting app.py**"}],
                "content": None,
                "encrypted_content": "gAAAA",
            },
        ),
        item(40, {"type": "agent_reasoning", "text": "**Inspecting app.py**"}, "event_msg"),
        item(
            41,
            {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"command":["bash","-lc","cat app.py"]}',
                "call_id": "call_sh1",
            },
        ),
        item(42, {"type": "function_call_output", "call_id": "call_sh1", "output": '{"output":"old\\n","exit":0}'}),
        item(
            43,
            {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": "call_p1",
                "name": "apply_patch",
                "input": PATCH,
            },
        ),
        item(
            44,
            {
                "type": "function_call_output",
                "call_id": "call_p1",
                "output": {"content": "no such file", "success": False},
            },
        ),
        item(45, {"type": "reasoning", "summary": [], "encrypted_content": "gAAAB"}),
        item(45, {"type": "ghost_snapshot", "ghost_commit": {"id": "c0ffee"}}),
        item(46, {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "façade"}}),
        item(47, {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]}),
        item(
            48, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed app.py."}]}
        ),
        item(49, {"message": "Summary of the work so far."}, "compacted"),
    ]


BASE = {"source": "codex", "git_branch": "main", "git_commit": "a1b2c3", "cwd": CWD}
TURN = {**BASE, "model": "gpt-5-codex"}
#: (source id, role, content, tool_call_id, metadata) of every message, in file order.
EXPECTED: list[tuple[str, str, str, str | None, dict[str, Any]]] = [
    (
        "line-2",
        "user",
        ENVIRONMENT,
        None,
        {**BASE, "kind": "text", "codex_type": "message", "injected": True, "injected_as": "environment_context"},
    ),
    ("line-3", "user", "Fix the façade ✓", None, {**BASE, "kind": "text", "codex_type": "message"}),
    ("line-6", "assistant", "**Inspecting app.py**", None, {**TURN, "kind": "thinking", "codex_type": "reasoning"}),
    (
        "line-8",
        "assistant",
        'shell {"command":["bash","-lc","cat app.py"]}',
        "call_sh1",
        {**TURN, "kind": "tool_use", "codex_type": "function_call", "tool_name": "shell"},
    ),
    (
        "line-9",
        "tool",
        '{"output":"old\\n","exit":0}',
        "call_sh1",
        {**TURN, "kind": "tool_result", "codex_type": "function_call_output"},
    ),
    (
        "line-10",
        "assistant",
        f"apply_patch {PATCH}",
        "call_p1",
        {**TURN, "kind": "tool_use", "codex_type": "custom_tool_call", "tool_name": "apply_patch"},
    ),
    (
        "line-11",
        "tool",
        "no such file",
        "call_p1",
        {**TURN, "kind": "tool_result", "codex_type": "function_call_output", "is_error": True},
    ),
    (
        "line-14",
        "assistant",
        'web_search {"type": "search", "query": "façade"}',
        None,
        {**TURN, "kind": "tool_use", "codex_type": "web_search_call", "tool_name": "web_search"},
    ),
    (
        "line-15",
        "system",
        "Be brief.",
        None,
        {
            **TURN,
            "kind": "text",
            "codex_type": "message",
            "codex_role": "developer",
            "injected": True,
            "injected_as": "developer_instructions",
        },
    ),
    ("line-16", "assistant", "Fixed app.py.", None, {**TURN, "kind": "text", "codex_type": "message"}),
]


def rows(messages: list[Any]) -> list[tuple[str, str, str, str | None, dict[str, Any]]]:
    """What the tests compare of a message, stored or parsed."""
    return [
        (getattr(m, "source_id", None) or m.message_id, str(m.role.value), m.content, m.tool_call_id, m.metadata)
        for m in messages
    ]


def test_parse_maps_response_items_and_skips_the_rest(tmp_path: Path) -> None:
    path = write_lines(tmp_path / f"rollout-2025-10-29T00-59-38-{ROLLOUT_ID}.jsonl", rollout())
    parsed = parse_codex(path, partition="codex")
    # session_meta, 2 event_msg, turn_context, encrypted reasoning, ghost_snapshot, compacted.
    assert parsed.skipped == 7
    [batch] = parsed.batches
    assert (batch.thread_id, batch.partition, batch.project, batch.first_line) == (ROLLOUT_ID, "codex", "payments", 2)
    assert rows(batch.messages) == EXPECTED
    assert batch.messages[0].created_at.isoformat() == "2025-10-29T00:59:38.317000+00:00"


def test_parse_reads_rollouts_from_before_the_wrapper(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "rollout-2025-05-07.jsonl",
        [
            {"id": "legacy-1", "timestamp": "2025-05-07T17:24:21.123Z", "instructions": None},
            {"record_type": "state"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]},
            {"type": "function_call", "name": "shell", "arguments": '{"command":["ls"]}', "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": "README.md"},
        ],
    )
    assert detect_format(path) == "codex"
    parsed = parse_codex(path, partition="codex")
    [batch] = parsed.batches
    assert (batch.thread_id, batch.project, parsed.skipped) == ("legacy-1", None, 2)
    assert [(m.message_id, m.role.value, m.content, m.tool_call_id) for m in batch.messages] == [
        ("line-3", "user", "hello", None),
        ("line-4", "assistant", 'shell {"command":["ls"]}', "c1"),
        ("line-5", "tool", "README.md", "c1"),
    ]
    assert {m.created_at.isoformat() for m in batch.messages} == {"2025-05-07T17:24:21.123000+00:00"}


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("{oops", "malformed JSON"),
        ({"timestamp": "2025-10-29T00:59:50Z", "type": "response_item"}, "missing field 'payload'"),
        (item(50, {"type": "message", "role": "robot", "content": []}), "needs a role among user, assistant"),
        (item(50, {"type": "function_call", "name": "shell", "arguments": "{}"}), "non-empty string 'call_id'"),
        (item(50, {"type": "function_call_output", "call_id": "c9"}), "needs an output"),
        (item(50, {"type": "message", "role": "user", "content": "plain"}), "content must be a list of parts"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path: Path, bad: Any, reason: str) -> None:
    path = write_lines(tmp_path / "rollout.jsonl", [*rollout()[:4], bad, *rollout()[4:]])
    with pytest.raises(InvalidInput) as caught:
        parse_codex(path, partition="codex")
    assert f"{path}:5: " in str(caught.value) and reason in str(caught.value)


def test_an_item_before_the_session_header_is_refused(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "rollout.jsonl", [*rollout()[1:3], rollout()[0]])
    with pytest.raises(InvalidInput, match=r"rollout\.jsonl:1: a response item before the session_meta line"):
        parse_codex(path, partition="codex")
    nameless = write_lines(tmp_path / "nameless.jsonl", [item(38, {"cwd": CWD}, "session_meta"), *rollout()[1:3]])
    with pytest.raises(InvalidInput, match=r"nameless\.jsonl:1: the session header needs a non-empty string 'id'"):
        parse_codex(nameless, partition="codex")


async def test_ingest_is_idempotent_and_adds_only_new_lines(store: MemoryStore, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "rollout.jsonl", rollout())
    report = await ingest_files(store, [path])
    [file] = report.files
    assert (file.format, file.partitions, file.messages, file.appended, file.skipped) == ("codex", ["codex"], 10, 10, 7)
    thread = await store.get_thread("codex", ROLLOUT_ID)
    assert (thread.project, thread.message_count) == ("payments", 10)
    assert rows(await store.get_messages("codex", ROLLOUT_ID)) == EXPECTED

    again = await ingest_files(store, [path], format="codex")
    assert (again.appended, again.duplicates) == (0, 10)
    write_lines(
        path,
        [
            item(51, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Merci !"}]}),
            item(51, {"type": "user_message", "message": "Merci !"}, "event_msg"),
        ],
        mode="a",
    )
    grown = await ingest_files(store, [path])
    assert (grown.appended, grown.duplicates, grown.skipped) == (1, 10, 8)
    [last] = await store.get_messages("codex", ROLLOUT_ID, first_seq=10)
    assert (last.seq, last.source_id, last.content) == (10, "line-18", "Merci !")


async def test_bad_rollout_writes_nothing(store: MemoryStore, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "rollout.jsonl", [*rollout(), item(52, {"type": "custom_tool_call", "name": "x"})])
    with pytest.raises(InvalidInput, match=r"rollout\.jsonl:18: a custom_tool_call item needs"):
        await ingest_files(store, [path])
    assert (await store.stats(None)).messages == 0


# -- --format auto over a directory of all three formats ----------------------------------------


def sessions_tree(root: Path) -> Path:
    """A directory as a user would point ingest at: Codex's dated tree, a Claude Code project, a JSONL export."""
    codex_day = root / "codex" / "2025" / "10" / "29"
    codex_day.mkdir(parents=True)
    write_lines(codex_day / f"rollout-2025-10-29T00-59-38-{ROLLOUT_ID}.jsonl", rollout())
    project = root / "claude" / "-home-ada-src-billing-api"
    project.mkdir(parents=True)
    write_lines(project / f"{SESSION}.jsonl", transcript())
    write_lines(root / "export.jsonl", [{"thread_id": "exported", "role": "user", "content": "from a script"}])
    (root / "notes.txt").write_text("not a transcript", encoding="utf-8")
    return root


def test_auto_detects_each_file_of_a_directory_through_the_cli(store_url: str, tmp_path: Path) -> None:
    root = sessions_tree(tmp_path / "sessions")
    env: dict[str, str | None] = {"PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None}
    result = CliRunner().invoke(app, ["ingest", str(root), "--store", store_url, "--json"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [(Path(f["path"]).name, f["format"], f["partitions"], f["appended"]) for f in report["files"]] == [
        (f"{SESSION}.jsonl", "claude", ["claude"], 9),
        (f"rollout-2025-10-29T00-59-38-{ROLLOUT_ID}.jsonl", "codex", ["codex"], 10),
        ("export.jsonl", "jsonl", ["default"], 1),
    ]
    assert (report["appended"], report["skipped"], report["threads"]) == (20, 11, 3)
    again = CliRunner().invoke(app, ["ingest", str(root), "--store", store_url, "--json"], env=env)
    assert json.loads(again.stdout)["appended"] == 0
    forced = CliRunner().invoke(app, ["ingest", str(root / "export.jsonl"), "--format", "codex", "--store", store_url])
    assert forced.exit_code == 1 and forced.stderr.startswith(f"error: {root / 'export.jsonl'}:1: ")


def test_auto_names_a_file_it_cannot_place(tmp_path: Path) -> None:
    odd = write_lines(tmp_path / "events.jsonl", [{"event": "click"}])
    with pytest.raises(InvalidInput, match=r"events\.jsonl:1: cannot tell the format .* give --format"):
        detect_format(odd)
    only_bookkeeping = write_lines(tmp_path / "s.jsonl", [{"type": "summary", "summary": "x", "leafUuid": "u"}])
    assert detect_format(only_bookkeeping) == "claude"
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(app, ["ingest", str(empty), "--store", f"sqlite:///{tmp_path / 'm.db'}"])
    assert (result.exit_code, result.stderr) == (1, f"error: {empty}: no .jsonl file in this directory\n")
