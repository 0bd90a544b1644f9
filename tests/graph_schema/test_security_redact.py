"""Credentials and private spans never reach the store (issue 12, item 5; issue 11, item 4; issue 30).

Redaction happens in ``prepare_append``, which every write passes through, over the
content and every string of the metadata, so it is tested here at the pattern level
(each kind caught, and the near misses that must stay prose), then end to end through
the MCP tool, the CLI ``ingest`` of a Claude Code transcript and the Gemini CLI hook, on
both stores: what is stored, what ``memory_stats`` counts, what ``expand_summary`` and
``export`` hand back, and for SQLite every byte of the database, its WAL and shared
memory files and every term of its full-text indexes. ``PALIMPSEST_REDACT=off`` stores
credentials as they are.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import Message, NewMessage, Role
from palimpsest.graph_schema.prepare import prepare_append
from palimpsest.graph_schema.redact import redact, redact_json
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.cli.main import app
from palimpsest.server.mcp.app import build_server
from tests.support.agent_captures import GEMINI_CWD, GEMINI_SESSION, append_lines, gemini_metadata_line
from tests.support.claude_transcripts import SESSION as CLAUDE_SESSION
from tests.support.claude_transcripts import entry
from tests.support.cli import run_cli
from tests.support.hooks import CLEAN_ENV, hook, silent, stored
from tests.support.jsonl import line, write_jsonl
from tests.support.mcp_calls import call, client, make_settings, turn

# Built from parts so no scanner takes this file for a leak; each has its issuer's shape.
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
GITLAB = "glpat-" + "xYz12345678901234567"
OPENAI = "sk-proj-" + "Abc123Def456Ghi789Jkl012Mno345"
OPENROUTER = "sk-or-v1-" + "0123456789abcdef0123456789abcdef"
ANTHROPIC = "sk-ant-api03-" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0"
BEARER = "eyJhbGciOiJIUzI1NiJ9.e30.abcDEF123_-"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nq0Zz==\n-----END RSA PRIVATE KEY-----"
SLACK = "xoxb-" + "1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_HOOK = "T0ABCDEFG/B0ABCDEFG/" + "XyZ123aBc456dEf789gHi012"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
STRIPE_RESTRICTED = "rk_live_" + "9Qm2Lx7Vb4Nc1Zs8Kd5Tw3Hy"
GOOGLE = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
NPM = "npm_" + "Q7r8S9t0U1v2W3x4Y5z6A7b8C9d0E1f2G3h4"
JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiJxN3Z3In0." + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
PASSWORD = "Tr0ub4dor-3qX"
BASIC = base64.b64encode(b"aladdin:" + b"0pen-Sesame9").decode()


def mark(kind: str, secret: str) -> str:
    return f"[secret:{kind}:{hashlib.sha256(secret.encode('utf-8')).hexdigest()[:8]}]"


#: (text, what it is stored as): every kind, alone and in the places agents put them.
CAUGHT = [
    (f"export AWS_ACCESS_KEY_ID={AWS}", f"export AWS_ACCESS_KEY_ID={mark('aws-access-key', AWS)}"),
    (
        f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
        f"export AWS_SECRET_ACCESS_KEY={mark('aws-secret-key', AWS_SECRET)}",
    ),
    (f"aws_secret_access_key = {AWS_SECRET}", f"aws_secret_access_key = {mark('aws-secret-key', AWS_SECRET)}"),
    (f'{{"SecretAccessKey": "{AWS_SECRET}"}}', f'{{"SecretAccessKey": "{mark("aws-secret-key", AWS_SECRET)}"}}'),
    (
        f"aws configure set aws_secret_access_key {AWS_SECRET}",
        f"aws configure set aws_secret_access_key {mark('aws-secret-key', AWS_SECRET)}",
    ),
    (
        f"token {GITHUB} and {GITHUB_PAT}.",
        f"token {mark('github-token', GITHUB)} and {mark('github-token', GITHUB_PAT)}.",
    ),
    (f"GITLAB={GITLAB}", f"GITLAB={mark('gitlab-token', GITLAB)}"),
    (f"OPENAI_API_KEY={OPENAI}", f"OPENAI_API_KEY={mark('openai-key', OPENAI)}"),
    (f"OPENROUTER_API_KEY={OPENROUTER}", f"OPENROUTER_API_KEY={mark('openai-key', OPENROUTER)}"),
    (f"key: {ANTHROPIC}", f"key: {mark('anthropic-key', ANTHROPIC)}"),
    (
        f"curl -H 'Authorization: Bearer {BEARER}' x",
        f"curl -H 'Authorization: Bearer {mark('bearer-token', BEARER)}' x",
    ),
    (f'{{"authorization": "bearer {BEARER}"}}', f'{{"authorization": "bearer {mark("bearer-token", BEARER)}"}}'),
    (f"key:\n{PEM}\nend", f"key:\n{mark('private-key', PEM)}\nend"),
    (f"SLACK_BOT_TOKEN={SLACK}", f"SLACK_BOT_TOKEN={mark('slack-token', SLACK)}"),
    (
        f"POST https://hooks.slack.com/services/{SLACK_HOOK}",
        f"POST https://hooks.slack.com/services/{mark('slack-webhook', SLACK_HOOK)}",
    ),
    (
        f"stripe.api_key = '{STRIPE}' or '{STRIPE_RESTRICTED}'",
        f"stripe.api_key = '{mark('stripe-key', STRIPE)}' or '{mark('stripe-key', STRIPE_RESTRICTED)}'",
    ),
    (f"?key={GOOGLE}&q=1", f"?key={mark('google-api-key', GOOGLE)}&q=1"),
    (f"//registry.npmjs.org/:_authToken={NPM}", f"//registry.npmjs.org/:_authToken={mark('npm-token', NPM)}"),
    (f"session cookie {JWT} expired", f"session cookie {mark('jwt', JWT)} expired"),
    (
        f"DATABASE_URL=postgres://admin:{PASSWORD}@db.internal:5432/app",
        f"DATABASE_URL=postgres://admin:{mark('url-password', PASSWORD)}@db.internal:5432/app",
    ),
    (f"redis://:{PASSWORD}@cache:6379", f"redis://:{mark('url-password', PASSWORD)}@cache:6379"),
    (
        f"git clone https://oauth2:{GITLAB}@gitlab.com/x.git",
        f"git clone https://oauth2:{mark('gitlab-token', GITLAB)}@gitlab.com/x.git",
    ),
    (f"-H 'Authorization: Basic {BASIC}'", f"-H 'Authorization: Basic {mark('basic-auth', BASIC)}'"),
    # JSON-escaped, as a recorded Write of an .mcp.json holds it, and a key after an escaped newline.
    (
        'Write {"file_path": ".mcp.json", "content": "{\\n  \\"headers\\": {\\"Authorization\\": '
        f'\\"Bearer {BEARER}\\"}}\\n}}"}}',
        'Write {"file_path": ".mcp.json", "content": "{\\n  \\"headers\\": {\\"Authorization\\": '
        f'\\"Bearer {mark("bearer-token", BEARER)}\\"}}\\n}}"}}',
    ),
    (
        f'{{\\"aws_secret_access_key\\": \\"{AWS_SECRET}\\"}}',
        f'{{\\"aws_secret_access_key\\": \\"{mark("aws-secret-key", AWS_SECRET)}\\"}}',
    ),
    (f'echo "id\\n{AWS}\\tdone"', f'echo "id\\n{mark("aws-access-key", AWS)}\\tdone"'),
]


@pytest.mark.parametrize(("text", "expected"), CAUGHT)
def test_each_kind_of_credential_is_replaced_by_its_mark(text: str, expected: str) -> None:
    redacted = redact(text)
    assert redacted.text == expected
    assert redacted.secrets == expected.count("[secret:")


@pytest.mark.parametrize(("text", "expected"), CAUGHT)
def test_redaction_is_deterministic_and_leaves_its_marks_alone(text: str, expected: str) -> None:
    """A re-ingest must store the same bytes (its hash finds the duplicate), and a mark is no credential."""
    assert redact(text) == redact(text)
    again = redact(expected)
    assert (again.text, again.secrets) == (expected, 0)


#: Prose and code that look like a credential at a glance and must be stored as written.
NEAR_MISSES = [
    "We ask for a task-specific risk-assessment and the bearer of bad news; sk-learn is fine. ghp_short",
    "sk-learning-rate-experiments and sk-feature-flag-rollout-plan-v2 are branch names",
    "xoxp-tokens-are-user-scoped; xoxb-style bots",
    "the publishable pk_live_" + "4eC39HqLyjWDarjtT1zdp7dc belongs in the page",
    "npm_config_registry is read by npm; AIza alone is a prefix",
    "Authorization: Basic authentication is weak; Authorization: Basic realm",
    "Authorization: Bearer YOUR_TOKEN_HERE, or Authorization: Bearer $TOKEN",
    "http://localhost:8000 and https://user@example.com and git@github.com:org/repo.git",
    "postgres://app:${DB_PASSWORD}@db/app and mysql://root:<password>@localhost",
    "the aws_secret_access_key lives in ~/.aws/credentials, never in the repo",
    "x" + AWS,
    "a token's header starts eyJ, as in eyJhbGciOiJIUzI1NiJ9 alone",
    "<privateer> and <private/> are not the tag",
]


@pytest.mark.parametrize("prose", NEAR_MISSES)
def test_near_misses_stay_prose(prose: str) -> None:
    redacted = redact(prose)
    assert (redacted.text, redacted.secrets, redacted.private_spans) == (prose, 0, 0)


def test_private_spans_with_any_case_or_attributes() -> None:
    private = redact(
        'a <private>my home address</private> b <PRIVATE>x\ny</Private> c <private reason="pii">z</private > '
        "d <private>rest"
    )
    assert (private.text, private.private_spans) == ("a [private] b [private] c [private] d [private]", 4)
    assert redact(f"<private>{AWS}</private>", secrets=False).text == "[private]"
    assert redact(AWS, secrets=False).text == AWS


def test_metadata_strings_and_keys_are_redacted_at_any_depth() -> None:
    metadata = {
        "source": "claude-code",
        "blocks": [{"type": "document", "source": {"data": f"key={AWS}", "pages": (1, {"n": STRIPE})}}],
        f"<private>{PASSWORD}</private>": True,
        GITHUB: 3,
    }
    stored, found = redact_json(metadata)
    assert stored == {
        "source": "claude-code",
        "blocks": [
            {
                "type": "document",
                "source": {
                    "data": f"key={mark('aws-access-key', AWS)}",
                    "pages": [1, {"n": mark("stripe-key", STRIPE)}],
                },
            }
        ],
        "[private]": True,
        mark("github-token", GITHUB): 3,
    }
    assert found == 3
    assert metadata["blocks"][0]["source"]["data"] == f"key={AWS}", "the caller's value is not changed"
    clean = {"source": "gemini-cli", "tokens": {"input": 12}, "parts": ["plain", None, 1.5]}
    assert redact_json(clean) == (clean, 0) and redact_json(clean)[0] is clean
    assert redact_json({"note": f"<private>x</private> {AWS}"}, secrets=False) == ({"note": f"[private] {AWS}"}, 0)


def test_a_project_naming_a_credential_or_a_private_span_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A project is a key reads filter by: refused whole rather than stored changed, before anything is written."""
    plain = [NewMessage(role=Role.user, content="x")]
    with pytest.raises(InvalidInput, match="^project must not hold a credential or a <private> span$"):
        prepare_append("p", "t", plain, f"billing-{GITHUB}")
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"d": deep}
    with pytest.raises(InvalidInput, match="^message 0 metadata is nested too deeply$"):
        prepare_append("p", "t", [NewMessage(role=Role.user, content="x", metadata=deep)], None)
    monkeypatch.setenv("PALIMPSEST_REDACT", "off")
    assert prepare_append("p", "t", plain, f"billing-{GITHUB}")[0].content == "x"
    with pytest.raises(InvalidInput, match="project must not hold"):
        prepare_append("p", "t", plain, "<private>acme</private>")


