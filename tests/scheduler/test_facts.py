"""The fact layer: extraction rules, supersession, evolution, and the ``kg`` tool and command.

The rules are plain functions, tested on realistic assistant text (what is kept and,
as importantly, what is skipped). Extraction, supersession and evolution run against
both stores; the ``kg`` tool goes through a real in-memory ``fastmcp.Client``, and
``palimpsest kg`` through typer's runner on a SQLite file.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.models import Message, NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.facts import (
    KIND_RULES,
    MAX_SENTENCE_CHARS,
    MIN_FACT_CHARS,
    ExtractedFact,
    candidate_lines,
    evolve_facts,
    extract_facts,
    extract_from_text,
    facts_in_message,
    kg_command,
)
from palimpsest.server.cli.main import app
from palimpsest.server.mcp.app import build_server
from palimpsest.server.settings import Settings

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
JWT = "The API uses JWT bearer tokens for authentication, signed with RS256."
COOKIES = "We switched auth from JWT to session cookies with SameSite=strict."

ANSWER = """Sure! I looked into the authentication flow and fixed it.

## The API uses JWT bearer tokens now

Here is what I changed in the auth module:

- The API uses JWT bearer tokens for authentication, signed with RS256.
- **Decision:** refresh tokens rotate on every use and expire after 14 days.
* I migrated the user table to PostgreSQL 16 with two Alembic revisions.
> We configured Redis as the cache backend with a five minute TTL.

```python
# The API uses this helper because Redis is configured for caching here.
client = redis.Redis(host="localhost", port=6379)
```

~~~
The worker depends on Celery 5 and a RabbitMQ broker for retries.
~~~

    settings.CACHE_BACKEND = "redis"  # configured Redis as the cache backend

| service | uses |
| api     | uses JWT bearer tokens everywhere |

