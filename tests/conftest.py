"""Fixtures shared by every test: one ``store`` fixture parametrized over both backends.

The Neo4j half runs against the real server `make test` starts and names in
``NEO4J_TEST_URI`` (one per pytest-xdist worker: `tests.support.stores.neo4j_test_uri`).
It is never skipped: without that variable the test fails with a message saying how to
start one (a missing service is a failure, in CI and here).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.store import MemoryStore
from tests.support.stores import BACKENDS, store_uri, wipe_neo4j

if TYPE_CHECKING:
    from palimpsest.scheduler.embedders import SentenceTransformerEmbedder


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The name of the backend under test."""
    return request.param


@pytest.fixture
async def store_url(backend: str, tmp_path: Path) -> str:
    """A URI to a fresh, empty store of the backend under test."""
    uri = store_uri(backend, tmp_path)
    if backend == "neo4j":
        await wipe_neo4j(uri)
    return uri


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[MemoryStore]:
    """An initialized, empty store of the backend under test."""
    opened = open_store(store_url, Neo4jCredentials())
    await opened.initialize()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(autouse=True)
def no_hook_follow_ups(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook a test runs leaves no detached follow-up behind, to write into the next test's store.

    The tests of the follow-up itself turn it back on and wait for it to end.
    """
    monkeypatch.setenv("PALIMPSEST_HOOK_FOLLOW_UP", "off")


@pytest.fixture(autouse=True)
def hooks_store_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook a test runs stores its turn before it returns, as the tests read the store right after.

    The tests of the queued default (``tests/server/cli/test_hook_queue.py``) turn it back on.
    """
    monkeypatch.setenv("PALIMPSEST_HOOK_QUEUE", "off")


@pytest.fixture(autouse=True)
def no_real_model_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach a real model: any call not aimed at a test's own endpoint is refused.

    A developer's ``OPENAI_*`` variables are dropped and the default endpoint points at a
    closed loopback port; tests that exercise the LLM or embeddings path start a local
    endpoint and pass its URL explicitly. Hugging Face's hub is switched off too, and
    the embedder is none unless a test sets one.
    """
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("PALIMPSEST_SUMMARY_MODEL", raising=False)
    # The default embedder is the built-in model: every test that does not ask for one
    # runs without, so the suite does not embed each store it fills; tests of the
    # default itself (test_default_embedder.py) unset this.
    monkeypatch.setenv("PALIMPSEST_EMBEDDER", "none")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def minilm() -> Iterator[SentenceTransformerEmbedder]:
    """The real all-MiniLM-L6-v2 (the packaged copy), Hugging Face's hub switched off.

    Session-scoped, and the process keeps one loaded copy whichever embedder loads it,
    so the model loads once per test run; semantic tests never use a fake.
    """
    from palimpsest.scheduler.embedders import SentenceTransformerEmbedder

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        yield SentenceTransformerEmbedder("all-MiniLM-L6-v2")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that runs against Neo4j, so ``-m "not neo4j"`` can leave them out."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "neo4j":
            item.add_marker(pytest.mark.neo4j)