@pytest.fixture
def server(store_url: str) -> FastMCP:
    return build_server(make_settings(store_url))


async def _messages(store_url: str, thread_id: str, partition: str | None = None) -> list[Message]:
    """A thread's stored messages, once doctor finds the store sound (the hashes hold over the stored bytes)."""
    store = open_store(store_url, Neo4jCredentials())
    await store.initialize()
    try:
        assert await check_store(store) == []
        return await store.get_messages(partition, thread_id)
    finally:
        await store.close()


async def _stored(store_url: str, thread_id: str) -> list[str]:
    return [message.content for message in await _messages(store_url, thread_id)]


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


# -- everything stored: metadata, escaped text, projects, feeds ---------------------------------

#: A bearer token of no issuer's shape: only the header it is sent in tells it is one.
OPAQUE = "opaque-" + "Q2x9Vb7Mn4Lk1Jh8"
DIARY = "my wifi is " + "hunter2Xq"
#: What an agent writes into ``.mcp.json``: stored as a tool call, so JSON-escaped twice over.
MCP_CONFIG = json.dumps(
    {"mcpServers": {"billing": {"url": "https://mcp.example/x", "headers": {"Authorization": f"Bearer {BEARER}"}}}},
    indent=2,
)
#: Every credential the tests below hand in, none of which may be kept anywhere.
LEAKS = [AWS, AWS_SECRET, GITHUB, SLACK, GOOGLE, NPM, JWT, PASSWORD, BEARER, OPAQUE, DIARY]


