"""The ``palimpsest`` command line, run for real against real stores.

Most tests go through typer's ``CliRunner`` (in process, stdout and stderr apart); one
runs the installed console script as a subprocess. Ingest, stats and the compaction
round trip run on both backends; the rest on SQLite, a file per test.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import open_store
from palimpsest.server.cli.main import app
from palimpsest.server.feeds.ingest import ingest_files
from tests.support.claude_transcripts import transcript, write_lines
from tests.support.cli import CLEAN_ENV, run_cli, run_json
from tests.support.jsonl import GOOD, conversation, line, write_jsonl

COMMANDS = ["ingest", "stats", "compact", "describe", "expand", "doctor", "grep", "serve"]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite store file for one test."""
    return f"sqlite:///{tmp_path / 'cli.db'}"


def long_thread(thread_id: str, count: int) -> list[dict[str, Any]]:
    """A thread long enough to compact, with wordy turns the extractive summarizer can shorten."""
    records = []
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"Turn {i}: we discussed the refresh token rotation in auth/service.py at length. " * 4
        records.append(line(thread_id, role, text, created_at=f"2024-05-01T10:{i // 60:02d}:{i % 60:02d}Z"))
    return records


def panel_text(summary_id: str, store_url: str) -> str:
    """What ``describe`` shows a person, on one line (rich wraps the panel)."""
    result = run_cli("describe", summary_id, "--store", store_url)
    assert result.exit_code == 0, result.output
    return " ".join(part.strip("│ ") for part in result.stdout.splitlines())


def test_ingest_then_stats_match_and_reingest_adds_nothing(backend: str, store_url: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", conversation())
    first = run_json("ingest", path, "--store", store_url, "--partition", "ide")
    assert first["files"] == [
        {
            "path": str(path),
            "format": "jsonl",
            "messages": 8,
            "appended": 8,
            "duplicates": 0,
            "skipped": 0,
            "threads": 2,
            "partitions": ["ide"],
        }
    ]
    stats = run_json("stats", "--store", store_url, "--partition", "ide")
    assert (stats["partition"], stats["threads"], stats["messages"]) == ("ide", 2, 8)
    assert stats["store"] == backend
    home = run_json("stats", "--store", store_url)
    # The "default" partition is empty, and the answer says which partition is not.
    assert (home["partition"], home["messages"], home["partitions"]) == ("default", 0, {"ide": 2})
    table = run_cli("stats", "--store", store_url)
    assert "Partitions: ide (2 threads). Show one with --partition NAME" in " ".join(table.stdout.split())
    assert "partitions" not in run_json("stats", "--store", store_url, "--all-partitions")

    again = run_json("ingest", path, "--store", store_url, "--partition", "ide")
    assert (again["appended"], again["duplicates"]) == (0, 8)
    assert run_json("stats", "--store", store_url, "--partition", "ide") == stats


def test_bad_line_fails_with_file_and_line_and_writes_nothing(store_url: str, tmp_path: Path) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", conversation())
    run_json("ingest", good, "--store", store_url)
    before = run_json("stats", "--store", store_url)
    bad = write_jsonl(tmp_path / "bad.jsonl", [*GOOD, line(role="robot"), line("t2")])
    result = run_cli("ingest", bad, "--store", store_url)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {bad}:7: role")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert run_json("stats", "--store", store_url) == before


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (line(role="wizard"), "role: Input should be"),
        ({"thread_id": "t1", "content": "no role"}, "missing field 'role'"),
        (b'{"thread_id": "t1", "role": "user", "content": "\xff\xfe"}', "not valid UTF-8"),
        ('{"thread_id": "t1", "role": "user", "content": "x",}', "malformed JSON"),
    ],
)
def test_each_kind_of_bad_line_is_named(sqlite_url: str, tmp_path: Path, bad: Any, reason: str) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [line(), line(), bad])
    result = run_cli("ingest", path, "--store", sqlite_url, "--format", "jsonl")
    assert result.exit_code == 1
    assert f"{path}:3: {reason}" in result.stderr
    assert run_json("stats", "--store", sqlite_url)["messages"] == 0


def test_grep_finds_an_ingested_phrase(sqlite_url: str, tmp_path: Path) -> None:
    run_json("ingest", write_jsonl(tmp_path / "chat.jsonl", conversation()), "--store", sqlite_url)
    found = run_json("grep", "JWT auth", "--store", sqlite_url)
    assert found["hits"], found
    top = found["hits"][0]
    assert (top["kind"], top["thread_id"], top["partition"], top["covered_by"]) == ("message", "alpha", "default", [])
    assert "JWT" in top["snippet"]
    assert run_json("grep", "JWT", "--store", sqlite_url, "--thread", "beta")["hits"] == []
    assert run_json("grep", "JWT", "--store", sqlite_url, "--partition", "elsewhere")["hits"] == []
    assert run_json("grep", "JWT", "--store", sqlite_url, "--all-partitions")["hits"][0]["id"] == top["id"]
    pattern = run_json("grep", r"tokens? now refresh every \d+ minutes", "--mode", "regex", "--store", sqlite_url)
    assert [(hit["thread_id"], hit["score"]) for hit in pattern["hits"]] == [("alpha", 1.0)]
    bad = run_cli("grep", "(unclosed", "--mode", "regex", "--store", sqlite_url)
    assert bad.exit_code == 1 and bad.stderr.startswith("error: ")
    human = run_cli("grep", "JWT", "--store", sqlite_url)
    assert human.exit_code == 0 and "1 hit" in human.stdout and "alpha" in human.stdout


