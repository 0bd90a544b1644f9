"""Memory handed back at session start: a second session of a project gets what the first one left.

The first session is replayed through ``palimpsest hook claude``, compacted, and given
a fact; the second session's ``SessionStart`` must then carry that fact, where the first
session stands (with its top summary's id, to expand) and what it set out to do, within
``PALIMPSEST_STARTUP_BUDGET``, byte for byte the same on every call.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner, Result

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import NewFact, Summary
from palimpsest.server.cli.main import app
from palimpsest.server.retrieval.startup import RULES_CHARS, project_memory, write_rules
from tests.support.transcripts import PROJECT_CWD, append_jsonl, claude_turns

FIRST = "11111111-e544-47b9-898a-f169f651788c"
SECOND = "22222222-e544-47b9-898a-f169f651788c"
FACT = "Refresh tokens rotate every 15 minutes and are stored hashed."


def start(url: str, session: str, source: str = "startup", **env: str) -> Result:
    stdin = {
        "session_id": session,
        "transcript_path": f"/nowhere/{session}.jsonl",
        "cwd": PROJECT_CWD,
        "hook_event_name": "SessionStart",
        "source": source,
    }
    return CliRunner().invoke(
        app,
        ["hook", "claude", "--store", url],
        input=json.dumps(stdin),
        env={"PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None, **env},
    )


def first_session(url: str, folder: Path) -> Summary:
    """The first session replayed through its hooks, compacted, and given one fact; its top summary."""
    transcript = folder / f"{FIRST}.jsonl"
    for turn in claude_turns(FIRST):
        for name, lines in turn.items():
            append_jsonl(transcript if name == "main" else folder / FIRST / name, lines)
        stdin = json.dumps({"session_id": FIRST, "transcript_path": str(transcript), "cwd": PROJECT_CWD})
        assert CliRunner().invoke(app, ["hook", "claude", "--store", url], input=stdin).exit_code == 0
    compacted = CliRunner().invoke(
        app, ["compact", FIRST, "--force", "--partition", "claude", "--store", url], env={"PALIMPSEST_KEEP_RECENT": "3"}
    )
    assert compacted.exit_code == 0, compacted.output

    async def add_fact() -> Summary:
        store = open_store(url)
        await store.initialize()
        try:
            [source] = await store.get_messages("claude", FIRST, first_seq=13, limit=1)
            await store.add_facts(
                [
                    NewFact(
                        partition="claude",
                        text=FACT,
                        kind="decision",
                        subject="refresh-tokens",
                        source_message_ids=[source.id],
                    )
                ]
            )
            [top] = [item for item in await store.frontier("claude", FIRST) if item.kind == "summary"]
            return await store.get_summary("claude", top.id)
        finally:
            await store.close()

    return asyncio.run(add_fact())


def test_second_session_gets_the_first_ones_facts_and_summaries_within_budget(store_url: str, tmp_path: Path) -> None:
    summary = first_session(store_url, tmp_path)
    result = start(store_url, SECOND)
    assert result.exit_code == 0, result.output
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("# Memory of project billing-api from earlier sessions (Palimpsest)\n")
    assert "grep_memories" in context and "expand_summary" in context
    assert f"  - {FACT} (msg_" in context
    assert f"### {FIRST} (" in context and f"summary {summary.id})" in context
    assert "## Where things stand" in context and "- Asked (3):\n  1. Add JWT auth to the billing API" in context
    assert estimate_tokens(context) <= 1500
    # The same memory gives the same bytes.
    assert start(store_url, SECOND).stdout == result.stdout


def test_budget_and_resume(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    first_session(url, tmp_path)
    small = json.loads(start(url, SECOND, PALIMPSEST_STARTUP_BUDGET="120").stdout)["hookSpecificOutput"]
    assert estimate_tokens(small["additionalContext"]) <= 120
    assert small["additionalContext"].startswith("# Memory of project billing-api")
    full = json.loads(start(url, SECOND).stdout)["hookSpecificOutput"]["additionalContext"]
    assert len(small["additionalContext"]) < len(full)
    # After its own compaction, the first session gets its own thread's context back.
    resumed = json.loads(start(url, FIRST, "compact").stdout)["hookSpecificOutput"]["additionalContext"]
    assert "## Summaries of the older part" in resumed and "Rotating them every 15 minutes." in resumed
    # A project nobody worked on before gets nothing.
    other = CliRunner().invoke(
        app,
        ["hook", "claude", "--store", url],
        input=json.dumps(
            {
                "session_id": "n",
                "transcript_path": "/nowhere/n.jsonl",
                "cwd": "/srv/other",
                "hook_event_name": "SessionStart",
            }
        ),
    )
    assert json.loads(other.stdout)["hookSpecificOutput"]["additionalContext"] == ""


def test_rules_file_memory_stays_under_its_character_cap(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    first_session(url, tmp_path)

    async def memory() -> str:
        store = open_store(url)
        await store.initialize()
        try:
            for index in range(60):
                [source] = await store.get_messages("claude", FIRST, first_seq=index % 15, limit=1)
                fact = NewFact(
                    partition="claude",
                    text=f"Fact number {index} about the billing API " + "detail " * 30,
                    kind="decision",
                    subject=f"topic-{index}",
                    source_message_ids=[source.id],
                )
                await store.add_facts([fact])
            return await project_memory(
                store, partition="claude", project="billing-api", budget_tokens=100_000, max_chars=RULES_CHARS
            )
        finally:
            await store.close()

    text = asyncio.run(memory())
    assert 5000 < len(text) <= RULES_CHARS
    assert text.count("(fact ") < 60


def test_rules_file_is_rewritten_only_when_the_memory_changes(tmp_path: Path) -> None:
    path = tmp_path / ".windsurf" / "rules" / "palimpsest.md"
    assert write_rules(path, "# Memory\n- one\n") is True
    assert path.read_text(encoding="utf-8") == "---\ntrigger: always_on\n---\n\n# Memory\n- one\n"
    assert write_rules(path, "# Memory\n- one\n") is False
    assert write_rules(path, "# Memory\n- two\n") is True
    assert [item.name for item in path.parent.iterdir()] == ["palimpsest.md"]