def leaky_messages() -> list[dict[str, Any]]:
    """Wordy turns (so the thread compacts), one a recorded Write, one with credentials deep in its metadata."""
    messages = [turn(i) for i in range(10)]
    messages[1]["content"] = "Write " + json.dumps({"file_path": ".mcp.json", "content": MCP_CONFIG})
    messages[2]["metadata"] = {
        "request": {"headers": {"Authorization": f"Bearer {OPAQUE}"}, "env": {"AWS_SECRET_ACCESS_KEY": AWS_SECRET}},
        "display_content": f"deploy with {GITHUB} <private>{DIARY}</private>",
        f"key {AWS}": [[[{"url": f"postgres://app:{PASSWORD}@db/app"}]]],
        "record": {"type": "future", "payload": {"slack": SLACK, "google": GOOGLE, "npm": NPM, "jwt": JWT}},
    }
    return messages


def sqlite_files(store_url: str) -> list[Path]:
    """The SQLite database and the files named after it beside it (WAL, shared memory); none for Neo4j."""
    if not store_url.startswith("sqlite:///"):
        return []
    database = Path(store_url.removeprefix("sqlite:///"))
    return sorted(database.parent.glob(database.name + "*"))


def index_terms(database: Path) -> set[str]:
    """Every term of the full-text indexes, which hold them stemmed and prefix-compressed: a grep cannot see them."""
    terms: set[str] = set()
    with closing(sqlite3.connect(database)) as raw:
        for table in ("messages_fts", "summaries_fts", "facts_fts"):
            raw.execute(f"CREATE VIRTUAL TABLE temp.{table}_terms USING fts5vocab(main, {table}, row)")
            terms.update(term for (term,) in raw.execute(f"SELECT term FROM temp.{table}_terms"))
    return terms


