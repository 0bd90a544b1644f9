"""The default path, on both stores: no variable set gives the built-in embedder, and search catches up.

A user who installs Palimpsest and sets nothing gets semantic search: `Settings`'
default embedder is the built-in all-MiniLM-L6-v2. An old store (or a fresh one
whose messages the backfill has not reached) answers searches without a mode by text,
and says so; maintenance backfills the vectors, reporting progress; then the same
search answers by hybrid ranking and finds the paraphrase text search cannot. The
rest of the suite runs with ``PALIMPSEST_EMBEDDER=none`` (conftest); these tests unset it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import BuiltinEmbedder, EmbeddingFailed, OpenAIEmbedder, make_embedder
from palimpsest.scheduler.maintenance import Maintenance, evolution_steps
from palimpsest.scheduler.summarizers import make_summarizer
from palimpsest.server.cli.main import app
from palimpsest.server.retrieval.grep import grep_memories
from palimpsest.server.retrieval.recall import recall
from palimpsest.server.settings import Settings
from tests.support.jsonl import line, write_jsonl
from tests.support.semantic import DISTRACTORS, QUERY, STORED, P, seed


@pytest.fixture
def default_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment of a user who set no embedder."""
    monkeypatch.delenv("PALIMPSEST_EMBEDDER", raising=False)


def test_no_variable_gives_the_builtin_embedder(default_environment: None) -> None:
    settings = Settings(store="sqlite:///:memory:")
    assert settings.embedder == "builtin:all-MiniLM-L6-v2"
    embedder = make_embedder(settings.embedder, settings.llm)
    assert isinstance(embedder, BuiltinEmbedder)
    assert embedder.name == "sentence-transformers:all-MiniLM-L6-v2"
    assert make_embedder("none") is None


async def test_search_is_text_until_maintenance_backfills_then_hybrid(
    default_environment: None, store: MemoryStore
) -> None:
    settings = Settings(store="sqlite:///:memory:", scheduler=False, summary_model=None)
    embedder = make_embedder(settings.embedder, settings.llm)
    assert embedder is not None
    ids = await seed(store)
    stored_id = ids[2]

    before = await grep_memories(store, QUERY, partition=P, embedder=embedder)
    assert before.mode == "text"
    assert stored_id not in [hit.id for hit in before.hits], "no word of the query is in the stored message"
    assert (await recall(store, QUERY, partition=P, embedder=embedder)).mode == "text"

    heard: list[tuple[str, int, int]] = []
    steps = evolution_steps(store, embedder, facts=False, progress=lambda *event: heard.append(event))
    cycles = await Maintenance(store, settings.maintenance, make_summarizer(settings.llm), steps=steps).run_once()
    evolution = cycles["evolution"]
    assert evolution is not None and evolution.errors == []
    assert evolution.steps == {"search_text": 0, "embeddings": 5, "vector_upkeep": 0}
    assert [event for event in heard if event[0] == "embeddings"] == [("embeddings", 0, 5), ("embeddings", 5, 5)]

    after = await grep_memories(store, QUERY, partition=P, embedder=embedder)
    assert after.mode == "hybrid"
    assert after.hits[0].id == stored_id
    recalled = await recall(store, QUERY, partition=P, embedder=embedder)
    assert recalled.mode == "hybrid"
    assert recalled.messages[0].id == stored_id
    # Asked for text, it is text; with the embedder off, a search without a mode is text.
    assert (await grep_memories(store, QUERY, partition=P, mode="text", embedder=embedder)).mode == "text"
    assert (await grep_memories(store, QUERY, partition=P)).mode == "text"


def test_cli_default_path_maintain_backfills_and_grep_reports_its_mode(
    default_environment: None, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    records = [
        line("session-1", "assistant", text, message_id=f"m{i}")
        for i, text in enumerate([*DISTRACTORS[:2], STORED, *DISTRACTORS[2:]])
    ]
    path = write_jsonl(tmp_path / "chat.jsonl", records)
    runner = CliRunner()
    # An old store: its messages came in while the embedder was off.
    off = {"PALIMPSEST_STORE": url, "PALIMPSEST_PARTITION": None, "PALIMPSEST_EMBEDDER": "none"}
    assert runner.invoke(app, ["ingest", str(path)], env=off).exit_code == 0
    env = {"PALIMPSEST_STORE": url, "PALIMPSEST_PARTITION": None}

    before = runner.invoke(app, ["grep", QUERY, "--json"], env=env)
    assert before.exit_code == 0, before.output
    assert json.loads(before.stdout)["mode"] == "text"

    maintained = runner.invoke(app, ["maintain", "--once", "--json"], env=env)
    assert maintained.exit_code == 0, maintained.output
    assert json.loads(maintained.stdout)["evolution"]["steps"]["embeddings"] == 5

    after = runner.invoke(app, ["grep", QUERY, "--json", "--limit", "1"], env=env)
    assert after.exit_code == 0, after.output
    result = json.loads(after.stdout)
    assert result["mode"] == "hybrid"
    assert [(hit["source_id"], hit["snippet"]) for hit in result["hits"]] == [("m2", STORED)]
    plain = runner.invoke(app, ["grep", QUERY], env=env)
    assert "mode: hybrid" in plain.stderr
    recalled = runner.invoke(app, ["recall", QUERY, "--json"], env=env)
    assert recalled.exit_code == 0, recalled.output
    assert json.loads(recalled.stdout)["mode"] == "hybrid"
    assert "mode: hybrid" in runner.invoke(app, ["recall", QUERY], env=env).stderr


async def test_a_failing_embedder_leaves_searches_without_a_mode_on_text(store: MemoryStore) -> None:
    ids = await seed(store)
    down = OpenAIEmbedder("text-embedding-3-small", "http://127.0.0.1:9/v1", max_retries=0)
    found = await grep_memories(store, "linter before committing", partition=P, embedder=down)
    assert found.mode == "text"
    assert [hit.id for hit in found.hits] == [ids[3]]
    with pytest.raises(EmbeddingFailed):
        await grep_memories(store, "linter before committing", partition=P, mode="hybrid", embedder=down)
