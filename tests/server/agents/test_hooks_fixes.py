"""What import and hooks lost or refused on real transcripts, each fixed and pinned here.

Every test failed before its fix: a directory ingest stopping at a workflow's
``journal.jsonl``, subagents ordered before the turn that started them, image bytes and
``tool_reference`` names dropped, a Codex prompt that only an ``event_msg`` carries
skipped, ``"isMeta": null`` refused, threads counted once per file, and ``compact
--force`` leaving a tool call whose result lies in the fresh tail without saying so.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from palimpsest.graph_schema.models import Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.agents.claude.transcript import parse_claude_code
from palimpsest.server.agents.codex.transcript import parse_codex
from palimpsest.server.cli.main import app
from palimpsest.server.feeds.ingest import ingest_files
from tests.support.transcripts import PNG, append_jsonl, claude_line, claude_turns, codex_lines

S1 = "aaaaaaaa-0000-4000-8000-000000000001"
S2 = "bbbbbbbb-0000-4000-8000-000000000002"


def claude_projects(root: Path) -> tuple[Path, Path]:
    """Claude Code's own layout: two sessions, one with a subagent and a workflow journal."""
    project = root / "projects" / "-home-ada-src-billing-api"
    first = claude_turns(S1)
    append_jsonl(project / f"{S1}.jsonl", first[0]["main"])
    append_jsonl(project / S1 / "subagents" / "agent-a1.jsonl", first[0]["subagents/agent-a1.jsonl"])
    journal = append_jsonl(project / S1 / "subagents" / "workflows" / "w1" / "journal.jsonl", [{"event": "started"}])
    append_jsonl(project / f"{S2}.jsonl", [claude_line("user", "v1", "Second session", 1, session=S2)])
    return root / "projects", journal


async def test_directory_ingest_skips_non_transcripts_and_orders_the_session_first(
    store: MemoryStore, tmp_path: Path
) -> None:
    root, journal = claude_projects(tmp_path)
    report = await ingest_files(store, [root])
    assert report.not_transcripts == [str(journal)]
    assert report.threads == 2 and len(report.files) == 3
    assert (await store.get_thread("claude", S2)).message_count == 1
    messages = await store.get_messages("claude", S1)
    assert [m.source_id for m in messages] == ["u1", "a1", "a1#1", "a1#2", "u2", "a2", "u3", "a3", "s1", "s2"]
    # The workflow agent's line (sessionId "<session>#agent-a1") is in the session's thread.
    assert messages[-1].metadata["workflow_agent"] == "agent-a1"


def test_ingest_json_counts_each_thread_once(tmp_path: Path) -> None:
    root, _ = claude_projects(tmp_path)
    result = CliRunner().invoke(app, ["ingest", str(root), "--json", "--store", f"sqlite:///{tmp_path / 'm.db'}"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["threads"], sum(item["threads"] for item in report["files"])) == (2, 3)
    assert len(report["not_transcripts"]) == 1


def test_non_text_blocks_are_kept_whole_and_null_flags_accepted(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    document = {"type": "document", "title": "spec.pdf", "source": {"type": "base64", "data": "JVBERi0="}}
    lines = [
        claude_line(
            "user",
            "u1",
            [{"type": "text", "text": "Look:"}, image, document],
            1,
            session=S1,
            isMeta=None,
            isSidechain=None,
            isCompactSummary=None,
        ),
        claude_line(
            "user",
            "u2",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "tool_reference", "tool_name": "Grep"}],
                }
            ],
            2,
            session=S1,
        ),
    ]
    parsed = parse_claude_code(append_jsonl(tmp_path / "t.jsonl", lines), partition="claude")
    first, second = parsed.batches[0].messages
    assert first.content == "Look:\n\n[image: image/png]\n\n[document: spec.pdf]"
    assert first.metadata["blocks"] == [image, document]
    assert "meta" not in first.metadata and "sidechain" not in first.metadata
    assert (second.content, second.metadata["blocks"]) == (
        "[tool_reference: Grep]",
        [{"type": "tool_reference", "tool_name": "Grep"}],
    )


def test_codex_prompts_from_event_messages_are_taken_once(tmp_path: Path) -> None:
    rollout = append_jsonl(tmp_path / "rollout.jsonl", codex_lines("sess-1", 0) + codex_lines("sess-1", 1))
    messages = parse_codex(rollout, partition="codex").batches[0].messages
    # Turn 0 has the prompt as an item and an event, turn 1 only as an event.
    assert [m.content for m in messages if m.role is Role.user] == ["Fix the failing test", "Now add a changelog entry"]
    assert [m.metadata["codex_type"] for m in messages if m.role is Role.user] == ["message", "user_message"]


def test_forced_compaction_says_which_tool_calls_wait_for_their_results(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    lines = [
        {"thread_id": "t", "role": "user", "content": "Run the tests"},
        {"thread_id": "t", "role": "assistant", "content": "Running them now"},
        {"thread_id": "t", "role": "user", "content": "And lint"},
        {"thread_id": "t", "role": "assistant", "content": 'Bash {"command": "ruff"}', "tool_call_id": "call-1"},
        {"thread_id": "t", "role": "tool", "content": "All checks passed!", "tool_call_id": "call-1"},
        {"thread_id": "t", "role": "user", "content": "Thanks"},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    env = {"PALIMPSEST_KEEP_RECENT": "2", "PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None}
    assert CliRunner().invoke(app, ["ingest", str(path), "--store", url], env=env).exit_code == 0
    result = CliRunner().invoke(app, ["compact", "t", "--force", "--store", url, "--json"], env=env)
    assert result.exit_code == 0, result.output
    # The call is outside the two-message tail, its result inside: the pair waits whole, and the command says so.
    assert json.loads(result.stdout)["status"] == "compacted"
    assert result.stderr == (
        "note: 1 message outside the fresh tail stay uncompacted: tool calls whose results are in the tail "
        "wait with them, since a pair is never split\n"
    )