def assert_kept_nowhere(store_url: str, *outputs: str | bytes) -> None:
    """No credential of ``LEAKS``, nor any run of 8 of its letters or digits, in ``outputs`` or the store's files.

    Case is ignored: the full-text index keeps words lower-cased.
    """
    files = sqlite_files(store_url)
    assert files or not store_url.startswith("sqlite"), "the SQLite store's files were not found"
    blobs = [item.encode() if isinstance(item, str) else item for item in outputs]
    haystack = b"\x00".join([*blobs, *(path.read_bytes() for path in files)]).lower()
    terms = [term for term in (index_terms(files[0]) if files else set()) if len(term) >= 8]
    for secret in LEAKS:
        for piece in [secret.lower(), *(run.lower() for run in re.findall(r"[A-Za-z0-9]{8,}", secret))]:
            assert piece.encode() not in haystack, f"{piece!r}, of a credential, was kept"
            assert not [term for term in terms if term in piece], f"the index holds a term of {piece!r}"


def exported(store_url: str, folder: Path) -> bytes:
    """Everything the store holds, as ``palimpsest export`` writes it (uncompressed)."""
    folder.mkdir(exist_ok=True)
    archive = folder / "export.jsonl.gz"
    result = CliRunner().invoke(app, ["export", str(archive), "--store", store_url], env=CLEAN_ENV)
    assert result.exit_code == 0, result.output
    return gzip.decompress(archive.read_bytes())


