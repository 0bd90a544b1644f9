"""The embedders: the real all-MiniLM-L6-v2 (offline), OpenAI's client on a local endpoint, the spec parser.

The local model is the packaged copy, loaded once for the whole session by the
``minilm`` fixture (``tests/conftest.py``) with ``HF_HUB_OFFLINE=1``, so a test that
tried the network would fail.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.scheduler.embedders import (
    REMOTE_BATCH,
    REMOTE_MAX_CHARS,
    Embedder,
    EmbeddingFailed,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    make_embedder,
    packaged_model_path,
)
from palimpsest.server.settings import Settings
from tests.support.embeddings_endpoint import DIMENSIONS, EmbeddingsEndpoint, bag_of_words, serve_embeddings

MINILM = "all-MiniLM-L6-v2"


@pytest.fixture
def endpoint() -> Iterator[EmbeddingsEndpoint]:
    with serve_embeddings() as running:
        yield running


def norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# -- make_embedder ----------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["none", "", "  ", "None", "off"])
def test_no_embedder(spec: str) -> None:
    assert make_embedder(spec) is None


def test_specs_name_their_embedders() -> None:
    local = make_embedder(f"sentence-transformers:{MINILM}")
    assert isinstance(local, SentenceTransformerEmbedder)
    assert local.name == f"sentence-transformers:{MINILM}"
    path = make_embedder("sentence-transformers:/models/e5-small")
    assert isinstance(path, SentenceTransformerEmbedder) and path.model_name_or_path == "/models/e5-small"
    settings = Settings(
        store="sqlite:///:memory:", openai_base_url="http://127.0.0.1:9/v1", openai_api_key="sk-test", embedder="x"
    )
    remote = make_embedder("openai:text-embedding-3-small", settings.llm)
    assert isinstance(remote, OpenAIEmbedder)
    assert (remote.name, remote.base_url, remote.model) == (
        "openai:text-embedding-3-small",
        "http://127.0.0.1:9/v1",
        "text-embedding-3-small",
    )
    assert isinstance(local, Embedder) and isinstance(remote, Embedder)


@pytest.mark.parametrize("spec", ["bogus", "sentence-transformers:", "openai:", "openai: ", "cohere:embed-v3", ":x"])
def test_bad_specs_say_what_is_accepted(spec: str) -> None:
    with pytest.raises(InvalidInput, match="sentence-transformers:MODEL_OR_PATH") as caught:
        make_embedder(spec)
    assert repr(spec) in str(caught.value)


# -- the real local model ---------------------------------------------------------------


def test_the_packaged_model_is_installed() -> None:
    path = Path(packaged_model_path())
    assert (path / "model.safetensors").is_file()
    assert (path / "modules.json").is_file()


async def test_minilm_embeds_offline_normalised_and_by_meaning(minilm: SentenceTransformerEmbedder) -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert await minilm.dimensions() == 384
    stored, unrelated = await minilm.embed(
        ["the login tokens expire after fifteen minutes", "we painted the kitchen walls blue"]
    )
    query = await minilm.embed_query("how long until auth credentials time out")
    for vector in (stored, unrelated, query):
        assert len(vector) == 384
        assert norm(vector) == pytest.approx(1.0, abs=1e-5)
    assert dot(query, stored) > dot(query, unrelated) + 0.2
    assert await minilm.embed([]) == []


async def test_minilm_is_loaded_once_per_process(minilm: SentenceTransformerEmbedder) -> None:
    another = SentenceTransformerEmbedder(MINILM)
    assert another._load().model is minilm._load().model
    assert await another.embed(["same text"]) == await minilm.embed(["same text"])


async def test_minilm_cuts_huge_texts_to_its_window(minilm: SentenceTransformerEmbedder) -> None:
    head = "the deploy pipeline runs on every merge to main. "
    huge, short = await minilm.embed([head * 40_000, head * 40])
    # Past the model's 256-token window the text no longer matters.
    assert np.allclose(huge, short, atol=1e-5)


async def test_a_missing_local_model_fails_clearly(tmp_path: Path) -> None:
    embedder = SentenceTransformerEmbedder(str(tmp_path / "no-such-model"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        with pytest.raises(EmbeddingFailed, match="cannot load sentence-transformers model"):
            await embedder.embed(["anything"])


# -- an OpenAI-compatible endpoint ------------------------------------------------------


async def test_openai_embedder_batches_keeps_order_and_normalises(endpoint: EmbeddingsEndpoint) -> None:
    embedder = OpenAIEmbedder("nomic-embed-text", endpoint.base_url, "sk-local")
    endpoint.reverse = True
    texts = [f"text number {i} about deploys" for i in range(REMOTE_BATCH + 10)]

    vectors = await embedder.embed(texts)

    assert [len(batch) for batch in endpoint.inputs] == [REMOTE_BATCH, 10]
    assert endpoint.requests[0]["model"] == "nomic-embed-text"
    assert endpoint.requests[0]["authorization"] == "Bearer sk-local"
    for text, vector in zip(texts, vectors, strict=True):
        expected = np.asarray(bag_of_words(text))
        assert np.allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)
    assert await embedder.embed([]) == []


async def test_openai_embedder_learns_an_unknown_size_once(endpoint: EmbeddingsEndpoint) -> None:
    embedder = OpenAIEmbedder("nomic-embed-text", endpoint.base_url)
    assert await embedder.dimensions() == DIMENSIONS
    assert await embedder.dimensions() == DIMENSIONS
    assert len(endpoint.requests) == 1
    assert endpoint.requests[0]["authorization"] == "Bearer palimpsest-no-key"
    known = OpenAIEmbedder("text-embedding-3-small", endpoint.base_url)
    assert await known.dimensions() == 1536
    assert len(endpoint.requests) == 1


async def test_openai_embedder_sends_what_an_endpoint_accepts(endpoint: EmbeddingsEndpoint) -> None:
    embedder = OpenAIEmbedder("nomic-embed-text", endpoint.base_url)
    query = await embedder.embed_query("")
    await embedder.embed(["x" * (REMOTE_MAX_CHARS * 3)])
    assert endpoint.inputs == [[" "], ["x" * REMOTE_MAX_CHARS]]
    assert norm(query) == pytest.approx(1.0)


async def test_openai_embedder_failures_are_clear(endpoint: EmbeddingsEndpoint) -> None:
    embedder = OpenAIEmbedder("nomic-embed-text", endpoint.base_url, max_retries=0)
    endpoint.status = 500
    with pytest.raises(EmbeddingFailed, match="HTTP 500"):
        await embedder.embed(["a"])
    endpoint.status = 200
    endpoint.drop_one = True
    with pytest.raises(EmbeddingFailed, match="1 vectors for 2 texts"):
        await embedder.embed(["a", "b"])
    unreachable = OpenAIEmbedder("nomic-embed-text", "http://127.0.0.1:9/v1", max_retries=0, timeout=2)
    with pytest.raises(EmbeddingFailed, match="embeddings call failed"):
        await unreachable.embed_query("a")
