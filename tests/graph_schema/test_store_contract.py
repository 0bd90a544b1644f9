"""The store contract, first half: threads, messages, search and stats, on every backend.

Every test runs once per backend through the ``store`` fixture (``tests/conftest.py``),
so SQLite and Neo4j are held to one behaviour: what ``graph_schema/store.py`` promises.
The DAG half of the contract lives in ``tests/graph_schema/test_dag_contract.py``.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from palimpsest.graph_schema.errors import InvalidInput, NotFound, StoreUnavailable
from palimpsest.graph_schema.identity import estimate_tokens, message_sha256
from palimpsest.graph_schema.models import MAX_BATCH, MAX_MESSAGE_BYTES, NewMessage, NewSummary, Role
from palimpsest.graph_schema.neo4j import base as neo4j_base
from palimpsest.graph_schema.sqlite import queries as sqlite_queries
from palimpsest.graph_schema.sqlite import store as sqlite_backend
from palimpsest.graph_schema.sqlite.store import SqliteStore
from palimpsest.graph_schema.store import MemoryStore

P = "ide-a"
OTHER = "ide-b"

#: Contents that break naive storage: encodings, NUL, line endings, emptiness, normal forms.
TRICKY_CONTENTS = [
    "héllo wörld, ça va?",
    "日本語のテキストと中文",
    "emoji 😀🎉 and a family 👩‍👩‍👧 and a flag 🇫🇷",
    "nul\x00byte in the middle\x00",
    "windows\r\nline endings\r\nand a lone\rcarriage return\n",
    "tab\tunit separator\x1fbell\x07 escape\x1b[31m",
    "e\u0301 decomposed vs \u00e9 composed, zero width\u200b joiner",
    "مرحبا بالعالم right-to-left",
    '{"json": ["looking", 1, null], "quote": "\\"}',
    "",
    "   ",
    "\n\t \r\n",
]

#: Query strings that are syntax in Lucene or FTS5; a search must treat them as words.
SPECIAL_QUERIES = [
    '"',
    '"unbalanced quote',
    "*",
    "deploy*",
    "*ploy",
    "title:deploy",
    ":",
    "(",
    "deploy (",
    ")",
    "AND",
    "deploy AND",
    "OR NOT",
    "NEAR(deploy",
    "-deploy",
    "--",
    "deploy~",
    "~2",
    "\\",
    "deploy\\",
    "/",
    "/regex.*/",
    "[",
    "[deploy TO",
    "{",
    "^2",
    "deploy^",
    "+",
    "&&",
    "||",
    "!",
    "?",
    "deploy?",
    "x'); DROP TABLE messages;--",
    "",
    "   ",
    "\x00",
]


def msg(content: str, message_id: str | None = None, role: str = "user", **fields: Any) -> NewMessage:
    """A new message; tests name their own ids so duplicates are easy to write."""
    return NewMessage(role=role, content=content, message_id=message_id, **fields)


async def append(store: MemoryStore, thread_id: str, contents: list[str], *, prefix: str = "m", partition: str = P):
    """Append one message per content, ids ``{prefix}0..``; returns the AppendResult."""
    return await store.append_messages(
        partition, thread_id, [msg(content, f"{prefix}{i}") for i, content in enumerate(contents)]
    )


# -- append: ids, seq, idempotence ------------------------------------------------------


async def test_append_creates_thread_with_derived_fields(store: MemoryStore) -> None:
    result = await store.append_messages(
        P,
        "t1",
        [
            msg("fix the login bug", "u1", "user"),
            msg("reading auth.py", "a1", "assistant", tool_call_id="call-1", metadata={"k": [1, "v"]}),
            msg("def login(): ...", "r1", "tool", tool_call_id="call-1"),
        ],
        project="webapp",
    )
    assert (result.thread_id, result.partition, result.appended, result.duplicates) == ("t1", P, 3, 0)
    assert result.uncompacted == 3
    assert len(set(result.message_ids)) == 3
    assert all(mid.startswith("msg_") for mid in result.message_ids)

    thread = await store.get_thread(P, "t1")
    assert (thread.id, thread.partition, thread.project, thread.message_count) == ("t1", P, "webapp", 3)
    assert thread.created_at <= thread.updated_at

    messages = await store.get_messages(P, "t1")
    assert [m.id for m in messages] == result.message_ids
    assert [m.seq for m in messages] == [0, 1, 2]
    assert [m.source_id for m in messages] == ["u1", "a1", "r1"]
    assert [m.role.value for m in messages] == ["user", "assistant", "tool"]
    assert [m.tool_call_id for m in messages] == [None, "call-1", "call-1"]
    assert messages[1].metadata == {"k": [1, "v"]}
    assert all(m.project == "webapp" and m.thread_id == "t1" and m.partition == P for m in messages)
    for m in messages:
        assert m.tokens == estimate_tokens(m.content)
        assert m.sha256 == message_sha256(P, "t1", m.source_id, m.role.value, m.content, m.tool_call_id)
    assert await store.get_message(P, messages[2].id) == messages[2]


@pytest.mark.parametrize(
    "moment",
    [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        datetime(2024, 2, 29, 12, 30, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
)
async def test_timestamps_round_trip_to_the_microsecond(store: MemoryStore, moment: datetime) -> None:
    """Times are stored however each backend likes (Neo4j: epoch microseconds); none may drift."""
    await store.append_messages("ide", "t", [NewMessage(role=Role.user, content="when", created_at=moment)])
    [message] = await store.get_messages("ide", "t")
    assert message.created_at == moment
    assert message.created_at.utcoffset() == timedelta(0)


async def test_seq_has_no_gap_across_appends(store: MemoryStore) -> None:
    sizes = [1, 4, 2, 7]
    expected: list[str] = []
    for batch, size in enumerate(sizes):
        contents = [f"batch {batch} message {i}" for i in range(size)]
        result = await append(store, "t", contents, prefix=f"b{batch}-")
        expected += contents
        assert result.appended == size
        assert result.uncompacted == len(expected)
    messages = await store.get_messages(P, "t")
    assert [m.seq for m in messages] == list(range(len(expected)))
    assert [m.content for m in messages] == expected
    assert (await store.get_thread(P, "t")).message_count == len(expected)
    assert await store.count_uncovered(P, "t") == len(expected)


async def test_get_messages_reads_seq_ranges_in_order(store: MemoryStore) -> None:
    await append(store, "t", [f"line {i}" for i in range(10)])
    assert [m.seq for m in await store.get_messages(P, "t", first_seq=3, last_seq=6)] == [3, 4, 5, 6]
    assert [m.content for m in await store.get_messages(P, "t", first_seq=7)] == ["line 7", "line 8", "line 9"]
    assert [m.seq for m in await store.get_messages(P, "t", first_seq=2, limit=3)] == [2, 3, 4]
    assert await store.get_messages(P, "t", first_seq=10) == []
    # Consecutive pages chain without a gap or an overlap (the NEXT order).
    pages = [await store.get_messages(P, "t", first_seq=start, limit=4) for start in (0, 4, 8)]
    assert [m.seq for page in pages for m in page] == list(range(10))


async def test_reappending_same_message_ids_adds_nothing(store: MemoryStore) -> None:
    first = await append(store, "t", ["one", "two", "three"])
    again = await store.append_messages(
        P, "t", [msg("ONE CHANGED", "m0"), msg("two", "m1"), msg("three", "m2"), msg("four", "m3")]
    )
    assert (again.appended, again.duplicates) == (1, 3)
    assert again.message_ids[:3] == first.message_ids
    messages = await store.get_messages(P, "t")
    assert [m.content for m in messages] == ["one", "two", "three", "four"]
    assert [m.seq for m in messages] == [0, 1, 2, 3]
    assert again.uncompacted == 4


async def test_repeat_inside_one_batch_is_a_duplicate(store: MemoryStore) -> None:
    result = await store.append_messages(P, "t", [msg("a", "x"), msg("b", "y"), msg("a again", "x")])
    assert (result.appended, result.duplicates) == (2, 1)
    assert result.message_ids[0] == result.message_ids[2] != result.message_ids[1]
    messages = await store.get_messages(P, "t")
    assert [(m.seq, m.source_id, m.content) for m in messages] == [(0, "x", "a"), (1, "y", "b")]


async def test_messages_without_id_are_never_duplicates(store: MemoryStore) -> None:
    result = await store.append_messages(P, "t", [msg("same"), msg("same")])
    assert (result.appended, result.duplicates) == (2, 0)
    messages = await store.get_messages(P, "t")
    assert len({m.source_id for m in messages}) == 2
    assert len({m.id for m in messages}) == 2


async def test_created_at_is_kept_in_utc(store: MemoryStore) -> None:
    aware = datetime(2024, 3, 1, 12, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2)))
    naive = datetime(2023, 12, 31, 23, 59, 59, 999999)
    await store.append_messages(P, "t", [msg("a", "a", created_at=aware), msg("b", "b", created_at=naive)])
    first, second = await store.get_messages(P, "t")
    assert first.created_at == aware and first.created_at.utcoffset() == timedelta(0)
    assert second.created_at == naive.replace(tzinfo=UTC)


# -- partitions ----------------------------------------------------------------------------


async def test_each_partition_has_its_own_thread_of_one_id(store: MemoryStore) -> None:
    mine = await append(store, "shared-id", ["owned by a"])
    theirs = await store.append_messages(OTHER, "shared-id", [msg("of the other partition", "m0")])
    assert (theirs.appended, theirs.duplicates) == (1, 0)
    assert theirs.message_ids != mine.message_ids
    assert [m.content for m in await store.get_messages(P, "shared-id")] == ["owned by a"]
    assert [m.content for m in await store.get_messages(OTHER, "shared-id")] == ["of the other partition"]
    assert (await store.get_thread(OTHER, "shared-id")).partition == OTHER
    with pytest.raises(InvalidInput, match="several partitions"):
        await store.get_thread(None, "shared-id")


async def test_reads_from_another_partition_are_not_found(store: MemoryStore) -> None:
    result = await append(store, "t", ["secret of ide a"])
    message_id = result.message_ids[0]
    for call in (
        store.get_thread(OTHER, "t"),
        store.get_messages(OTHER, "t"),
        store.get_message(OTHER, message_id),
        store.count_uncovered(OTHER, "t"),
        store.uncovered_messages(OTHER, "t"),
        store.frontier(OTHER, "t"),
        store.snapshot(OTHER, "t"),
    ):
        with pytest.raises(NotFound):
            await call
    # None means every partition, explicitly.
    assert (await store.get_thread(None, "t")).partition == P
    assert (await store.get_message(None, message_id)).content == "secret of ide a"


async def test_search_finds_a_partition_crowded_out_of_the_index_top_candidates(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Neo4j asks Lucene for its top candidates before the partition filter applies: 300
    # better matches elsewhere must make it ask for more, then read every match.
    await append(store, "busy", ["kubernetes kubernetes crowd"] * 300, partition=OTHER)
    mine = ["kubernetes rollout notes, with many more words around the one that matters here"] * 3
    await append(store, "quiet", mine)

    for widest in (neo4j_base.CANDIDATES_MAX, neo4j_base.CANDIDATES_MIN):
        monkeypatch.setattr(neo4j_base, "CANDIDATES_MAX", widest)
        hits = await store.search_text("kubernetes", partition=P, limit=3)
        assert [(hit.thread_id, hit.partition) for hit in hits] == [("quiet", P)] * 3
    everywhere = await store.search_text("kubernetes", partition=None, limit=5)
    assert {hit.thread_id for hit in everywhere} == {"busy"}


async def test_search_stats_and_listing_are_scoped_to_the_partition(store: MemoryStore) -> None:
    await append(store, "ta", ["kubernetes rollout in ide a", "second message"])
    await append(store, "tb", ["kubernetes rollout in ide b"], partition=OTHER)

    hits_a = await store.search_text("kubernetes", partition=P)
    assert [(h.thread_id, h.partition) for h in hits_a] == [("ta", P)]
    hits_all = await store.search_text("kubernetes", partition=None)
    assert {h.thread_id for h in hits_all} == {"ta", "tb"}
    assert await store.search_text("kubernetes", partition="ide-c") == []

    stats_a, stats_b, stats_all = [await store.stats(p) for p in (P, OTHER, None)]
    assert (stats_a.threads, stats_a.messages, stats_a.partition) == (1, 2, P)
    assert (stats_b.threads, stats_b.messages) == (1, 1)
    assert (stats_all.threads, stats_all.messages, stats_all.partition) == (2, 3, None)
    assert [t.id for t in await store.list_threads(P)] == ["ta"]
    assert {t.id for t in await store.list_threads(None)} == {"ta", "tb"}


# -- content fidelity -----------------------------------------------------------------------


async def test_tricky_contents_round_trip_byte_exact(store: MemoryStore) -> None:
    result = await append(store, "t", TRICKY_CONTENTS)
    assert result.appended == len(TRICKY_CONTENTS)
    messages = await store.get_messages(P, "t")
    assert [m.content.encode("utf-8") for m in messages] == [c.encode("utf-8") for c in TRICKY_CONTENTS]
    for message, content in zip(messages, TRICKY_CONTENTS, strict=True):
        single = await store.get_message(P, message.id)
        assert single.content == content
        assert single.sha256 == message_sha256(P, "t", message.source_id, "user", content, None)


async def test_one_megabyte_message_round_trips(store: MemoryStore) -> None:
    content = ("line of a very long tool result ✓ \r\n" * 30_000)[: 1024 * 1024]
    assert len(content.encode("utf-8")) > 1_000_000
    result = await store.append_messages(P, "t", [msg(content, "big", "tool")])
    stored = await store.get_message(P, result.message_ids[0])
    assert stored.content == content
    assert stored.tokens == estimate_tokens(content)


@given(content=st.text(max_size=200))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_any_text_round_trips(store: MemoryStore, content: str) -> None:
    thread_id = "prop-" + uuid.uuid4().hex
    result = await store.append_messages(P, thread_id, [msg(content, "only")])
    assert (await store.get_message(P, result.message_ids[0])).content == content


# -- bad input changes nothing ----------------------------------------------------------------


async def assert_unchanged(store: MemoryStore, thread_id: str, contents: list[str]) -> None:
    """The thread holds exactly ``contents`` and the store nothing else."""
    assert [m.content for m in await store.get_messages(P, thread_id)] == contents
    stats = await store.stats(None)
    assert (stats.threads, stats.messages) == (1, len(contents))


async def test_over_limit_message_is_refused_and_nothing_written(store: MemoryStore) -> None:
    await append(store, "t", ["before"])
    # Two bytes a character: fewer characters than the limit, more bytes.
    huge = "é" * (MAX_MESSAGE_BYTES // 2 + 1)
    with pytest.raises(InvalidInput, match="bytes"):
        await store.append_messages(P, "t", [msg("would be fine", "ok"), msg(huge, "huge")])
    await assert_unchanged(store, "t", ["before"])
    with pytest.raises(InvalidInput):
        await store.append_messages(P, "new-thread", [msg(huge, "huge")])
    with pytest.raises(NotFound):
        await store.get_thread(P, "new-thread")
    await assert_unchanged(store, "t", ["before"])


async def test_lone_surrogate_is_refused_and_nothing_written(store: MemoryStore) -> None:
    await append(store, "t", ["before"])
    with pytest.raises(InvalidInput, match="UTF-8"):
        await store.append_messages(P, "t", [msg("fine", "ok"), msg("broken \ud83d half emoji", "bad")])
    with pytest.raises(InvalidInput):
        # Model validation already refuses it; the store must too when a caller bypasses it.
        bad_id = NewMessage.model_construct(role=Role.user, content="fine", message_id="bad-id-\udc00")
        await store.append_messages(P, "t", [bad_id])
    with pytest.raises(InvalidInput):
        await store.append_messages(P, "thread-\ud800", [msg("fine", "ok")])
    await assert_unchanged(store, "t", ["before"])


async def test_bad_names_and_oversized_batches_are_refused(store: MemoryStore) -> None:
    await append(store, "t", ["before"])
    for partition, thread_id in (("", "t2"), ("  ", "t2"), (P, ""), (P, " \t"), (P, "x" * 10_000)):
        with pytest.raises(InvalidInput):
            await store.append_messages(partition, thread_id, [msg("fine", "ok")])
    with pytest.raises(InvalidInput, match=str(MAX_BATCH)):
        await store.append_messages(P, "t", [msg("m", f"id{i}") for i in range(MAX_BATCH + 1)])
    await assert_unchanged(store, "t", ["before"])


async def test_empty_and_whitespace_contents_are_stored_exactly(store: MemoryStore) -> None:
    contents = ["", " ", "\n", "\t\t", "\r\n\r\n"]
    result = await append(store, "t", contents)
    assert result.appended == len(contents)
    assert [m.content for m in await store.get_messages(P, "t")] == contents


async def test_page_sizes_below_one_are_refused(store: MemoryStore) -> None:
    await append(store, "t", ["some words"])
    for call in (
        store.list_threads(P, limit=0),
        store.get_messages(P, "t", limit=0),
        store.uncovered_messages(P, "t", limit=-1),
        store.search_text("words", partition=P, limit=0),
        store.compaction_candidates(P, min_uncovered=0, limit=0),
    ):
        with pytest.raises(InvalidInput, match="limit"):
            await call


async def test_unknown_ids_are_not_found(store: MemoryStore) -> None:
    await append(store, "t", ["exists"])
    calls = {
        "nope-thread": [
            store.get_thread(P, "nope-thread"),
            store.get_messages(P, "nope-thread"),
            store.count_uncovered(P, "nope-thread"),
            store.uncovered_messages(P, "nope-thread"),
            store.frontier(P, "nope-thread"),
            store.summary_dag(P, "nope-thread"),
            store.snapshot(None, "nope-thread"),
        ],
        "msg_nope": [store.get_message(None, "msg_nope")],
        "sum_nope": [store.get_summary(None, "sum_nope"), store.expand(None, "sum_nope")],
    }
    for unknown_id, coroutines in calls.items():
        for call in coroutines:
            with pytest.raises(NotFound) as caught:
                await call
            assert caught.value.id == unknown_id
            assert unknown_id in str(caught.value)


async def test_injection_looking_names_and_queries_are_plain_data(store: MemoryStore) -> None:
    evil = "x'); DROP TABLE messages;--"
    cypher = "x'}) DETACH DELETE n //"
    result = await store.append_messages(P, evil, [msg(evil, evil), msg(cypher, cypher)], project=evil)
    await append(store, "normal", ["still here"])
    thread = await store.get_thread(P, evil)
    assert (thread.id, thread.project, thread.message_count) == (evil, evil, 2)
    messages = await store.get_messages(P, evil)
    assert [(m.source_id, m.content) for m in messages] == [(evil, evil), (cypher, cypher)]
    assert messages[0].id == result.message_ids[0]
    hits = await store.search_text(evil, partition=P)
    assert messages[0].id in {h.id for h in hits}
    assert await store.search_text("DROP", partition=P, thread_id=evil)
    assert [m.content for m in await store.get_messages(P, "normal")] == ["still here"]
    assert (await store.stats(P)).messages == 3


# -- concurrency across processes ---------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from palimpsest.graph_schema.models import NewMessage
    from palimpsest.graph_schema.backends import Neo4jCredentials, open_store

    async def main(uri: str, name: str, batches: int, size: int) -> None:
        store = open_store(uri, Neo4jCredentials())
        await store.initialize()
        print("ready", flush=True)
        sys.stdin.readline()
        try:
            for b in range(batches):
                await store.append_messages("ide-a", "shared", [
                    NewMessage(role="user", content=f"{name} {b} {i}", message_id=f"{name}-{b}-{i}")
                    for i in range(size)
                ])
        finally:
            await store.close()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    """
)