async def test_nothing_stored_through_the_tool_holds_a_credential(
    server: FastMCP, store_url: str, tmp_path: Path
) -> None:
    messages = leaky_messages()
    async with client(server) as session:
        for project in (f"billing-{GITHUB}", "<private>acme</private>"):
            with pytest.raises(ToolError, match="project must not hold a credential or a <private> span"):
                await call(session, "append_messages", thread_id="t-p", project=project, messages=messages[:1])
        assert (await call(session, "memory_stats"))["messages"] == 0, "a refused append wrote nothing"
        first = await call(session, "append_messages", thread_id="t-s", project="billing-api", messages=messages)
        again = await call(session, "append_messages", thread_id="t-s", project="billing-api", messages=messages)
        assert (first["appended"], again["appended"], again["duplicates"]) == (10, 0, 10)
        stats = await call(session, "memory_stats")
        assert stats["secrets_redacted"] == 10
        compacted = await call(session, "compact_thread", thread_id="t-s")
        expanded = [await call(session, "expand_summary", summary_id=top) for top in compacted["summary_ids"]]
        hits = await call(session, "grep_memories", query="deploy with", mode="text")
        assert_kept_nowhere(store_url, json.dumps(expanded), json.dumps(hits))  # the WAL still holds the writes
    assert any(item["source_id"] == "m2" for page in expanded for item in page["items"])
    stored = await _messages(store_url, "t-s")
    assert stored[1].content == "Write " + json.dumps(
        {"file_path": ".mcp.json", "content": MCP_CONFIG.replace(BEARER, mark("bearer-token", BEARER))}
    )
    assert stored[2].metadata == {
        "request": {
            "headers": {"Authorization": f"Bearer {mark('bearer-token', OPAQUE)}"},
            "env": {"AWS_SECRET_ACCESS_KEY": mark("aws-secret-key", AWS_SECRET)},
        },
        "display_content": f"deploy with {mark('github-token', GITHUB)} [private]",
        f"key {mark('aws-access-key', AWS)}": [[[{"url": f"postgres://app:{mark('url-password', PASSWORD)}@db/app"}]]],
        "record": {
            "type": "future",
            "payload": {
                "slack": mark("slack-token", SLACK),
                "google": mark("google-api-key", GOOGLE),
                "npm": mark("npm-token", NPM),
                "jwt": mark("jwt", JWT),
            },
        },
    }
    archive = await asyncio.to_thread(exported, store_url, tmp_path / "out")  # the CLI runs its own loop
    assert mark("npm-token", NPM).encode() in archive and b"billing-api" in archive
    assert_kept_nowhere(store_url, archive)


