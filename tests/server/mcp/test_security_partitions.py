"""Partitions never see or block each other (issue 12, defect 4, and issue 11's thread identity).

A token for one partition must learn nothing about another: not which thread ids it
uses (no "already used by another partition" oracle), not the hosts and pids of the
processes that maintain the store. Each test runs on both stores.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastmcp import FastMCP

from palimpsest.graph_schema import sqlite as sqlite_package
from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.models import MaintenanceCycle, NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.mcp.app import build_server
from tests.support.mcp_calls import call, client, make_settings


@pytest.fixture
def server(store_url: str) -> FastMCP:
    return build_server(make_settings(store_url))


async def test_memory_stats_shows_cycles_without_host_pid_or_thread_names(server: FastMCP, store: MemoryStore) -> None:
    started = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    await store.record_cycle(
        MaintenanceCycle(
            id="cyc_1",
            job="compaction",
            holder="build-host-7:4242:ab12cd",
            started_at=started,
            finished_at=started,
            threads=2,
            summaries=5,
            errors=["thread beta-secret-session: store unavailable"],
        )
    )
    async with client(server, "windsurf") as session:
        stats = await call(session, "memory_stats")
    [shown] = stats["last_cycles"]
    assert (shown["job"], shown["threads"], shown["summaries"]) == ("compaction", 2, 5)
    assert shown["holder"].startswith("process-") and len(shown["holder"]) == len("process-") + 8
    assert "build-host-7" not in str(stats) and "4242" not in str(stats)
    assert "beta-secret-session" not in str(stats)
    assert shown["errors"] == ["1 error(s), named in the log of the process that ran it"]


async def test_partitions_share_a_thread_id_without_seeing_each_other(store: MemoryStore) -> None:
    alpha = await store.append_messages("alpha", "x", [NewMessage(role=Role.user, content="alpha's words")])
    beta = await store.append_messages("beta", "x", [NewMessage(role=Role.user, content="beta's words")])
    assert (alpha.appended, beta.appended) == (1, 1)
    assert [m.content for m in await store.get_messages("beta", "x")] == ["beta's words"]
    hits = await store.search_text("words", partition="alpha", thread_id="x")
    assert [hit.snippet for hit in hits] == ["alpha's words"]
    assert [t.partition for t in await store.list_threads("alpha")] == ["alpha"]
    assert (await store.stats("beta")).messages == 1


async def test_the_tool_gives_no_oracle_and_allows_no_squatting(server: FastMCP) -> None:
    async with client(server, "windsurf") as windsurf, client(server, "codex") as codex:
        first = await call(
            windsurf, "append_messages", thread_id="session-1", messages=[{"role": "user", "content": "w"}]
        )
        second = await call(
            codex, "append_messages", thread_id="session-1", messages=[{"role": "user", "content": "c"}]
        )
        assert (first["partition"], second["partition"]) == ("windsurf", "codex")
        assert (first["appended"], second["appended"]) == (1, 1)
        dag = await call(codex, "get_summary_dag", thread_id="session-1")
        assert dag["partition"] == "codex"


#: The tables naming a thread as Palimpsest wrote them when a thread id was the key.
OLD_TABLES = """
CREATE TABLE threads (
    id TEXT PRIMARY KEY, partition TEXT NOT NULL, project TEXT, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL, message_count INTEGER NOT NULL DEFAULT 0,
    covered_count INTEGER NOT NULL DEFAULT 0, tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX threads_by_partition ON threads (partition, updated_at);
CREATE TABLE messages (
    pk INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, source_id TEXT NOT NULL,
    thread_id TEXT NOT NULL REFERENCES threads (id), partition TEXT NOT NULL, project TEXT,
    seq INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, sha256 TEXT NOT NULL,
    tokens INTEGER NOT NULL, created_at TEXT NOT NULL, tool_call_id TEXT,
    metadata TEXT NOT NULL DEFAULT '{}', UNIQUE (thread_id, seq), UNIQUE (thread_id, source_id)
);
CREATE TABLE summaries (
    pk INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, thread_id TEXT NOT NULL REFERENCES threads (id),
    partition TEXT NOT NULL, level INTEGER NOT NULL CHECK (level >= 1), text TEXT NOT NULL,
    tokens INTEGER NOT NULL, source_tokens INTEGER NOT NULL, first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL, earliest_at TEXT NOT NULL, latest_at TEXT NOT NULL,
    message_count INTEGER NOT NULL, digest TEXT NOT NULL, summarizer TEXT NOT NULL, created_at TEXT NOT NULL
);
CREATE INDEX summaries_by_thread ON summaries (thread_id, level, first_seq);
CREATE TABLE fact_layer (
    thread_id TEXT PRIMARY KEY REFERENCES threads (id), enabled INTEGER NOT NULL DEFAULT 0,
    extracted_seq INTEGER NOT NULL DEFAULT -1
) WITHOUT ROWID;
"""

WORDS = ["the needle is in auth.py", "second turn", "third turn"]


def before_derived_text(schema: str) -> str:
    """Today's schema less what came with tool messages' derived search text, as an old file had it."""
    schema = re.sub(r"CREATE INDEX IF NOT EXISTS messages_search_text_missing.*?;", "", schema, flags=re.S)
    schema = re.sub(r"CREATE TRIGGER IF NOT EXISTS messages_fts_search_text.*?END;", "", schema, flags=re.S)
    schema = schema.replace("content, search_text, content = 'messages'", "content, content = 'messages'")
    return schema.replace(
        "(rowid, content, search_text) VALUES (new.pk, new.content, new.search_text)",
        "(rowid, content) VALUES (new.pk, new.content)",
    )


def old_sqlite_file(path: Path) -> None:
    """A file as the old code left it: old keys, three messages under old ids, its full-text index."""
    from palimpsest.graph_schema.identity import estimate_tokens, message_sha256
    from tests.support.ids import old_message_id

    schema = (Path(sqlite_package.__file__).parent / "schema.sql").read_text("utf-8")
    when = "2024-05-01T10:00:00.000000+00:00"
    with sqlite3.connect(path) as raw:
        raw.executescript(OLD_TABLES)
        raw.executescript(before_derived_text(schema))
        raw.execute(
            "INSERT INTO threads VALUES ('shared', 'alpha', NULL, ?, ?, 3, 0, ?)",
            (when, when, sum(estimate_tokens(w) for w in WORDS)),
        )
        for seq, content in enumerate(WORDS):
            raw.execute(
                "INSERT INTO messages (id, source_id, thread_id, partition, seq, role, content, sha256, tokens,"
                " created_at) VALUES (?, ?, 'shared', 'alpha', ?, 'user', ?, ?, ?, ?)",
                (
                    old_message_id("alpha", "shared", f"m{seq}"), f"m{seq}", seq, content,
                    message_sha256("alpha", "shared", f"m{seq}", "user", content, None), estimate_tokens(content), when,
                ),
            )  # fmt: skip
        raw.execute("INSERT INTO fact_layer VALUES ('shared', 1, 0)")


async def test_an_sqlite_file_keyed_by_thread_id_alone_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_sqlite_file(path)
    for _ in range(2):  # initialize() migrates once, then finds nothing to do
        store = open_store(f"sqlite:///{path}", Neo4jCredentials())
        await store.initialize()
        await store.close()
    store = open_store(f"sqlite:///{path}", Neo4jCredentials())
    await store.initialize()
    try:
        assert [m.content for m in await store.get_messages("alpha", "shared")] == WORDS
        [hit] = await store.search_text("needle", partition="alpha")
        assert hit.snippet == WORDS[0]
        again = await store.append_messages(
            "alpha", "shared", [NewMessage(role=Role.user, content=w, message_id=f"m{i}") for i, w in enumerate(WORDS)]
        )
        assert (again.appended, again.duplicates) == (0, 3)
        other = await store.append_messages("beta", "shared", [NewMessage(role=Role.user, content="beta")])
        assert other.appended == 1
        layer = await store.fact_layer("alpha", "shared")
        assert (layer.enabled, layer.extracted_seq) == (True, 0)
        assert await check_store(store) == []
    finally:
        await store.close()


async def test_a_neo4j_database_with_thread_ids_unique_alone_is_migrated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Data as old code left it (old ids, the id-only constraint); initialize() lifts the constraint."""
    import neo4j

    from palimpsest.graph_schema import prepare
    from tests.support.ids import old_message_id
    from tests.support.stores import neo4j_test_uri, wipe_neo4j

    uri = neo4j_test_uri()
    await wipe_neo4j(uri)
    store = open_store(uri, Neo4jCredentials())
    await store.initialize()
    with monkeypatch.context() as old_code:
        old_code.setattr(prepare, "message_id", old_message_id)
        written = await store.append_messages(
            "alpha", "shared", [NewMessage(role=Role.user, content=w, message_id=f"m{i}") for i, w in enumerate(WORDS)]
        )
    await store.close()
    driver = neo4j.AsyncGraphDatabase.driver(uri, auth=None)
    try:
        for statement in (
            "MATCH (s:PalimpsestSchema) DELETE s",  # old code recorded no schema version
            "DROP CONSTRAINT thread_key IF EXISTS",
            "DROP INDEX thread_by_id IF EXISTS",
            "CREATE CONSTRAINT thread_id IF NOT EXISTS FOR (t:Thread) REQUIRE t.id IS UNIQUE",
        ):
            await driver.execute_query(statement)
        store = open_store(uri, Neo4jCredentials())
        await store.initialize()
        try:
            again = await store.append_messages(
                "alpha",
                "shared",
                [NewMessage(role=Role.user, content=w, message_id=f"m{i}") for i, w in enumerate(WORDS)],
            )
            assert (again.appended, again.message_ids) == (0, written.message_ids)
            other = await store.append_messages("beta", "shared", [NewMessage(role=Role.user, content="beta")])
            assert other.appended == 1
            assert await check_store(store) == []
        finally:
            await store.close()
        records, _, _ = await driver.execute_query("SHOW CONSTRAINTS YIELD name RETURN collect(name) AS names")
        assert "thread_id" not in records[0]["names"] and "thread_key" in records[0]["names"]
    finally:
        await driver.close()