Short: uses JWT.
Tests pass now. I recommend pinning FastAPI below 0.120 until the Starlette bump lands.
Would you like me to switch the background queue to Celery as well?
I'll configure Sentry for error tracking in the next step as planned.
Let me know if you want me to also update the docs for the auth changes.
"""


def test_extraction_keeps_technical_sentences_and_skips_everything_else() -> None:
    assert extract_from_text(ANSWER) == [
        ExtractedFact("The API uses JWT bearer tokens for authentication, signed with RS256.", "technology", "auth"),
        ExtractedFact("Decision: refresh tokens rotate on every use and expire after 14 days.", "decision", "auth"),
        ExtractedFact("I migrated the user table to PostgreSQL 16 with two Alembic revisions.", "change", "database"),
        ExtractedFact("We configured Redis as the cache backend with a five minute TTL.", "configuration", "cache"),
        ExtractedFact(
            "I recommend pinning FastAPI below 0.120 until the Starlette bump lands.", "recommendation", "api"
        ),
    ]


def test_candidate_lines_drop_code_headings_tables_and_markers() -> None:
    lines = list(candidate_lines(ANSWER))
    assert not any("redis.Redis" in line or "CACHE_BACKEND" in line or "RabbitMQ" in line for line in lines)
    assert not any(line.startswith(("#", "|", "The API uses JWT bearer tokens now")) for line in lines)
    assert "Decision: refresh tokens rotate on every use and expire after 14 days." in lines
    assert "We configured Redis as the cache backend with a five minute TTL." in lines
    nested = "1. First step\n   - The service depends on httpx for its outbound calls.\n\tindented = code_uses(x)"
    assert list(candidate_lines(nested)) == ["First step", "The service depends on httpx for its outbound calls."]
    unclosed = "Intro line that is long enough.\n```\nThe API uses JWT bearer tokens inside a fence.\n"
    assert list(candidate_lines(unclosed)) == ["Intro line that is long enough."]
    setext = "We switched the API to session cookies\n=====\nThe API uses JWT for auth.\n\n- a list item\n---"
    assert list(candidate_lines(setext)) == ["The API uses JWT for auth.", "a list item"]


@pytest.mark.parametrize(
    ("sentence", "kind", "subject"),
    [
        ("We decided to keep the monorepo layout for the services.", "decision", "general"),
        ("We switched from JWT to session cookies for the web app.", "change", "auth"),
        ("I refactored the ORM layer so queries go through one session.", "change", "database"),
        ("The checkout flow now uses Stripe webhooks for payment events.", "technology", "api"),
        ("You should avoid running migrations inside the request path.", "recommendation", "database"),
        ("The CI pipeline is configured to run pytest with coverage on every push.", "configuration", "testing"),
        ("The ingest service relies on `orjson` for parsing large payloads.", "technology", "orjson"),
        ("The rendering layer is built with PixiJS and a custom scene graph.", "technology", "pixijs"),
        ("Everything here implements the visitor pattern over the syntax tree.", "technology", "general"),
        ("The author of this module implemented lazy loading of the plugins.", "technology", "general"),
    ],
)
def test_kind_and_subject_rules(sentence: str, kind: str, subject: str) -> None:
    assert extract_from_text(sentence) == [ExtractedFact(sentence, kind, subject)]


@pytest.mark.parametrize(
    "sentence",
    [
        "Sure, the API uses JWT bearer tokens for authentication here.",
        "Let me know whether the API should keep using JWT for authentication.",
        "Does the API still use JWT bearer tokens for authentication?",
        "The API uses JWT.",
        "These are the services and the databases that the team maintains today.",
        "Perfect!",
        "x " * 250 + "uses JWT",
        # What the agent thinks it has to do next (a Cursor transcript of blind13, 564d6a7a), in plain or typographic
        # apostrophes.
        "I need to match the format `= <type> <operation>(` because the HLO dump writes the type first.",
        "I should just have the user run this in their JAX container since they don’t have JAX at the host level.",
    ],
)
def test_chat_questions_short_long_and_indicator_free_sentences_are_skipped(sentence: str) -> None:
    assert extract_from_text(sentence) == []


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([JWT, "```", "    indented uses code", "## The API uses JWT", "- " + JWT, "", "?"]),
            st.text(max_size=120),
        ),
        max_size=12,
    )
)
def test_extraction_invariants_on_any_text(lines: list[str]) -> None:
    for fact in extract_from_text("\n".join(lines)):
        assert MIN_FACT_CHARS <= len(fact.text) <= MAX_SENTENCE_CHARS
        assert fact.kind in {kind for kind, _ in KIND_RULES}
        assert fact.subject and fact.subject == fact.subject.lower()
        assert not fact.text.endswith(("?", ":")) and not fact.text.startswith("#")


def _message(role: Role, content: str) -> Message:
    return Message(
        id="msg_1", source_id="m1", thread_id="t", partition="p", seq=0, role=role, content=content,
        sha256="0" * 64, tokens=1, created_at=T0,
    )  # fmt: skip


def test_only_assistant_messages_yield_facts() -> None:
    text = "The API uses JWT bearer tokens for authentication, signed with RS256."
    assert facts_in_message(_message(Role.user, text)) == []
    assert facts_in_message(_message(Role.tool, text)) == []
    [fact] = facts_in_message(_message(Role.assistant, text))
    assert (fact.partition, fact.source_message_ids, fact.kind, fact.subject) == ("p", ["msg_1"], "technology", "auth")


# -- extraction and supersession on both stores ---------------------------------------


def turn(source_id: str, content: str, minutes: int, role: Role = Role.assistant) -> NewMessage:
    return NewMessage(role=role, content=content, message_id=source_id, created_at=T0 + timedelta(minutes=minutes))


async def test_extraction_is_incremental_and_a_change_supersedes(store: MemoryStore) -> None:
    await store.append_messages(
        "p",
        "t1",
        [
            turn("u0", "How does the API authenticate callers today, and what does it use?", 0, Role.user),
            turn("a1", f"{JWT}\nThe database layer uses SQLAlchemy 2 with asyncpg underneath.", 1),
        ],
        project="api",
    )
    assert await extract_facts(store, "p", "t1") == 2
    assert (await store.fact_layer("p", "t1")).extracted_seq == 1
    assert await extract_facts(store, "p", "t1") == 0

    await store.append_messages("p", "t1", [turn("a2", f"Done.\n{COOKIES}", 5)])
    assert await extract_facts(store, "p", "t1", batch=1) == 1
    current = {fact.text: fact for fact in await store.list_facts("p")}
    assert set(current) == {COOKIES, "The database layer uses SQLAlchemy 2 with asyncpg underneath."}
    [old] = [fact for fact in await store.list_facts("p", current_only=False) if fact.text == JWT]
    assert (old.valid_until, old.superseded_by) == (T0 + timedelta(minutes=5), current[COOKIES].id)
    assert current[COOKIES].kind == "change" and current[COOKIES].subject == "auth"
    assert (await store.fact_layer("p", "t1")).extracted_seq == 2


def shell(source_id: str, command: str, minutes: int) -> NewMessage:
    """A shell call as the stores keep it (Claude Code's ``Bash``)."""
    body = json.dumps({"command": command})
    meta = {"kind": "tool_use", "tool_name": "Bash"}
    return NewMessage(role=Role.assistant, content=f"Bash {body}", message_id=source_id, tool_call_id=source_id,
                      metadata=meta, created_at=T0 + timedelta(minutes=minutes))  # fmt: skip


def shell_result(call: str, output: str, minutes: int) -> NewMessage:
    return NewMessage(role=Role.tool, content=output, message_id=f"{call}:result", tool_call_id=call,
                      metadata={"kind": "tool_result"}, created_at=T0 + timedelta(minutes=minutes))  # fmt: skip


async def test_a_call_still_unanswered_waits_once_and_is_then_read_past(store: MemoryStore) -> None:
    # A maintenance pass while a long command still runs stops before it; the next pass, finding it first and still
    # unanswered, reads on past it: the commands and prose after it are kept, not dropped with it.
    await store.append_messages(
        "p",
        "t1",
        [
            turn("u0", "Release 0.3.0", 0, Role.user),
            shell("c1", "rm CHANGELOG.old", 1),
            shell_result("c1", "", 1),
            shell("c2", "npm run e2e", 2),
            shell("c3", "git tag v0.3.0", 3),
            shell_result("c3", "", 3),
            turn("a4", "The release script uses semantic-release 24 with the npm plugin.", 4),
        ],
    )
    assert await extract_facts(store, "p", "t1") == 1  # up to the unanswered call
    assert await extract_facts(store, "p", "t1") == 2  # then past it
    texts = {fact.text for fact in await store.list_facts("p")}
    assert texts == {
        "Deleted CHANGELOG.old",
        "Ran git tag v0.3.0",
        "The release script uses semantic-release 24 with the npm plugin.",
    }


async def test_one_pass_reads_a_long_session_though_batches_end_between_a_call_and_its_result(
    store: MemoryStore,
) -> None:
    # A long Claude Code session, read three messages at a time: batches end on a call whose result opens the
    # next one. One maintenance pass still reads it all, each call with its result.
    await store.append_messages(
        "p",
        "t1",
        [
            turn("u0", "Release 0.3.0", 0, Role.user),
            turn("a0", "Cutting the release.", 0),
            shell("c1", "rm CHANGELOG.old", 1),
            shell_result("c1", "", 1),
            shell("c2", "git tag v0.3.0", 2),
            shell_result("c2", "", 2),
            turn("a3", "The release script uses semantic-release 24 with the npm plugin.", 3),
            shell("c4", "npm publish", 4),
            shell_result("c4", "+ pkg@0.3.0", 4),
            turn("a5", "Published 0.3.0 to npm.", 5),
        ],
    )
    assert await extract_facts(store, "p", "t1", batch=3) == 4
    assert (await store.fact_layer("p", "t1")).extracted_seq == 9
    texts = {fact.text for fact in await store.list_facts("p")}
    assert "Deleted CHANGELOG.old" in texts and "Ran git tag v0.3.0" in texts
    assert "The release script uses semantic-release 24 with the npm plugin." in texts


async def test_a_call_near_the_end_still_waits_for_its_result_when_a_pass_reaches_it_after_a_full_batch(
    store: MemoryStore,
) -> None:
    await store.append_messages(
        "p",
        "t1",
        [
            turn("u0", "Release 0.3.0", 0, Role.user),
            shell("c1", "rm CHANGELOG.old", 1),
            shell_result("c1", "", 1),
            shell("c2", "git tag v0.3.0", 2),
        ],
    )
    assert await extract_facts(store, "p", "t1", batch=3) == 1
    assert (await store.fact_layer("p", "t1")).extracted_seq == 2  # stopped before c2
    await store.append_messages("p", "t1", [shell_result("c2", "", 3)])
    assert await extract_facts(store, "p", "t1", batch=3) == 1
    assert {fact.text for fact in await store.list_facts("p")} == {"Deleted CHANGELOG.old", "Ran git tag v0.3.0"}


async def test_an_older_fact_ingested_late_lands_superseded(store: MemoryStore) -> None:
    await store.append_messages("p", "new", [turn("a", "The API uses OAuth2 device flow for authentication now.", 60)])
    await store.append_messages("p", "old", [turn("a", JWT, 1)])
    await extract_facts(store, "p", "new")
    await extract_facts(store, "p", "old")
    [current] = await store.list_facts("p")
    assert current.thread_id == "new"
    [late] = await store.list_facts("p", thread_id="old", current_only=False)
    assert (late.text, late.superseded_by, late.valid_until) == (JWT, current.id, current.created_at)


async def test_supersession_needs_the_same_project_subject_and_kind(store: MemoryStore) -> None:
    await store.append_messages("p", "api", [turn("a", JWT, 1)], project="api")
    await store.append_messages("p", "web", [turn("a", COOKIES, 2)], project="web")
    await store.append_messages(
        "p",
        "more",
        [
            turn("a", "The gateway is configured to forward the auth header unchanged.", 3),
            turn("b", "The API uses JWT access tokens and refresh tokens stored in Redis.", 4),
        ],
        project="api",
    )
    for thread_id in ("api", "web", "more"):
        await extract_facts(store, "p", thread_id)
    # Other project: no supersession. Other kind (configuration vs technology): none either.
    # Same project, subject and kind: the newer technology fact replaces the older one.
    current = {(fact.project, fact.text) for fact in await store.list_facts("p")}
    assert current == {
        ("web", COOKIES),
        ("api", "The gateway is configured to forward the auth header unchanged."),
        ("api", "The API uses JWT access tokens and refresh tokens stored in Redis."),
    }
    stats = await store.fact_stats("p")
    assert (stats.current, stats.superseded, [t.subject for t in stats.topics]) == (3, 1, ["auth"])


async def test_between_facts_of_one_time_the_later_message_wins(store: MemoryStore) -> None:
    same_time = [
        turn(source, f"The API uses {name} tokens for authentication now.", 0)
        for source, name in (("a1", "JWT"), ("a2", "Paseto"), ("a3", "opaque"))
    ]
    await store.append_messages("p", "t1", same_time)
    assert await extract_facts(store, "p", "t1") == 3
    everything = {fact.text.split()[3]: fact for fact in await store.list_facts("p", current_only=False)}
    jwt, paseto, opaque = everything["JWT"], everything["Paseto"], everything["opaque"]
    # A chain in message order: each fact replaced by the next message's.
    assert (jwt.superseded_by, paseto.superseded_by, opaque.superseded_by) == (paseto.id, opaque.id, None)
    assert (jwt.valid_until, paseto.valid_until, opaque.valid_until) == (T0, T0, None)


async def test_facts_of_one_message_never_supersede_each_other(store: MemoryStore) -> None:
    text = f"{JWT}\nThe admin console uses SAML single sign-on for authentication."
    await store.append_messages("p", "t1", [turn("a", text, 1)])
    assert await extract_facts(store, "p", "t1") == 2
    assert len(await store.list_facts("p")) == 2


async def test_evolve_reads_only_threads_whose_layer_is_on(store: MemoryStore) -> None:
    await store.append_messages("p", "on", [turn("a", JWT, 1)])
    await store.append_messages("p", "off", [turn("a", "The queue uses Celery with a Redis broker for retries.", 2)])
    await store.append_messages("q", "elsewhere", [turn("a", COOKIES, 3)])
    await store.set_fact_layer("p", "off", False)  # on by default: only "off" is turned off
    paused: list[int] = []

    async def pause() -> None:
        paused.append(1)

    assert await evolve_facts(store, partition="p", pause=pause) == 1
    assert paused == [1]
    assert [fact.thread_id for fact in await store.list_facts(None)] == ["on"]
    assert await evolve_facts(store) == 1  # every partition; "on" has nothing new
    assert sorted(fact.thread_id or "" for fact in await store.list_facts(None)) == ["elsewhere", "on"]
    assert await evolve_facts(store) == 0


async def test_kg_command_domain_errors(store: MemoryStore) -> None:
    await store.append_messages("p", "t1", [turn("a", JWT, 1)])
    with pytest.raises(InvalidInput, match="needs a thread_id"):
        await kg_command(store, "p", "on")
    with pytest.raises(InvalidInput, match="unknown kg action"):
        await kg_command(store, "p", "explode", "t1")  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        await kg_command(store, "p", "stats", "missing")
    with pytest.raises(NotFound):
        await kg_command(store, "q", "on", "t1")
    with pytest.raises(InvalidInput):
        await extract_facts(store, "p", "t1", batch=0)
    assert (await store.fact_layer("p", "t1")).enabled is True


# -- the kg tool through MCP, and the kg command ------------------------------------------


def settings_for(store_url: str) -> Settings:
    return Settings(store=store_url, partition=None, scheduler=False, summary_model=None, tokens_file=None)


async def call(session: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert result.structured_content is not None
    return result.structured_content


def client(server: FastMCP) -> Client:
    return Client(server, client_info=mcp_types.Implementation(name="claude-code", version="1.0"))


async def test_kg_tool_status_on_stats_off_clear(store_url: str) -> None:
    server = build_server(settings_for(store_url))
    messages = [
        {"role": "user", "content": "Which auth scheme and database do we use?", "message_id": "u0"},
        {"role": "assistant", "content": f"{JWT}\nThe orders service uses PostgreSQL 16 as its database."},
        {"role": "assistant", "content": f"Sure!\n{COOKIES}", "message_id": "a2"},
    ]
    async with client(server) as session:
        await call(session, "append_messages", thread_id="t1", messages=messages, project="api")
        before = await call(session, "kg", action="status", thread_id="t1")
        on = await call(session, "kg", action="on", thread_id="t1")
        everywhere = await call(session, "kg", action="status")
        stats = await call(session, "kg", action="stats")
        off = await call(session, "kg", action="off", thread_id="t1")
        memory = await call(session, "memory_stats")
        with pytest.raises(ToolError, match="kg on needs a thread_id"):
            await session.call_tool("kg", {"action": "on"})
        with pytest.raises(ToolError, match="unknown thread id 'nope'"):
            await session.call_tool("kg", {"action": "on", "thread_id": "nope"})
        with pytest.raises(ToolError, match="invalid arguments: action"):
            await session.call_tool("kg", {"action": "burn"})
        cleared = await call(session, "kg", action="clear", thread_id="t1")
        after = await call(session, "kg", action="stats", thread_id="t1")
    assert before["layer"] == {"thread_id": "t1", "partition": "claude", "enabled": True, "extracted_seq": -1}
    assert before["stats"]["facts"] == 0
    assert (on["extracted"], on["layer"]["enabled"], on["layer"]["extracted_seq"]) == (3, True, 2)
    assert [(t["subject"], t["current"], t["superseded"]) for t in on["stats"]["topics"]] == [
        ("auth", 1, 1),
        ("database", 1, 0),
    ]
    assert [state["thread_id"] for state in everywhere["threads_on"]] == ["t1"]
    assert (stats["stats"]["facts"], stats["stats"]["by_kind"]) == (3, {"change": 1, "technology": 2})
    assert (off["layer"]["enabled"], off["layer"]["extracted_seq"]) == (False, 2)
    assert memory["facts"] == 3
    assert (cleared["cleared"], cleared["layer"]["extracted_seq"]) == (3, -1)
    assert after["stats"]["facts"] == 0 and after["layer"] is None


async def test_kg_tool_schema(tmp_path: Path) -> None:
    server = build_server(settings_for(f"sqlite:///{tmp_path / 'm.db'}"))
    async with client(server) as session:
        tools = {tool.name: tool for tool in await session.list_tools()}
    kg = tools["kg"]
    assert kg.input_schema["properties"]["action"]["enum"] == ["status", "on", "off", "stats", "clear"]
    assert kg.input_schema["required"] == ["action"]
    assert {"thread_id", "partition"} <= set(kg.input_schema["properties"])
    assert kg.output_schema is not None and {"layer", "stats", "extracted"} <= set(kg.output_schema["properties"])
    assert kg.annotations is not None and kg.annotations.read_only_hint is False
    assert kg.annotations.destructive_hint is True


async def append(url: str, partition: str, thread_id: str, messages: list[NewMessage], **kw: Any) -> None:
    """Append to a store file and close it again (CLI tests run the CLI on the same file)."""
    store = open_store(url)
    await store.initialize()
    try:
        await store.append_messages(partition, thread_id, messages, **kw)
    finally:
        await store.close()


def test_kg_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    asyncio.run(append(url, "default", "s1", [turn("a", f"{JWT}\n{COOKIES}", 1)]))
    runner = CliRunner()
    env = {"PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None}
    on = runner.invoke(app, ["kg", "on", "--thread", "s1", "--store", url, "--json"], env=env)
    assert on.exit_code == 0, on.output
    assert json.loads(on.stdout)["extracted"] == 2
    shown = runner.invoke(app, ["kg", "stats", "--store", url], env=env)
    assert shown.exit_code == 0, shown.output
    assert "2 facts (2 current, 0 superseded)" in shown.stdout
    assert "technology 1" in shown.stdout and "auth" in shown.stdout
    status = runner.invoke(app, ["kg", "status", "--store", url], env=env)
    assert "fact layer on in 1 thread (s1)" in status.stdout
    failed = runner.invoke(app, ["kg", "off", "--store", url], env=env)
    assert failed.exit_code == 1
    assert failed.stderr == "error: kg off needs a thread_id: the fact layer is switched per thread\n"
    cleared = runner.invoke(app, ["kg", "clear", "--thread", "s1", "--store", url], env=env)
    assert "cleared 2 facts of thread s1" in cleared.stdout


@pytest.mark.parametrize("command", ["kg", "recall"])
def test_fact_commands_have_help_ending_with_an_example(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "--store" in result.stdout and "--json" in result.stdout
    examples = [row.strip() for row in result.stdout.splitlines() if row.strip().startswith("Example: palimpsest ")]
    assert len(examples) == 1 and examples[0].startswith(f"Example: palimpsest {command}")
