"""JSONL ingestion: parsing and validation alone, then real ingestion into both stores.

Parsing is checked without a store (every bad line named by ``FILE:LINE``); ingestion
runs on the ``store`` fixture, so SQLite and Neo4j both show that a file is all or
nothing and that ingesting it again adds nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import MAX_BATCH, MAX_MESSAGE_BYTES, NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.feeds.ingest import detect_format, ingest_files, parse_jsonl
from palimpsest.server.feeds.transcripts import IngestProgress
from tests.support.jsonl import GOOD, conversation, line, write_jsonl


def test_parse_groups_threads_in_file_order(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", conversation())
    batches = parse_jsonl(path, partition="ide")
    assert [(b.thread_id, b.partition, b.project, b.first_line) for b in batches] == [
        ("alpha", "ide", "api", 1),
        ("beta", "ide", None, 3),
    ]
    alpha, beta = batches
    assert [m.content for m in alpha.messages] == [
        "You are a coding agent.",
        "Add JWT auth to the API",
        "Reading auth.py",
        "def login(): ...",
        "Done: tokens now refresh every 15 minutes.",
    ]
    assert alpha.messages[2].tool_call_id == "call-1" and alpha.messages[2].metadata == {"model": "x"}
    assert alpha.messages[3].role is Role.tool
    assert alpha.messages[0].created_at is not None and alpha.messages[0].created_at.utcoffset().total_seconds() == 0
    assert all(isinstance(m, NewMessage) for m in alpha.messages)
    # The caller's id is kept; identical lines get distinct, deterministic ids.
    assert beta.messages[0].message_id == "b-1"
    first_ok, second_ok = beta.messages[1].message_id, beta.messages[2].message_id
    assert first_ok != second_ok and first_ok.startswith("line-") and second_ok.startswith("line-")
    again = parse_jsonl(path, partition="ide")
    assert [m.message_id for b in again for m in b.messages] == [m.message_id for b in batches for m in b.messages]


def test_parse_line_partition_wins_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "mixed.jsonl",
        [line("a"), "", "   ", line("b", partition="windsurf"), line("a", "assistant", "hi")],
    )
    batches = parse_jsonl(path, partition="default")
    assert [(b.thread_id, b.partition, len(b.messages)) for b in batches] == [("a", "default", 2), ("b", "windsurf", 1)]


def test_parse_cuts_batches_at_max_batch(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "long.jsonl", [line("long", content=f"m{i}") for i in range(MAX_BATCH + 3)])
    batches = parse_jsonl(path, partition="p")
    assert [len(b.messages) for b in batches] == [MAX_BATCH, 3]
    assert batches[1].first_line == MAX_BATCH + 1
    assert batches[1].messages[0].content == f"m{MAX_BATCH}"


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ('{"thread_id": "t1", "role": "user", "content": "unterminated', "malformed JSON"),
        (line(role="robot"), "role"),
        ({"thread_id": "t1", "role": "user"}, "missing field 'content'"),
        ({"role": "user", "content": "x"}, "missing field 'thread_id'"),
        (line(colour="red"), "unknown field 'colour'"),
        (line(created_at="yesterday at noon"), "created_at"),
        (b'{"thread_id": "t1", "role": "user", "content": "caf\xe9"}', "not valid UTF-8 (byte 0xe9"),
        ('{"thread_id": "t1", "role": "user", "content": "\\ud800"}', "malformed JSON"),
        ("[1, 2]", "must be a JSON object"),
        (line(content=1), "content"),
        (line(thread_id="   "), "thread_id must not be empty"),
        (line(partition="other"), "partition 'default' on line 1, 'other' here"),
    ],
)
def test_parse_names_file_and_line_of_bad_input(tmp_path: Path, bad: Any, reason: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [*GOOD, bad, line(content="after")])
    with pytest.raises(InvalidInput) as caught:
        parse_jsonl(path, partition="default")
    assert f"{path}:7:" in str(caught.value)
    assert reason in str(caught.value)


def test_parse_refuses_content_over_the_size_limit(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "huge.jsonl", [line(), line(content="x" * (MAX_MESSAGE_BYTES + 1))])
    with pytest.raises(InvalidInput, match=r"huge\.jsonl:2: content is 4194305 bytes, over the limit"):
        parse_jsonl(path, partition="p")


def test_parse_refuses_a_thread_in_two_projects(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [line(project="a"), line(), line(project="b")])
    with pytest.raises(InvalidInput, match=r"p\.jsonl:3: thread 't1' is in project 'a' earlier, 'b' here"):
        parse_jsonl(path, partition="p")


def test_parse_reports_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read the file"):
        parse_jsonl(tmp_path / "missing.jsonl", partition="p")


def test_detect_format_reads_content_not_extension(tmp_path: Path) -> None:
    assert detect_format(write_jsonl(tmp_path / "chat.txt", ["", line()])) == "jsonl"
    assert detect_format(write_jsonl(tmp_path / "empty.jsonl", [])) == "jsonl"
    claude_like = write_jsonl(tmp_path / "session.jsonl", [{"type": "user", "sessionId": "s", "message": {}}])
    assert detect_format(claude_like) == "claude"
    unknown = write_jsonl(tmp_path / "other.jsonl", [{"event": "click", "at": 3}])
    with pytest.raises(InvalidInput, match=r"other\.jsonl:1: cannot tell the format"):
        detect_format(unknown)


async def test_ingest_counts_and_reingest_adds_nothing(store: MemoryStore, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", conversation())
    report = await ingest_files(store, [path], partition="ide")
    assert (report.messages, report.appended, report.duplicates, report.threads) == (8, 8, 0, 2)
    assert report.files[0].path == str(path) and report.files[0].format == "jsonl"
    alpha = await store.get_messages("ide", "alpha")
    assert [(m.seq, m.role.value, m.content) for m in alpha] == [
        (0, "system", "You are a coding agent."),
        (1, "user", "Add JWT auth to the API"),
        (2, "assistant", "Reading auth.py"),
        (3, "tool", "def login(): ..."),
        (4, "assistant", "Done: tokens now refresh every 15 minutes."),
    ]
    assert (await store.get_thread("ide", "alpha")).project == "api"
    beta = await store.get_messages("ide", "beta")
    assert [m.content for m in beta] == ["Why does the build fail?", "ok", "ok"]
    assert beta[0].source_id == "b-1"
    before = await store.stats("ide")

    again = await ingest_files(store, [path], partition="ide")
    assert (again.appended, again.duplicates) == (0, 8)
    assert (await store.stats("ide")).model_dump() == before.model_dump()


async def test_bad_line_writes_nothing_from_its_file(store: MemoryStore, tmp_path: Path) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", [line("kept", content="first file")])
    bad = write_jsonl(tmp_path / "bad.jsonl", [*GOOD, line(role="wizard"), line("other")])
    with pytest.raises(InvalidInput, match=r"bad\.jsonl:7: role"):
        await ingest_files(store, [good, bad], partition="p")
    stats = await store.stats(None)
    assert (stats.threads, stats.messages) == (1, 1)
    assert [m.content for m in await store.get_messages("p", "kept")] == ["first file"]


async def test_a_thread_id_of_another_partition_is_a_thread_of_its_own(store: MemoryStore, tmp_path: Path) -> None:
    await store.append_messages("claude", "shared", [NewMessage(role=Role.user, content="mine")])
    path = write_jsonl(tmp_path / "x.jsonl", [line("fresh", content="new"), line("shared", content="theirs")])
    await ingest_files(store, [path], partition="windsurf")
    assert [m.content for m in await store.get_messages("claude", "shared")] == ["mine"]
    assert [m.content for m in await store.get_messages("windsurf", "shared")] == ["theirs"]


async def test_progress_reports_reading_then_writing(tmp_path: Path) -> None:
    # The callback does not depend on the backend: SQLite alone keeps this test quick.
    records = [line(f"t{i % 3}", content=f"progress message {i}") for i in range(4500)]
    path = write_jsonl(tmp_path / "big.jsonl", records)
    events: list[IngestProgress] = []
    store = open_store(f"sqlite:///{tmp_path / 'progress.db'}")
    await store.initialize()
    try:
        report = await ingest_files(store, [path], partition="p", progress=events.append)
    finally:
        await store.close()
    assert report.appended == 4500
    reads = [e for e in events if e.phase == "read"]
    writes = [e for e in events if e.phase == "write"]
    size = path.stat().st_size
    assert len(reads) >= 3 and reads[-1].done == reads[-1].total == size
    assert [e.done for e in reads] == sorted(e.done for e in reads)
    assert [e.done for e in writes] == [1500, 3000, 4500] and {e.total for e in writes} == {4500}
    assert events.index(reads[-1]) < events.index(writes[0])