def run_writers(uri: str, names: list[str], batches: int, size: int) -> list[tuple[int, str]]:
    """Start one process per name, release them together, return (exit code, stderr) each."""
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, uri, name, str(batches), str(size)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for name in names
    ]
    try:
        for writer in writers:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        for writer in writers:
            assert writer.stdin is not None
            writer.stdin.write("go\n")
            writer.stdin.flush()
        return [(writer.wait(timeout=120), writer.communicate()[1]) for writer in writers]
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()


@pytest.mark.slow
async def test_concurrent_appends_from_two_processes_leave_no_gap(store: MemoryStore, store_url: str) -> None:
    await append(store, "shared", ["opening message"])
    names, batches, size = ["alpha", "beta"], 15, 4
    outcomes = await asyncio.to_thread(run_writers, store_url, names, batches, size)
    assert [code for code, _ in outcomes] == [0, 0], [err for _, err in outcomes]

    messages = await store.get_messages(P, "shared")
    total = 1 + len(names) * batches * size
    assert [m.seq for m in messages] == list(range(total))
    expected = {f"{n}-{b}-{i}" for n in names for b in range(batches) for i in range(size)}
    assert {m.source_id for m in messages[1:]} == expected
    for name in names:
        own = [m.content for m in messages if m.source_id.startswith(name)]
        assert own == [f"{name} {b} {i}" for b in range(batches) for i in range(size)]
    assert (await store.get_thread(P, "shared")).message_count == total