def claude_transcript() -> list[dict[str, Any]]:
    """A user line with a text document holding keys, and the assistant writing an ``.mcp.json``."""
    document = {
        "type": "document",
        "title": "prod.env",
        "source": {"type": "text", "media_type": "text/plain", "data": f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n"},
    }
    write = {"file_path": ".mcp.json", "content": MCP_CONFIG}
    return [
        entry("user", "u-1", [{"type": "text", "text": "Deploy with these."}, document], 0),
        entry(
            "assistant",
            "a-1",
            [{"type": "tool_use", "id": "toolu_01", "name": "Write", "input": write}],
            1,
            parent="u-1",
        ),
        entry(
            "user",
            "u-2",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": f"wrote {GOOGLE} <private>{DIARY}</private>",
                }
            ],
            2,
            parent="a-1",
        ),
    ]


def test_ingest_of_a_claude_transcript_keeps_no_credential(store_url: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "session.jsonl", [*claude_transcript()])
    for expected in (3, 0):  # ingested again: the same stored bytes, so nothing added
        result = run_cli("ingest", path, "--store", store_url, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["appended"] == expected
    user, call_, answer = asyncio.run(_messages(store_url, CLAUDE_SESSION, "claude"))
    assert user.content == "Deploy with these.\n\n[document: prod.env]"
    assert (
        user.metadata["blocks"][0]["source"]["data"] == f"AWS_SECRET_ACCESS_KEY={mark('aws-secret-key', AWS_SECRET)}\n"
    )
    assert mark("bearer-token", BEARER) in call_.content and BEARER not in call_.content
    assert answer.content == f"wrote {mark('google-api-key', GOOGLE)} [private]"
    assert_kept_nowhere(store_url, exported(store_url, tmp_path / "out"))


def test_the_gemini_hook_keeps_no_credential_of_a_recording(store_url: str, tmp_path: Path) -> None:
    """What Gemini showed the user (``displayContent``) and a record of a kind it does not know are kept in metadata."""
    recording = tmp_path / ".gemini" / "tmp" / "9f2b6c1e" / "chats" / "session-2026-12-01T09-00-5b0c7a9e.jsonl"
    append_lines(
        recording,
        [
            gemini_metadata_line(),
            {
                "id": "u-1",
                "timestamp": "2026-12-01T09:00:00.412Z",
                "type": "user",
                "content": [{"text": "Use the token in @.env"}],
                "displayContent": [{"text": f"Use the token {NPM} <private>{DIARY}</private>"}],
            },
            {
                "id": "x-1",
                "timestamp": "2026-12-01T09:00:00.500Z",
                "type": "audit",
                "headers": {"Authorization": f"Bearer {OPAQUE}"},
            },
            {
                "id": "g-1",
                "timestamp": "2026-12-01T09:00:02.000Z",
                "type": "gemini",
                "content": "Done.",
                "thoughts": [],
            },
        ],
    )
    payload = {
        "session_id": GEMINI_SESSION,
        "transcript_path": str(recording),
        "cwd": GEMINI_CWD,
        "hook_event_name": "AfterAgent",
        "timestamp": "2026-12-01T09:00:02.100Z",
        "prompt": "Use the token in @.env",
        "prompt_response": "Done.",
        "stop_hook_active": False,
    }
    for _replay in range(2):
        silent(hook("gemini", payload, store_url))
    user, audit, answer = stored(store_url, "gemini", GEMINI_SESSION)
    assert user.metadata["display_content"] == f"Use the token {mark('npm-token', NPM)} [private]"
    assert audit.metadata["record"]["headers"] == {"Authorization": f"Bearer {mark('bearer-token', OPAQUE)}"}
    assert answer.content == "Done."
    assert_kept_nowhere(store_url, exported(store_url, tmp_path / "out"))
