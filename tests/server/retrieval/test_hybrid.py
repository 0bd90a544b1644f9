"""Hybrid search: the fusion on hand-made data, end to end with the real all-MiniLM-L6-v2.

What a user gets: a question phrased with question words finds the message that has
both its keyword and its meaning, where text search is led astray by the question
words and never sees the paraphrase; a question naming a person ranks what that person
said first; a turn next to a strong match rises with it. And the store verb the
ranking reads, ``message_refs``, keeps its contract on both backends.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastmcp.exceptions import ToolError
from typer.testing import CliRunner

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import MAX_BATCH, REF_OPENING_CHARS, MessageRef, NewMessage, NewSummary, SearchHit
from palimpsest.graph_schema.sqlite.store import SqliteStore
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import SentenceTransformerEmbedder
from palimpsest.scheduler.embedding import backfill_embeddings
from palimpsest.server.cli.main import app
from palimpsest.server.mcp.app import build_server
from palimpsest.server.retrieval.grep import grep_memories
from palimpsest.server.retrieval.hybrid import (
    FusionWeights,
    fuse,
    hybrid_search,
    names_metadata,
    normalised,
    query_names,
    text_query,
    written_speaker,
)
from tests.support.jsonl import line, write_jsonl
from tests.support.semantic import MINILM_SPEC, call, mcp_client, settings_for

P = "claude"
QUESTION = "why did we stop keeping sessions in Redis"
#: m2 has the keyword and the meaning; m3 the meaning without a shared word; m6 and m7
#: share only question words ("we", "in", "stop") with the question.
CONVERSATION = {
    "m0": "keeping the Redis sticker, the Redis mug and the Redis poster on the office fridge",
    "m1": "the login page got a new dark theme",
    "m2": "Redis went away for sessions since each restart logged every user out",
    "m3": "the login cache was dropped after people kept getting logged out",
    "m4": "the kitchen walls were painted blue last spring",
    "m5": "run the linter before committing",
    "m6": "we deploy the frontend in the morning",
    "m7": "we should stop the build when a test fails",
}


def hit(node_id: str, score: float, kind: str = "message") -> SearchHit:
    """A search hit as a store returns one; only id, kind and score matter to fusion."""
    return SearchHit(
        id=node_id, kind=kind, thread_id="t", partition=P, score=score, snippet=node_id,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip


def ref(node_id: str, seq: int, thread_id: str = "t", **metadata: str) -> MessageRef:
    return MessageRef(id=node_id, thread_id=thread_id, partition=P, seq=seq, role="user", metadata=metadata)


async def seed(store: MemoryStore, embedder: SentenceTransformerEmbedder) -> dict[str, str]:
    """The conversation in one thread, embedded; source id -> stored id."""
    messages = [NewMessage(role="assistant", content=text, message_id=key) for key, text in CONVERSATION.items()]
    appended = await store.append_messages(P, "session-1", messages)
    assert await backfill_embeddings(store, embedder) == len(messages)
    return dict(zip(CONVERSATION, appended.message_ids, strict=True))


# -- the fusion's parts, no store and no model ---------------------------------------------


def test_text_query_drops_question_words_but_keeps_a_query_of_nothing_else() -> None:
    assert text_query("What did Caroline research?", expand=False) == "Caroline research"
    assert text_query("why did we stop keeping sessions in Redis", expand=False) == "stop keeping sessions Redis"
    assert text_query("what was it?", expand=False) == "what was it?"
    assert text_query("where is ops/vault.hcl now?", expand=False) == "ops/vault.hcl now"
    assert text_query("What is Caroline's job?", expand=False) == "Caroline s job"


def test_normalised_scores_span_zero_to_one_and_ties_give_one() -> None:
    assert normalised([hit("a", 9.0), hit("b", 5.0), hit("c", 1.0)]) == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert normalised([hit("a", 0.3), hit("b", 0.3)]) == {"a": 1.0, "b": 1.0}
    assert normalised([]) == {}


def test_metadata_matches_short_names_the_query_uses_and_nothing_else() -> None:
    names = query_names("What did Caroline research about adoption?")
    assert names_metadata({"speaker": "Caroline"}, names)
    assert names_metadata({"speaker": "caroline", "mood": 3}, names)
    assert not names_metadata({"speaker": "Melanie"}, names)
    assert not names_metadata({"speaker": "Caroline Smith"}, names)
    assert not names_metadata({"note": "Caroline research adoption " * 5}, names)
    assert not names_metadata({"count": 1}, names)
    assert not names_metadata({"speaker": "what"}, names), "a stop word is no name"


def test_a_message_whose_metadata_the_query_names_overtakes_a_better_text_match() -> None:
    text_hits = [hit("melanie", 10.0), hit("caroline", 8.0), hit("other", 1.0)]
    vector_hits = [hit("melanie", 0.6), hit("caroline", 0.55), hit("other", 0.1)]
    refs = [ref("melanie", 0, speaker="Melanie"), ref("caroline", 5, speaker="Caroline"), ref("other", 9)]
    ranked = fuse(text_hits, vector_hits, refs, "What did Caroline paint?")
    assert [found.id for found in ranked] == ["caroline", "melanie", "other"]
    plain = fuse(text_hits, vector_hits, refs, "What did Caroline paint?", FusionWeights(metadata=0.0))
    assert [found.id for found in plain] == ["melanie", "caroline", "other"]


def test_fuse_returns_the_best_candidates_asked_for_with_their_fused_scores() -> None:
    text_hits = [hit("melanie", 10.0), hit("caroline", 8.0), hit("other", 1.0)]
    vector_hits = [hit("melanie", 0.6), hit("caroline", 0.55), hit("other", 0.1), hit("vector only", 0.3)]
    refs = [ref("melanie", 0, speaker="Melanie"), ref("caroline", 5, speaker="Caroline"), ref("other", 9)]
    every = fuse(text_hits, vector_hits, refs, "What did Caroline paint?")
    assert len(every) == 4
    assert fuse(text_hits, vector_hits, refs, "What did Caroline paint?", limit=2) == every[:2]
    assert [found.score for found in every[:2]] != [hit.score for hit in text_hits[:2]], "fused, not copied"


def test_a_speaker_written_in_the_content_is_read_like_one_in_metadata() -> None:
    assert written_speaker("Caroline: I went to the class") == "Caroline"
    assert written_speaker("Dr. Ada Byrne: yes") == "Dr. Ada Byrne"
    assert written_speaker("see https://example.com: it") is None
    assert written_speaker("one two three four five: too long for a name") is None
    text_hits = [hit("melanie", 10.0), hit("caroline", 8.0), hit("other", 1.0)]
    vector_hits = [hit("melanie", 0.6), hit("caroline", 0.55), hit("other", 0.1)]
    written = [
        MessageRef(id=node_id, thread_id="t", partition=P, seq=seq, role="user", opening=opening)
        for node_id, seq, opening in (
            ("melanie", 0, "Melanie: I painted"),
            ("caroline", 5, "Caroline: I painted"),
            ("other", 9, "We talked about Caroline: she paints"),
        )
    ]
    in_metadata = [ref("melanie", 0, speaker="Melanie"), ref("caroline", 5, speaker="Caroline"), ref("other", 9)]
    for refs in (written, in_metadata):
        ranked = fuse(text_hits, vector_hits, refs, "What did Caroline paint?")
        assert [found.id for found in ranked] == ["caroline", "melanie", "other"]
    assert [found.score for found in fuse(text_hits, vector_hits, written, "What did Caroline paint?")] == [
        found.score for found in fuse(text_hits, vector_hits, in_metadata, "What did Caroline paint?")
    ]


def test_a_neighbour_of_a_strong_match_rises_but_only_within_its_thread() -> None:
    text_hits = [hit("answer", 10.0), hit("near", 4.0), hit("far", 4.5), hit("weak", 0.0)]
    vector_hits = [hit("answer", 0.9), hit("near", 0.4), hit("far", 0.45), hit("weak", 0.0)]
    refs = [ref("answer", 10), ref("near", 11), ref("far", 11, thread_id="other"), ref("weak", 30)]
    ranked = fuse(text_hits, vector_hits, refs, "anything", FusionWeights(neighbour=0.3, text_top=0.0))
    assert [found.id for found in ranked] == ["answer", "near", "far", "weak"]
    assert ranked[1].score == pytest.approx(0.4 + 0.3 * (1.0 + 0.3 * 0.4), abs=0.02)
    alone = fuse(text_hits, vector_hits, refs, "anything", FusionWeights(neighbour=0.0, text_top=0.0))
    assert [found.id for found in alone] == ["answer", "far", "near", "weak"]


def test_a_time_question_ranks_first_the_candidate_that_tells_a_time_or_was_written_then() -> None:
    text_hits = [hit("undated", 10.0), hit("dated", 8.0), hit("other", 1.0)]
    vector_hits = [hit("undated", 0.6), hit("dated", 0.55), hit("other", 0.1)]
    refs = [
        MessageRef(id=node_id, thread_id="t", partition=P, seq=seq, role="user", opening=opening)
        for node_id, seq, opening in (
            ("undated", 0, "Caroline: the support group was great"),
            ("dated", 5, "Caroline: I went to a support group yesterday"),
            ("other", 9, "Melanie: see you next week"),
        )
    ]
    when = fuse(text_hits, vector_hits, refs, "When did Caroline go to the support group?")
    assert [found.id for found in when] == ["dated", "undated", "other"]
    what = fuse(text_hits, vector_hits, refs, "What did Caroline say about the support group?")
    assert [found.id for found in what] == ["undated", "dated", "other"], "no time asked, no time counted"
    question = "What did we decide about the cache in March 2024?"
    written = {
        name: hit(name, score).model_copy(
            update={"created_at": datetime(2024, month, 12, tzinfo=UTC), "snippet": "cache"}
        )
        for name, score, month in (("february", 10.0, 2), ("march", 9.0, 3), ("april", 0.0, 4))
    }
    found = fuse(list(written.values()), [], [], question)
    assert [found.id for found in found] == ["march", "february", "april"]
    blind = fuse(list(written.values()), [], [], question, FusionWeights(created_in_period=0.0))
    assert [found.id for found in blind] == ["february", "march", "april"]


def test_summaries_and_facts_are_fused_by_score_alone() -> None:
    plain = FusionWeights(text_top=0.0)
    ranked = fuse([hit("s", 3.0, "summary"), hit("m", 1.0)], [hit("f", 0.8, "fact"), hit("m", 0.2)], [], "q", plain)
    assert {found.id: found.kind for found in ranked} == {"s": "summary", "f": "fact", "m": "message"}
    assert ranked[0].score == pytest.approx(0.5) and ranked[1].score == pytest.approx(0.5)
    assert ranked[2].id == "m" and ranked[2].score == pytest.approx(0.0)


# -- the store verb hybrid ranking reads ---------------------------------------------------


async def test_message_refs_give_position_and_metadata_in_the_order_asked(store: MemoryStore) -> None:
    appended = await store.append_messages(
        P, "t1",
        [
            NewMessage(role="user", content="x" * 1000, metadata={"speaker": "Caroline", "n": 1}),
            NewMessage(role="assistant", content="second"),
        ],
    )  # fmt: skip
    other = await store.append_messages("codex", "t2", [NewMessage(role="user", content="elsewhere")])
    first, second = appended.message_ids
    refs = await store.message_refs(P, [second, "msg_unknown", first, second, other.message_ids[0]])
    assert refs == [
        MessageRef(id=second, thread_id="t1", partition=P, seq=1, role="assistant", metadata={}, opening="second"),
        MessageRef(
            id=first,
            thread_id="t1",
            partition=P,
            seq=0,
            role="user",
            metadata={"speaker": "Caroline", "n": 1},
            opening="x" * REF_OPENING_CHARS,
        ),
    ]
    everywhere = await store.message_refs(None, [other.message_ids[0]])
    assert [(found.partition, found.thread_id, found.seq) for found in everywhere] == [("codex", "t2", 0)]
    assert await store.message_refs(P, []) == []
    with pytest.raises(InvalidInput, match=f"at most {MAX_BATCH}"):
        await store.message_refs(P, [f"msg_{index}" for index in range(MAX_BATCH + 1)])


# -- end to end, with the real model ------------------------------------------------------


async def test_hybrid_ranks_first_the_message_with_both_the_keyword_and_the_meaning(
    store: MemoryStore, minilm: SentenceTransformerEmbedder
) -> None:
    await seed(store, minilm)
    text = await grep_memories(store, QUESTION, partition=P, mode="text", embedder=minilm)
    hybrid = await grep_memories(store, QUESTION, partition=P, mode="hybrid", embedder=minilm)
    text_ids = [found.source_id for found in text.hits]
    hybrid_ids = [found.source_id for found in hybrid.hits]
    assert text_ids[0] != "m2", "text search alone is led astray by the question's words"
    assert "m3" not in text_ids, "text search alone never sees the paraphrase"
    assert hybrid_ids[0] == "m2"
    assert "m3" in hybrid_ids[:3]
    assert [found.score for found in hybrid.hits] == sorted((found.score for found in hybrid.hits), reverse=True)


@pytest.mark.parametrize("layout", ["metadata", "content"])
async def test_hybrid_ranks_what_the_named_speaker_said_first(
    store: MemoryStore, minilm: SentenceTransformerEmbedder, layout: str
) -> None:
    sessions = {
        "session-1": [
            ("Caroline", "Hey Melanie! I finally went to the pottery class."),
            ("Melanie", "I went to a pottery class too, with my kids, and painted a sunrise."),
            ("Caroline", "I researched adoption agencies all week."),
            ("Melanie", "The kids want a dog, we are looking at shelters."),
            ("Caroline", "My friends threw me a party for my birthday."),
            ("Melanie", "We went camping by the lake last weekend."),
        ],
        "session-2": [
            ("Melanie", "Caroline, did you see the lake at sunrise?"),
            ("Caroline", "Not yet, I was at the library reading all day."),
            ("Melanie", "I ran a charity race on Sunday."),
            ("Caroline", "That sounds great, I should train for one too."),
        ],
    }
    for thread_id, turns in sessions.items():
        messages = [
            NewMessage(role="user", content=text, message_id=f"{thread_id}:{index}", metadata={"speaker": speaker})
            if layout == "metadata"
            else NewMessage(role="user", content=f"{speaker}: {text}", message_id=f"{thread_id}:{index}")
            for index, (speaker, text) in enumerate(turns)
        ]
        await store.append_messages(P, thread_id, messages)
    await backfill_embeddings(store, minilm)
    question = "Which class did Caroline go to?"
    # The name step with a light neighbour share: in these ten alternating turns every
    # Melanie turn sits between two of Caroline's, and at the default share (0.5) her turn
    # that names Caroline takes enough of their name boost to lead; this test is about
    # the name step, the neighbour step has its own.
    light = FusionWeights(neighbour=0.3)
    found = await hybrid_search(store, minilm, question, partition=P, weights=light)
    assert found[0].source_id == "session-1:0", "Caroline's own turn about a class, not Melanie's"
    if layout == "metadata":  # the content layout's vectors read the name themselves
        blind = await hybrid_search(
            store, minilm, question, partition=P, weights=FusionWeights(metadata=0.0, neighbour=0.3)
        )
        assert blind[0].source_id != "session-1:0", "without the speaker, another turn wins"


async def store_apart(store: MemoryStore, minilm: SentenceTransformerEmbedder, messages: list[NewMessage]) -> None:
    """Each message in a thread of its own (no neighbours to lift it), embedded."""
    for index, message in enumerate(messages):
        await store.append_messages(P, f"session-{index}", [message])
    await backfill_embeddings(store, minilm)


@pytest.mark.parametrize("layout", ["metadata", "content"])
async def test_hybrid_answers_a_time_question_with_the_turn_that_tells_the_time(
    store: MemoryStore, minilm: SentenceTransformerEmbedder, layout: str
) -> None:
    turns = [
        ("Caroline", "I went to the climbing gym with my sister."),
        ("Caroline", "I went to the climbing gym with my sister yesterday."),
        ("Melanie", "The gym at work closed."),
        ("Melanie", "My sister wants a dog."),
        ("Melanie", "The pool is open late."),
        ("Melanie", "The library has new books."),
    ]
    await store_apart(
        store, minilm,
        [
            NewMessage(role="user", content=text, message_id=f"turn-{index}", metadata={"speaker": speaker})
            if layout == "metadata"
            else NewMessage(role="user", content=f"{speaker}: {text}", message_id=f"turn-{index}")
            for index, (speaker, text) in enumerate(turns)
        ],
    )  # fmt: skip
    question = "When did Caroline go to the climbing gym?"
    found = await grep_memories(store, question, partition=P, mode="hybrid", embedder=minilm)
    assert found.hits[0].source_id == "turn-1", "the turn that says when"
    blind = await hybrid_search(store, minilm, question, partition=P, weights=FusionWeights(written_time=0.0))
    assert blind[0].source_id == "turn-0", "without the time signal, the shorter turn wins"


async def test_hybrid_ranks_first_a_message_written_in_the_period_a_question_names(
    store: MemoryStore, minilm: SentenceTransformerEmbedder
) -> None:
    decided = "We decided to move the session cache to Postgres"
    turns = [
        (datetime(2024, 2, 12, tzinfo=UTC), f"{decided}."),
        (datetime(2024, 3, 12, tzinfo=UTC), f"{decided} after all."),
        *(
            (datetime(2024, 5, 2, tzinfo=UTC), text)
            for text in ("The linter now runs before every commit.", "The cache hit rate dropped.",
                         "Docs build on every push.", "Sessions expire after a day.")
        ),
    ]  # fmt: skip
    await store_apart(
        store, minilm,
        [NewMessage(role="user", content=text, message_id=f"turn-{index}", created_at=moment)
         for index, (moment, text) in enumerate(turns)],
    )  # fmt: skip
    question = "What did we decide about the session cache in March 2024?"
    found = await grep_memories(store, question, partition=P, mode="hybrid", embedder=minilm)
    assert found.hits[0].source_id == "turn-1", "the decision written in March"
    blind = await hybrid_search(store, minilm, question, partition=P, weights=FusionWeights(created_in_period=0.0))
    assert blind[0].source_id == "turn-0", "without created_at, February's shorter message wins"


async def test_hybrid_hits_carry_covered_by_and_respect_filters(
    store: MemoryStore, minilm: SentenceTransformerEmbedder
) -> None:
    ids = await seed(store, minilm)
    covered = [ids[key] for key in ("m0", "m1", "m2")]
    text = "notes on office decorations"
    summary = await store.persist_summary(
        NewSummary(thread_id="session-1", partition=P, level=1, text=text, tokens=estimate_tokens(text),
                   summarizer="test", child_ids=covered)
    )  # fmt: skip
    await backfill_embeddings(store, minilm)
    found = await grep_memories(store, QUESTION, partition=P, mode="hybrid", embedder=minilm, kinds=("message",))
    top = found.hits[0]
    assert (top.source_id, top.kind, top.covered_by) == ("m2", "message", [summary.id])
    assert all(found_hit.kind == "message" for found_hit in found.hits)
    with_summaries = await grep_memories(
        store, "office decorations", partition=P, mode="hybrid", embedder=minilm, kinds=("summary",)
    )
    assert [(found_hit.id, found_hit.covered_by) for found_hit in with_summaries.hits] == [(summary.id, [])]
    assert (await grep_memories(store, QUESTION, partition="codex", mode="hybrid", embedder=minilm)).hits == []
    later = datetime(2100, 1, 1, tzinfo=UTC)
    assert (await grep_memories(store, QUESTION, partition=P, mode="hybrid", embedder=minilm, since=later)).hits == []


async def test_hybrid_without_an_embedder_refuses_clearly_and_changes_nothing(store: MemoryStore) -> None:
    await store.append_messages(P, "session-1", [NewMessage(role="user", content="sessions in Redis")])
    with pytest.raises(InvalidInput, match="hybrid search needs an embedder.*PALIMPSEST_EMBEDDER.*mode text"):
        await grep_memories(store, QUESTION, partition=P, mode="hybrid")
    assert (await store.stats(P)).messages == 1


# -- through MCP and the CLI --------------------------------------------------------------


async def test_mcp_hybrid_mode_finds_the_answer_and_refuses_without_an_embedder(
    store: MemoryStore, store_url: str, minilm: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    ids = await seed(store, minilm)
    server = build_server(settings_for(store_url, embedder=MINILM_SPEC), store=store)
    async with mcp_client(server) as session:
        hits = (await call(session, "grep_memories", query=QUESTION, mode="hybrid", limit=3))["hits"]
    assert (hits[0]["id"], hits[0]["source_id"], hits[0]["covered_by"]) == (ids["m2"], "m2", [])
    bare = build_server(settings_for(f"sqlite:///{tmp_path / 'bare.db'}"))
    async with mcp_client(bare) as session:
        with pytest.raises(ToolError, match="hybrid search needs an embedder"):
            await session.call_tool("grep_memories", {"query": QUESTION, "mode": "hybrid"})


def test_cli_grep_hybrid(tmp_path: Path, minilm: SentenceTransformerEmbedder) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    records = [line("session-1", "assistant", text, message_id=key) for key, text in CONVERSATION.items()]
    path = write_jsonl(tmp_path / "chat.jsonl", records)
    env = {"PALIMPSEST_STORE": url, "PALIMPSEST_PARTITION": None, "PALIMPSEST_EMBEDDER": MINILM_SPEC}
    runner = CliRunner()
    ingested = runner.invoke(app, ["ingest", str(path), "--embed"], env=env)
    assert ingested.exit_code == 0, ingested.output

    found = runner.invoke(app, ["grep", QUESTION, "--mode", "hybrid", "--json", "--limit", "2"], env=env)
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout)["hits"]
    assert [hit_["source_id"] for hit_ in hits][0] == "m2"
    assert hits[0]["snippet"] and hits[0]["covered_by"] == []

    bare = runner.invoke(app, ["grep", QUESTION, "--mode", "hybrid"], env={**env, "PALIMPSEST_EMBEDDER": "none"})
    assert bare.exit_code == 1
    assert "hybrid search needs an embedder" in bare.stderr


# -- the cost of the text half on a large SQLite store ------------------------------------


async def test_sqlite_text_search_skips_terms_in_most_messages_without_changing_the_ranking(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "large.db"))
    await store.initialize()
    try:
        extra = {index: "redis " * (1 + index % 7) for index in range(0, 1200, 100)}
        texts = [f"the build {index} {extra.get(index, '')}" for index in range(1200)]
        messages = [NewMessage(role="user", content=text) for text in texts]
        for start in range(0, len(messages), 600):
            await store.append_messages(P, "big", messages[start : start + 600])
        plain = await store.search_text("redis", partition=P, limit=50)
        with_common = await store.search_text("the redis", partition=P, limit=50)
        assert len(plain) == 12
        assert [found.id for found in with_common] == [found.id for found in plain]
        assert [found.score for found in with_common] == pytest.approx([found.score for found in plain])
        only_common = await store.search_text("the build", partition=P, limit=5)
        assert len(only_common) == 5, "a query of common terms only is searched as asked"
    finally:
        await store.close()


async def test_sqlite_text_search_ranks_only_the_newest_matches_past_the_candidate_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteStore(str(tmp_path / "capped.db"))
    await store.initialize()
    try:
        strong = [NewMessage(role="user", content=f"redis redis redis old {index}") for index in range(10)]
        weak = [NewMessage(role="user", content=f"redis and many other words, new {index}") for index in range(10)]
        await store.append_messages(P, "t", [*strong, *weak])
        await store.append_messages("elsewhere", "t-other", [NewMessage(role="user", content="redis newest")] * 10)

        exact = await store.search_text("redis", partition=P, limit=5)
        assert all(found.snippet.startswith("redis redis redis old") for found in exact)

        monkeypatch.setattr("palimpsest.graph_schema.sqlite.queries.MATCH_CANDIDATES", 10)
        capped = await store.search_text("redis", partition=P, limit=5)
        assert len(capped) == 5, "the partition filter applies before the cap"
        assert all(found.snippet.startswith("redis and many other words, new") for found in capped)
        assert {found.partition for found in capped} == {P}
        assert len(await store.search_text("redis", partition=P, limit=15)) == 15, "a larger page widens the cap"
    finally:
        await store.close()
