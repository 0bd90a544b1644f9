"""Credentials and private spans never reach the store (issue 12, item 5; issue 11, item 4).

Redaction happens in ``prepare_append``, which every write passes through, so it is
tested here at the pattern level, then end to end through the MCP tool and the CLI
``ingest`` on both stores: what is stored, what ``memory_stats`` counts, and that
``PALIMPSEST_REDACT=off`` stores credentials as they are.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from pathlib import Path

import pytest
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from test_cli import run_cli
from test_ingest import line, write_jsonl
from test_mcp_tools import call, client, make_settings

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.models import NewMessage, Role
from palimpsest.graph_schema.redact import redact
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.mcp.app import build_server

# Built from parts so no scanner takes this file for a leak; each has its issuer's shape.
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
GITLAB = "glpat-" + "xYz12345678901234567"
OPENAI = "sk-proj-" + "Abc123Def456Ghi789Jkl012Mno345"
ANTHROPIC = "sk-ant-api03-" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0"
BEARER = "eyJhbGciOiJIUzI1NiJ9.e30.abcDEF123_-"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nq0Zz==\n-----END RSA PRIVATE KEY-----"


def mark(kind: str, secret: str) -> str:
    return f"[secret:{kind}:{hashlib.sha256(secret.encode('utf-8')).hexdigest()[:8]}]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"export AWS_ACCESS_KEY_ID={AWS}", f"export AWS_ACCESS_KEY_ID={mark('aws-access-key', AWS)}"),
        (
            f"token {GITHUB} and {GITHUB_PAT}.",
            f"token {mark('github-token', GITHUB)} and {mark('github-token', GITHUB_PAT)}.",
        ),
        (f"GITLAB={GITLAB}", f"GITLAB={mark('gitlab-token', GITLAB)}"),
        (f"OPENAI_API_KEY={OPENAI}", f"OPENAI_API_KEY={mark('openai-key', OPENAI)}"),
        (f"key: {ANTHROPIC}", f"key: {mark('anthropic-key', ANTHROPIC)}"),
        (
            f"curl -H 'Authorization: Bearer {BEARER}' x",
            f"curl -H 'Authorization: Bearer {mark('bearer-token', BEARER)}' x",
        ),
        (f'{{"authorization": "bearer {BEARER}"}}', f'{{"authorization": "bearer {mark("bearer-token", BEARER)}"}}'),
        (f"key:\n{PEM}\nend", f"key:\n{mark('private-key', PEM)}\nend"),
    ],
)
def test_each_kind_of_credential_is_replaced_by_its_mark(text: str, expected: str) -> None:
    redacted = redact(text)
    assert redacted.text == expected
    assert redacted.secrets == expected.count("[secret:")


def test_prose_code_and_private_spans() -> None:
    prose = "We ask for a task-specific risk-assessment and the bearer of bad news; sk-learn is fine. ghp_short"
    assert redact(prose).text == prose
    assert redact(prose).secrets == 0
    private = redact("a <private>my home address</private> b <PRIVATE>x\ny</Private> c <private>rest")
    assert (private.text, private.private_spans) == ("a [private] b [private] c [private]", 3)
    assert redact(f"<private>{AWS}</private>", secrets=False).text == "[private]"
    assert redact(AWS, secrets=False).text == AWS


@pytest.fixture
def server(store_url: str) -> FastMCP:
    return build_server(make_settings(store_url))


async def _stored(store_url: str, thread_id: str) -> list[str]:
    store = open_store(store_url, Neo4jCredentials())
    await store.initialize()
    try:
        assert await check_store(store) == []
        return [message.content for message in await store.get_messages(None, thread_id)]
    finally:
        await store.close()


async def test_the_append_tool_stores_marks_and_counts_them(
    server: FastMCP, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_text = f"use {AWS} with Authorization: Bearer {BEARER} <private>my wifi is hunter2</private> ok"
    async with client(server) as session:
        await call(session, "append_messages", thread_id="t", messages=[{"role": "user", "content": secret_text}])
        stats = await call(session, "memory_stats")
        assert stats["secrets_redacted"] == 2
        found = await call(session, "grep_memories", query="IOSFODNN7EXAMPLE hunter2", mode="text")
        assert found["hits"] == []
        monkeypatch.setenv("PALIMPSEST_REDACT", "off")
        await call(session, "append_messages", thread_id="t", messages=[{"role": "user", "content": secret_text}])
        assert (await call(session, "memory_stats"))["secrets_redacted"] == 2
        monkeypatch.setenv("PALIMPSEST_REDACT", "maybe")
        with pytest.raises(ToolError, match="PALIMPSEST_REDACT must be 'on' or 'off'"):
            await call(session, "append_messages", thread_id="t", messages=[{"role": "user", "content": "x"}])
    assert await _stored(store_url, "t") == [
        f"use {mark('aws-access-key', AWS)} with Authorization: Bearer {mark('bearer-token', BEARER)} [private] ok",
        f"use {AWS} with Authorization: Bearer {BEARER} [private] ok",
    ]


def test_cli_ingest_redacts_before_storage(store_url: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [line(thread_id="i", content=f"{OPENAI} <private>diary</private>")])
    result = run_cli("ingest", path, "--store", store_url)
    assert result.exit_code == 0, result.output
    stats = run_cli("stats", "--store", store_url, "--json")
    assert '"secrets_redacted": 1' in stats.stdout


def test_cli_ingest_stored_content(store_url: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [line(thread_id="i", content=f"{GITLAB} <private>diary</private>")])
    assert run_cli("ingest", path, "--store", store_url).exit_code == 0
    assert asyncio.run(_stored(store_url, "i")) == [f"{mark('gitlab-token', GITLAB)} [private]"]


#: The threads table as Palimpsest wrote it before the redaction counter.
OLD_THREADS = """
CREATE TABLE threads (
    id TEXT PRIMARY KEY, partition TEXT NOT NULL, project TEXT, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL, message_count INTEGER NOT NULL DEFAULT 0,
    covered_count INTEGER NOT NULL DEFAULT 0, tokens INTEGER NOT NULL DEFAULT 0
);
INSERT INTO threads VALUES ('t', 'p', NULL, '2024-01-01T00:00:00.000000+00:00',
    '2024-01-01T00:00:00.000000+00:00', 0, 0, 0);
"""


async def test_an_older_sqlite_file_gains_the_counter(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as raw:
        raw.executescript(OLD_THREADS)
    reopened: MemoryStore = open_store(f"sqlite:///{path}", Neo4jCredentials())
    await reopened.initialize()
    try:
        await reopened.append_messages("p", "t", [NewMessage(role=Role.user, content=AWS)])
        stats = await reopened.stats("p")
        assert (stats.threads, stats.messages, stats.secrets_redacted) == (1, 1, 1)
    finally:
        await reopened.close()