def test_compact_describe_expand_doctor_end_to_end(store_url: str, tmp_path: Path) -> None:
    records = long_thread("long", 45)
    run_json("ingest", write_jsonl(tmp_path / "long.jsonl", records), "--store", store_url)
    compacted = run_json("compact", "long", "--force", "--store", store_url)
    assert compacted["status"] == "compacted" and compacted["summaries_created"] >= 1
    first = compacted["summary_ids"][0]

    described = run_json("describe", first, "--store", store_url)
    assert (described["id"], described["thread_id"], described["level"], described["first_seq"]) == (
        first,
        "long",
        1,
        0,
    )
    assert described["child_ids"] and described["parent_id"] is None and "text" not in described
    heading = described["preview"].splitlines()[0]
    assert heading and heading in panel_text(first, store_url)
    covered = described["last_seq"] + 1

    page = run_json("expand", first, "--store", store_url, "--limit", "5")
    assert page["total"] == covered and len(page["items"]) == 5 and page["next_cursor"]
    assert [item["content"] for item in page["items"]] == [r["content"] for r in records[:5]]
    rest = run_json("expand", first, "--store", store_url, "--limit", "1000", "--cursor", page["next_cursor"])
    assert [item["seq"] for item in rest["items"]] == list(range(5, covered)) and rest["next_cursor"] is None

    human = run_cli("expand", first, "--store", store_url, "--limit", "2")
    assert human.exit_code == 0
    assert "#0 user" in human.stdout and "#1 assistant" in human.stdout and "2 of" in human.stdout
    panel = run_cli("describe", first, "--store", store_url)
    assert panel.exit_code == 0 and first in panel.stdout and "summarizer" in panel.stdout

    assert run_json("compact", "long", "--store", store_url)["status"] == "nothing_to_do"
    report = run_json("doctor", "--store", store_url)
    assert report == {"ok": True, "threads": 1, "breaches": []}
    healthy = run_cli("doctor", "--store", store_url)
    assert healthy.exit_code == 0 and "all 7 invariants hold across 1 thread\n" in healthy.stdout


def test_doctor_exits_1_naming_each_breach(sqlite_url: str, tmp_path: Path) -> None:
    run_json("ingest", write_jsonl(tmp_path / "chat.jsonl", conversation()), "--store", sqlite_url)
    # Damage done behind the store's back, as a bad migration or a hand edit would.
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as db:
        db.execute("UPDATE messages SET content = 'tampered' WHERE content = 'Reading auth.py'")
    db.close()
    result = run_cli("doctor", "--store", sqlite_url)
    assert result.exit_code == 1
    assert "breach of invariant 1 in alpha/msg_" in result.stderr and "seq 2" in result.stderr
    assert "1 breach" in result.stdout
    report = json.loads(run_cli("doctor", "--store", sqlite_url, "--json").stdout)
    assert report["ok"] is False and report["threads"] == 2
    assert {(b["invariant"], b["thread_id"]) for b in report["breaches"]} == {(1, "alpha")}


def test_domain_errors_are_one_line_on_stderr_with_exit_1(sqlite_url: str) -> None:
    unknown = run_cli("describe", "sum_nope", "--store", sqlite_url)
    assert (unknown.exit_code, unknown.stdout) == (1, "")
    assert unknown.stderr == "error: unknown summary id 'sum_nope'\n"
    missing = run_cli("compact", "no-such-thread", "--store", sqlite_url)
    assert missing.exit_code == 1 and missing.stderr == "error: unknown thread id 'no-such-thread'\n"
    bad_uri = run_cli("stats", "--store", "mysql://localhost")
    assert bad_uri.exit_code == 1 and bad_uri.stderr.startswith("error: unknown store URI 'mysql://localhost'")