# -- full-text search ---------------------------------------------------------------------------


async def test_search_finds_words_and_reports_the_hit(store: MemoryStore) -> None:
    when = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
    result = await store.append_messages(
        P,
        "t",
        [msg("We deploy with Terraform on Fridays", "d1", "assistant", created_at=when), msg("unrelated", "u")],
    )
    hits = await store.search_text("terraform", partition=P)
    assert len(hits) == 1
    hit = hits[0]
    assert (hit.id, hit.kind, hit.thread_id, hit.partition) == (result.message_ids[0], "message", "t", P)
    assert (hit.source_id, hit.role.value if hit.role else None, hit.created_at) == ("d1", "assistant", when)
    assert "terraform" in hit.snippet.lower()
    assert hit.score > 0


@pytest.mark.parametrize("query", SPECIAL_QUERIES)
async def test_query_syntax_is_never_an_error(store: MemoryStore, query: str) -> None:
    await append(store, "t", ['deploy "the" (app) with title: AND -flag ~fuzzy \\path /x [y] * done'])
    hits = await store.search_text(query, partition=P)
    assert isinstance(hits, list)
    if "deploy" in query:
        assert len(hits) == 1 and hits[0].kind == "message"


async def test_queries_without_words_return_nothing(store: MemoryStore) -> None:
    await append(store, "t", ["some content * : ( ) [ ]"])
    for query in ("", "   ", "*", ":()[]", '"', "\\/-~"):
        assert await store.search_text(query, partition=P) == []


