"""Recall on what a developer asks: tools by their job, names by their parts, the same top hits at any limit.

A question says "the linter" where the session ran ``ruff check``, and "the payment
gateway" where the code wrote ``PaymentGateway``; a caller that asks for 60 hits must
see the same first three as one that asks for 3. Each rule is shown on a real store
(both backends where the store takes part), through ``grep_memories``.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from palimpsest.graph_schema.models import MessageRef, NewMessage, SearchHit
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import SentenceTransformerEmbedder
from palimpsest.scheduler.embedding import backfill_embeddings
from palimpsest.scheduler.search_text import code_terms, fill_search_texts
from palimpsest.server.retrieval.grep import grep_memories
from palimpsest.server.retrieval.hybrid import FusionWeights, fuse, hybrid_search, text_query
from palimpsest.server.retrieval.vocabulary import expanded_terms

P = "claude"


async def tool_pair(store: MemoryStore, thread: str, key: str, call: str, output: str) -> None:
    """A tool call and its result, stored as a coding agent's feed writes them."""
    await store.append_messages(
        P,
        thread,
        [
            NewMessage(
                role="assistant", content=call, message_id=f"{key}-call", tool_call_id=f"tc-{key}",
                metadata={"kind": "tool_use", "tool_name": call.split(" ", 1)[0]},
            ),
            NewMessage(role="tool", content=output, message_id=f"{key}-result", tool_call_id=f"tc-{key}"),
        ],
    )  # fmt: skip


async def say(store: MemoryStore, thread: str, key: str, text: str) -> None:
    await store.append_messages(P, thread, [NewMessage(role="assistant", content=text, message_id=key)])


def test_a_job_word_brings_its_tools_names() -> None:
    assert {"ruff", "eslint", "credo"} <= set(expanded_terms(["command", "ran", "linter"]))
    assert {"mypy", "tsc"} <= set(expanded_terms(["ran", "type", "check"]))
    assert "ngrok" in expanded_terms(["public", "url"])
    assert "amend" in expanded_terms(["reword", "commit"])
    assert expanded_terms(["kitchen", "walls"]) == ["kitchenwalls"]


def test_adjacent_words_give_the_compound_code_writes_whole() -> None:
    assert "filterwarnings" in text_query("Where did I set the filter warnings?")
    assert "filterwarnings" not in text_query("Where did I set the filter warnings?", expand=False)


def test_camel_cased_names_give_their_parts() -> None:
    assert code_terms('Edit {"file_path": "src/PaymentGateway.ts", "old_string": "getHTTPClient()"}') == (
        "payment gateway get http client"
    )
    assert code_terms("os.path.join filter_warnings README Hello") == ""


async def test_which_command_ran_the_linter_finds_the_ruff_call(store: MemoryStore) -> None:
    await say(store, "s1", "plan", "Next I will tidy the imports and then check everything.")
    await tool_pair(store, "s1", "lint", 'Bash {"command": "ruff check src/"}', "All checks passed!")
    await tool_pair(store, "s1", "ls", 'Bash {"command": "ls -la src/"}', "total 8\napp.py")
    await fill_search_texts(store)
    result = await grep_memories(store, "Which command ran the linter?", partition=P, mode="text", limit=3)
    assert result.hits, "the linter question found nothing"
    first = result.hits[0]
    assert {first.source_id, first.paired_source_id} == {"lint-call", "lint-result"}


async def test_a_camel_cased_name_is_found_by_its_part(store: MemoryStore) -> None:
    await tool_pair(
        store, "s1", "read", 'Read {"file_path": "src/PaymentGateway.ts"}', "export class PaymentGateway {}"
    )
    await tool_pair(store, "s1", "other", 'Read {"file_path": "src/orders.ts"}', "export const orders = []")
    await fill_search_texts(store)
    result = await grep_memories(store, "gateway", partition=P, mode="text", limit=5)
    assert [{hit.source_id, hit.paired_source_id} for hit in result.hits] == [{"read-call", "read-result"}]


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_hybrid_top_hits_do_not_depend_on_limit(store: MemoryStore, minilm: SentenceTransformerEmbedder) -> None:
    topics = ["deploy", "cache", "login", "schema", "billing", "search", "upload", "tests"]
    # Each message a different length, so that no two full-text scores tie.
    texts = [f"the {topics[n % 8]} step changed the {topics[(n + 3) % 8]} code" + " in detail" * n for n in range(40)]
    await store.append_messages(
        P, "s1", [NewMessage(role="assistant", content=text, message_id=f"m{n}") for n, text in enumerate(texts)]
    )
    await backfill_embeddings(store, minilm)
    weights = FusionWeights(candidates=6, text_candidates=4)
    query = "what changed in the cache code after the deploy"
    few = await hybrid_search(store, minilm, query, partition=P, limit=3, weights=weights)
    many = await hybrid_search(store, minilm, query, partition=P, limit=60, weights=weights)
    assert len(many) > len(few) == 3
    assert [hit.id for hit in many[:3]] == [hit.id for hit in few]
    assert len({hit.id for hit in many}) == len(many)


def test_a_thinking_block_ranks_below_the_act_it_restates_and_a_top_text_hit_stays_up() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    hits = {
        name: SearchHit(id=name, kind="message", thread_id="t", partition=P, score=score, snippet=name, created_at=when)
        for name, score in (("thought", 1.0), ("act", 1.0), ("second", 0.7), ("filler", 0.0), ("liked", 0.9))
    }
    refs = [
        MessageRef(id="thought", thread_id="t", partition=P, seq=1, role="assistant", metadata={"kind": "thinking"}),
        MessageRef(id="act", thread_id="t", partition=P, seq=10, role="assistant", metadata={"kind": "tool_use"}),
    ]
    text_hits = [hits["thought"], hits["act"], hits["second"], hits["filler"]]
    vector_hits = [
        hit.model_copy(update={"score": score})
        for hit, score in ((hits["liked"], 0.9), (hits["thought"], 0.85), (hits["act"], 0.8), (hits["filler"], 0.0))
    ]
    ranked = [hit.id for hit in fuse(text_hits, vector_hits, refs, "q", FusionWeights(neighbour=0.0))]
    assert ranked.index("act") < ranked.index("thought")
    assert ranked.index("second") < ranked.index("liked"), "the text index's third hit fell below a vector-only one"
    flat = FusionWeights(neighbour=0.0, text_top=0.0, thinking=1.0)
    plain = [hit.id for hit in fuse(text_hits, vector_hits, refs, "q", flat)]
    assert plain.index("liked") < plain.index("second") and plain.index("thought") < plain.index("act")