def test_bad_configuration_is_one_line_error(sqlite_url: str) -> None:
    result = CliRunner().invoke(
        app, ["stats", "--store", sqlite_url], env={**CLEAN_ENV, "PALIMPSEST_COMPACTION_THRESHOLD": "lots"}
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("error: invalid configuration: compaction_threshold:")


def test_usage_errors_exit_2(sqlite_url: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", [line()])
    assert run_cli("ingest", path, "--format", "yaml", "--store", sqlite_url).exit_code == 2
    assert run_cli("ingest", tmp_path / "absent.jsonl", "--store", sqlite_url).exit_code == 2
    assert run_cli("grep", "x", "--mode", "fuzzy", "--store", sqlite_url).exit_code == 2
    both = run_cli("stats", "--partition", "a", "--all-partitions", "--store", sqlite_url)
    assert both.exit_code == 2 and "--all-partitions" in both.stderr


def test_partition_comes_from_the_environment_when_no_flag(sqlite_url: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", [line("envthread")])
    env = {**CLEAN_ENV, "PALIMPSEST_PARTITION": "from-env", "PALIMPSEST_STORE": sqlite_url}
    result = CliRunner().invoke(app, ["ingest", str(path), "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert run_json("stats", "--store", sqlite_url, "--partition", "from-env")["messages"] == 1
    everything = run_json("stats", "--store", sqlite_url, "--all-partitions")
    assert (everything["partition"], everything["messages"]) == (None, 1)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_ending_with_an_example(command: str) -> None:
    result = run_cli(command, "--help")
    assert result.exit_code == 0
    assert "--store" in result.stdout
    # Every command that prints a result offers it as JSON; serve prints none.
    assert ("--json" in result.stdout) == (command != "serve")
    text = [row.strip() for row in result.stdout.splitlines() if row.strip()]
    examples = [row for row in text if row.startswith("Example: palimpsest " + command)]
    assert len(examples) == 1, result.stdout


def table_rows(shown: str) -> list[list[str]]:
    """The body rows of a rich table as printed, each a list of its stripped cells."""
    return [[cell.strip() for cell in row.strip("│").split("│")] for row in shown.splitlines() if row.startswith("│")]


def test_ingest_table_for_people(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "a.jsonl", conversation())
    write_jsonl(tmp_path / "b.jsonl", [line("gamma", content="[bold]not markup[/bold]")])
    write_lines(tmp_path / "c.jsonl", transcript())
    result = run_cli("ingest", "a.jsonl", "b.jsonl", "c.jsonl", "--store", sqlite_url)
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    # Each file's row, then the partitions it wrote on the line below its name.
    assert rows[0:2] == [["a.jsonl", "jsonl", "8", "8", "0", "0", "2"], ["in default", "", "", "", "", "", ""]]
    assert rows[2:4] == [["b.jsonl", "jsonl", "1", "1", "0", "0", "1"], ["in default", "", "", "", "", "", ""]]
    # The Claude Code transcript skips its four lines of bookkeeping and lands in its own partition.
    assert rows[4:6] == [["c.jsonl", "claude", "9", "9", "0", "4", "1"], ["in claude", "", "", "", "", "", ""]]
    assert rows[6] == ["total", "", "18", "18", "0", "4", "4"]
    assert " ".join(row[0] for row in rows[7:]) == "in claude, default"
    stats = run_cli("stats", "--store", sqlite_url)
    assert [row.split()[-2] for row in stats.stdout.splitlines() if " messages " in row] == ["9"]
    shown = run_cli("grep", "markup", "--store", sqlite_url)
    assert "[bold]" in shown.stdout


@pytest.mark.slow
def test_installed_console_script(sqlite_url: str, tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "palimpsest"
    env = {key: value for key, value in os.environ.items() if key not in CLEAN_ENV}
    path = write_jsonl(tmp_path / "chat.jsonl", conversation())

    def palimpsest(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(script), *map(str, args)], capture_output=True, text=True, env=env, timeout=120, check=False
        )

    ingested = palimpsest("ingest", path, "--store", sqlite_url, "--json")
    assert ingested.returncode == 0, ingested.stderr
    assert json.loads(ingested.stdout)["appended"] == 8
    stats = palimpsest("stats", "--store", sqlite_url, "--json")
    assert json.loads(stats.stdout)["messages"] == 8
    failed = palimpsest("expand", "sum_missing", "--store", sqlite_url)
    assert failed.returncode == 1
    assert failed.stderr == "error: unknown summary id 'sum_missing'\n" and failed.stdout == ""


def test_serve_refuses_an_open_unauthenticated_http_server(sqlite_url: str) -> None:
    result = run_cli("serve", "--transport", "http", "--host", "0.0.0.0", "--store", sqlite_url)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith("error: refusing to serve HTTP on 0.0.0.0")


@pytest.mark.slow
async def test_serve_over_stdio_answers_an_mcp_client(sqlite_url: str, tmp_path: Path) -> None:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    store = open_store(sqlite_url)
    await store.initialize()
    try:
        await ingest_files(store, [write_jsonl(tmp_path / "chat.jsonl", conversation())], partition="ide")
    finally:
        await store.close()
    script = Path(sys.executable).parent / "palimpsest"
    env = {key: value for key, value in os.environ.items() if key not in CLEAN_ENV}
    transport = StdioTransport(
        str(script), ["serve", "--store", sqlite_url, "--partition", "ide"], env={**env, "PALIMPSEST_SCHEDULER": "off"}
    )
    async with Client(transport) as client:
        result = await client.call_tool("memory_stats", {})
    assert (result.structured_content["messages"], result.structured_content["threads"]) == (8, 2)