async def test_better_match_ranks_first(store: MemoryStore) -> None:
    await append(
        store,
        "t",
        [
            "the cache layer was rewritten last week by the platform team",
            "redis cache eviction policy: redis keeps the cache hot, redis cache settings",
            "nothing relevant in this message at all",
        ],
    )
    hits = await store.search_text("redis cache eviction", partition=P)
    assert [h.kind for h in hits] == ["message", "message"]
    assert "redis" in hits[0].snippet.lower()
    assert hits[0].score > hits[1].score


async def test_sqlite_ranks_every_hit_by_bm25_and_keeps_old_all_word_rows_past_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite only: it ranks at most the newest MATCH_CANDIDATES matches of a query, so
    # it also asks for rows holding every word, whose best stay in view past that cap;
    # the union is ranked by BM25 alone, as Lucene ranks Neo4j's.
    async with sqlite_ranking_three(tmp_path, monkeypatch) as store:
        await append(
            store,
            "t",
            [
                "our kafka cluster needs a zookeeper quorum before the controller election can run",
                "kafka kafka kafka kafka",
                *(f"filler message number {i} about kafka deployments" for i in range(6)),
            ],
        )
        hits = await store.search_text("kafka zookeeper", partition=P, limit=3)
        assert hits[0].snippet.startswith("our kafka cluster")
        assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
        assert "kafka kafka kafka kafka" not in [hit.snippet for hit in hits], "older than the 3 newest matches"
        everything = await store.search_text("kafka zookeeper", partition=P, limit=20)
        assert everything[0] == hits[0] and len(everything) == 8, "the cap grows with the hits asked for"


async def test_sqlite_ranks_only_the_newest_matches_when_every_query_word_is_common(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Words in most messages have a bm25 IDF near zero: an all-words query would rank the
    # same near-zero scores a second time, so past the cap only the newest matches count.
    monkeypatch.setattr("palimpsest.graph_schema.sqlite.queries.COMMON_TERM_MIN_ROWS", 4)
    async with sqlite_ranking_three(tmp_path, monkeypatch) as store:
        await append(
            store,
            "t",
            [
                "kafka deploy kafka deploy kafka deploy",
                *(f"kafka note {i}" for i in range(3)),
                *(f"deploy note {i}" for i in range(3)),
            ],
        )
        hits = await store.search_text("kafka deploy", partition=P, limit=3)
        assert sorted(hit.snippet for hit in hits) == ["deploy note 0", "deploy note 1", "deploy note 2"]


@asynccontextmanager
async def sqlite_ranking_three(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SqliteStore]:
    """A SQLite store whose full-text queries each rank at most the newest 3 matches."""
    monkeypatch.setattr("palimpsest.graph_schema.sqlite.queries.MATCH_CANDIDATES", 3)
    store = SqliteStore(str(tmp_path / "memory.db"))
    await store.initialize()
    try:
        yield store
    finally:
        await store.close()


def padded(middle: str, tag: str) -> str:
    """``middle`` inside 120 distinct filler words on each side, so a snippet must cut both ends."""
    return " ".join([*(f"{tag}a{i}" for i in range(120)), middle, *(f"{tag}b{i}" for i in range(120))])


async def test_each_hit_gets_a_window_of_its_own_text_around_the_matched_word(store: MemoryStore) -> None:
    # A search ranks many candidates but builds snippets for the hits it returns only,
    # so each kept hit must still get a window of its own text: long texts cut at both
    # ends around the matched word, a short text whole, summaries as messages.
    texts = {
        "long": padded("the kubernetes rollout stalled", "m"),
        "short": "kubernetes again",
        "other": padded("a kubernetes node drained", "n"),
    }
    written = await store.append_messages(P, "t", [msg(text, key) for key, text in texts.items()])
    children = await store.get_messages(P, "t")
    summary = await store.persist_summary(
        NewSummary(
            thread_id="t", partition=P, level=1, text=padded("kubernetes was upgraded", "s"), tokens=9,
            summarizer="test", child_ids=[child.id for child in children],
        )
    )  # fmt: skip
    text_of = {**dict(zip(written.message_ids, texts.values(), strict=True)), summary.id: summary.text}
    for limit in (4, 2):
        hits = await store.search_text("kubernetes", partition=P, kinds=["message", "summary"], limit=limit)
        assert len(hits) == limit
        for hit in hits:
            text = text_of[hit.id]
            assert "kubernetes" in hit.snippet
            assert hit.snippet.strip("…") in text, "a window of the hit's own text"
            if text == texts["short"]:
                assert hit.snippet == text
            else:
                assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
                assert len(hit.snippet) < len(text) // 3


async def test_snippets_built_later_are_the_ones_the_search_would_have_built(store: MemoryStore) -> None:
    # Hybrid search asks for 100 text candidates without snippets and keeps ten
    # (server/retrieval/hybrid.py); text_snippets must then give each kept hit the very
    # window search_text gives: rows holding both words and rows holding one, a
    # summary, long texts cut at both ends and a short one whole.
    texts = [
        padded("we deployed the canary. Then the canary failed", "a"),
        padded("deploying twice", "b"),
        "canary",
        padded("nothing to see", "c") + " deploy",
    ]
    await append(store, "t", texts)
    children = await store.get_messages(P, "t")
    await store.persist_summary(
        NewSummary(
            thread_id="t", partition=P, level=1, text=padded("the canary was deployed", "s"), tokens=9,
            summarizer="test", child_ids=[child.id for child in children],
        )
    )  # fmt: skip
    for query in ("deploying canaries", "canary", "deploy"):
        eager = await store.search_text(query, partition=P, limit=5)
        later = await store.search_text(query, partition=P, limit=5, snippets=False)
        assert [hit.id for hit in later] == [hit.id for hit in eager] and eager
        assert await store.text_snippets(query, later) == eager
        assert await store.text_snippets(query, later[1:3]) == eager[1:3], "any subset, in its order"
    assert await store.text_snippets("", later) == later, "no words: the hits as they were"


async def test_sqlite_snippets_are_the_ones_fts5_gives_in_the_store(tmp_path: Path) -> None:
    # SQLite only: snippets are built for the kept hits in a small in-memory FTS5 table
    # (graph_schema/sqlite/snippets.py); they must be exactly what snippet() gives on
    # the store's own index, stemmed matches included, for both query tiers.
    schema = (Path(sqlite_backend.__file__).parent / "schema.sql").read_text()
    tokenizers = set(re.findall(r"tokenize = '([^']*)'", schema))
    assert tokenizers == set(re.findall(r"tokenize = '([^']*)'", sqlite_queries.SNIPPET_TABLE)), "one tokenizer"
    path = tmp_path / "memory.db"
    store = SqliteStore(str(path))
    await store.initialize()
    try:
        await append(
            store,
            "t",
            [
                padded("we deployed the canary. Then the canary failed", "a"),
                padded("deploying twice", "b") + ". A second sentence about a canary.",
                "canary",
                padded("nothing to see", "c") + " deploy",
            ],
        )
        hits = await store.search_text("deploying canaries", partition=P, limit=3)
    finally:
        await store.close()
    assert len(hits) == 3
    with closing(sqlite3.connect(path)) as conn:
        for hit in hits:
            (pk,) = conn.execute("SELECT pk FROM messages WHERE id = ?", (hit.id,)).fetchone()
            (expected,) = conn.execute(
                "SELECT snippet(messages_fts, 0, '', '', '…', 40) FROM messages_fts"
                ' WHERE messages_fts MATCH \'"deploying" OR "canaries"\' AND rowid = ?',
                (pk,),
            ).fetchone()
            assert hit.snippet == expected


async def test_search_filters_by_thread_time_and_limit(store: MemoryStore) -> None:
    months = [datetime(2024, month, 1, tzinfo=UTC) for month in (1, 2, 3)]
    for thread_id in ("t1", "t2"):
        await store.append_messages(
            P,
            thread_id,
            [msg(f"marker {thread_id} {when:%B}", f"m{i}", created_at=when) for i, when in enumerate(months)],
        )
    in_t1 = await store.search_text("marker", partition=P, thread_id="t1")
    assert len(in_t1) == 3 and {h.thread_id for h in in_t1} == {"t1"}

    since = await store.search_text("marker", partition=P, thread_id="t1", since=datetime(2024, 1, 15, tzinfo=UTC))
    assert sorted(h.created_at for h in since) == months[1:]
    until = await store.search_text("marker", partition=P, thread_id="t1", until=datetime(2024, 2, 15, tzinfo=UTC))
    assert sorted(h.created_at for h in until) == months[:2]
    window = await store.search_text(
        "marker",
        partition=P,
        since=datetime(2024, 1, 15, tzinfo=UTC),
        until=datetime(2024, 2, 15, tzinfo=UTC),
    )
    assert sorted((h.thread_id, h.created_at) for h in window) == [("t1", months[1]), ("t2", months[1])]

    assert len(await store.search_text("marker", partition=P, limit=4)) == 4
    assert await store.search_text("marker", partition=P, kinds=["summary"]) == []
    assert len(await store.search_text("marker", partition=P, kinds=["message"])) == 6


# -- stats and listing --------------------------------------------------------------------------


async def test_stats_count_what_is_stored(store: MemoryStore, backend: str) -> None:
    empty = await store.stats(None)
    assert (empty.store, empty.threads, empty.messages, empty.facts, empty.tokens) == (backend, 0, 0, 0, 0)
    assert empty.summaries_by_level == {}
    contents = ["a" * 40, "b" * 7, "c"]
    await append(store, "t1", contents[:2])
    await append(store, "t2", contents[2:])
    stats = await store.stats(P)
    assert (stats.threads, stats.messages, stats.facts) == (2, 3, 0)
    assert stats.tokens == sum(estimate_tokens(c) for c in contents)
    assert stats.summaries_by_level == {}


async def test_partitions_lists_every_partition_with_its_threads(store: MemoryStore) -> None:
    assert await store.partitions() == {}
    await append(store, "t1", ["one"])
    await append(store, "t2", ["two"])
    await store.append_messages("windsurf", "t1", [msg("same id, another partition", "w")])
    assert await store.partitions() == {P: 2, "windsurf": 1}
    assert list(await store.partitions()) == sorted([P, "windsurf"])


async def test_list_threads_most_recent_first(store: MemoryStore) -> None:
    for thread_id in ("t1", "t2", "t3"):
        await append(store, thread_id, [f"in {thread_id}"])
    await store.append_messages(P, "t1", [msg("t1 again", "later")])
    assert [t.id for t in await store.list_threads(P)] == ["t1", "t3", "t2"]
    assert [t.id for t in await store.list_threads(P, limit=2)] == ["t1", "t3"]
    assert {t.id: t.message_count for t in await store.list_threads(P)} == {"t1": 2, "t2": 1, "t3": 1}


# -- SQLite specifics (the embedded file several processes share) -------------------------------


async def test_sqlite_creates_directories_and_two_stores_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "memory.db"
    first, second = SqliteStore(str(path)), SqliteStore(str(path))
    await first.initialize()
    await second.initialize()
    try:
        await first.append_messages(P, "t", [msg("from first", "a")])
        await second.append_messages(P, "t", [msg("from second", "b")])
        messages = await first.get_messages(P, "t")
        assert [(m.seq, m.content) for m in messages] == [(0, "from first"), (1, "from second")]
    finally:
        await first.close()
        await second.close()
    memory = SqliteStore(":memory:")
    await memory.initialize()
    await memory.append_messages(P, "t", [msg("in memory", "a")])
    assert [m.content for m in await memory.get_messages(P, "t")] == ["in memory"]
    await memory.close()
    await memory.close()


async def test_sqlite_failures_become_store_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database file " * 100)
    for path in (tmp_path, junk):
        broken = SqliteStore(str(path))
        with pytest.raises(StoreUnavailable, match=str(path)):
            await broken.initialize()
        await broken.close()

    closed = SqliteStore(str(tmp_path / "closed.db"))
    await closed.initialize()
    await closed.close()
    with pytest.raises(StoreUnavailable, match="initialize"):
        await closed.stats(None)

    # Another process holds the write lock past the busy timeout: an outage, not a crash.
    monkeypatch.setattr(sqlite_backend, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "locked.db"
    store = SqliteStore(str(path))
    await store.initialize()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            await store.append_messages(P, "t", [msg("waits", "a")])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (await store.append_messages(P, "t", [msg("now it goes", "a")])).appended == 1
    await store.close()
