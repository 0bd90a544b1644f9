"""Keeping the store's vectors up to date: new nodes in the background, the rest by backfill.

Appends must never wait for a model, so ``append_messages`` only hands the new ids to
the server's `EmbeddingQueue`, whose one task embeds them in batches once the append
has returned. Whatever it misses (the server stopped first, the embedder was down, the
messages came in through another process or before an embedder was configured) the
evolution tick's `backfill_embeddings` finds and embeds later, walking the store once
by id. `query_vector` is what a search needs before `MemoryStore.vector_search`. A tool
call or result is embedded as what it is about (`palimpsest.scheduler.search_text`),
its stored content unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.graph_schema.models import EmbeddingTodo, SearchKind
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler import paging
from palimpsest.scheduler.compaction import Pause
from palimpsest.scheduler.embedders import Embedder
from palimpsest.scheduler.pieces import pieces
from palimpsest.scheduler.search_text import search_texts

logger = logging.getLogger(__name__)

#: Nodes embedded at once: one model call and one store transaction.
EMBED_BATCH = 256
#: Ids waiting in a queue at most; past it new ids are left to the backfill.
MAX_PENDING = 100_000
#: Seconds a stopping queue keeps embedding what is pending before it gives up.
STOP_GRACE_SECONDS = 5.0
#: Nodes listed at a time while counting what a backfill has to do.
COUNT_PAGE = 4096

ALL_KINDS: tuple[SearchKind, ...] = ("message", "summary", "fact")


async def ensure_vectors(store: MemoryStore, embedder: Embedder) -> None:
    """Set the store's vector index up for this embedder's size and model (cheap once done).

    Raises:
        EmbeddingFailed: if the model cannot be loaded or the endpoint reached.
        Conflict: if the store holds vectors of another size.
    """
    await store.ensure_vector_index(await embedder.dimensions(), embedder.name)


async def query_vector(store: MemoryStore, embedder: Embedder, query: str) -> list[float]:
    """The vector of a search query, with the store ready to search with it.

    Call this, then ``store.vector_search(vector, ...)``: the two together are a
    semantic search.

    Raises:
        EmbeddingFailed: if the model cannot be loaded or the endpoint reached.
        Conflict: if the store holds vectors of another size.
    """
    await ensure_vectors(store, embedder)
    return await embedder.embed_query(query)


async def _embed(store: MemoryStore, embedder: Embedder, todo: Sequence[EmbeddingTodo]) -> int:
    """Embed a batch, tool calls and results by what they are about (`search_texts`), and store the vectors.

    A long text is embedded in windows (`pieces`), each a vector of its node. The derived
    texts are stored first (`MemoryStore.set_search_texts`): a tool message with a vector
    and no text beside it was then embedded from its raw content.
    """
    texts, derived = await search_texts(store, todo)
    await store.set_search_texts(derived)
    cut = [(item.id, piece) for item, text in zip(todo, texts, strict=True) for piece in pieces(text)]
    vectors = await embedder.embed([piece for _, piece in cut])
    items = [(node_id, vector) for (node_id, _), vector in zip(cut, vectors, strict=True)]
    return await store.set_embeddings(items, embedder.name)


async def embed_new(store: MemoryStore, embedder: Embedder, ids: Sequence[str]) -> int:
    """Embed those of ``ids`` (messages, summaries, facts) that have no vector yet.

    Already embedded ids cost nothing, so a re-sent transcript is not embedded twice.

    Returns:
        How many vectors were written.

    Raises:
        EmbeddingFailed: if the embedder fails; batches before it stay written.
    """
    await ensure_vectors(store, embedder)
    written = 0
    for start in range(0, len(ids), EMBED_BATCH):
        chunk = list(dict.fromkeys(ids[start : start + EMBED_BATCH]))
        todo = await store.missing_embeddings(None, ALL_KINDS, len(chunk), ids=chunk)
        if todo:
            written += await _embed(store, embedder, todo)
    return written


async def backfill_embeddings(
    store: MemoryStore,
    embedder: Embedder,
    *,
    batch: int = EMBED_BATCH,
    partition: str | None = None,
    pause: Pause | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Embed every node of the store (or one partition) that has no vector of this model.

    The evolution step of the maintenance loop: it walks the store by id once (a
    cursor, never a rescan), one batch per model call and transaction, awaiting
    ``pause`` between batches. Run it twice and the second run embeds nothing.
    With ``progress`` (``palimpsest maintain --once``'s bar), it first counts what is
    missing (one more walk, ids only kept) and then reports (written, total) after
    each batch; a node appended meanwhile can carry ``written`` past that total.

    Returns:
        How many vectors were written.

    Raises:
        EmbeddingFailed: if the embedder fails; batches before it stay written.
    """
    await ensure_vectors(store, embedder)
    total = 0
    if progress is not None:
        total = await paging.count(
            lambda after: store.missing_embeddings(partition, ALL_KINDS, COUNT_PAGE, after=after)
        )
        progress(0, total)
    written = 0
    async for todo in paging.walk(lambda after: store.missing_embeddings(partition, ALL_KINDS, batch, after=after)):
        written += await _embed(store, embedder, todo)
        if progress is not None:
            progress(written, max(total, written))
        if pause is not None:
            await pause()
    return written


class EmbeddingQueue:
    """One background task per server that embeds what was just appended, in batches.

    `submit` never blocks and never fails, so an append returns as soon as the store
    has its messages. The task takes up to ``batch`` pending ids at a time; a batch that
    fails is logged and left to the backfill.

    Args:
        store: The store the ids live in.
        embedder: Makes the vectors.
        batch: Ids embedded at once.
        pause: Awaited before each batch (yield to tool calls); None to go straight on.
    """

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        *,
        batch: int = EMBED_BATCH,
        pause: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.batch = batch
        self.pause = pause
        self._pending: dict[str, None] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._overflowed = False

    def submit(self, ids: Sequence[str]) -> None:
        """Queue ids for embedding and return at once; past `MAX_PENDING` they wait for the backfill."""
        room = MAX_PENDING - len(self._pending)
        if len(ids) > room and not self._overflowed:
            logger.warning("embedding queue full (%d ids): the backfill will embed the rest", MAX_PENDING)
            self._overflowed = True
        for node_id in ids[: max(room, 0)]:
            self._pending[node_id] = None
        if self._pending:
            self._idle.clear()
            self._wake.set()

    @property
    def pending(self) -> int:
        """Ids waiting to be embedded."""
        return len(self._pending)

    def start(self) -> None:
        """Start the task: it first sets the vector index up (loading the model), then drains the queue."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="palimpsest-embedding")

    async def drained(self) -> None:
        """Wait until every id submitted so far has been embedded (or given up on)."""
        await self._idle.wait()

    async def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """Embed what is pending for up to ``grace`` seconds, then end the task."""
        task, self._task = self._task, None
        if task is None:
            return
        if self._pending:
            try:
                await asyncio.wait_for(self.drained(), grace)
            except TimeoutError:
                logger.info("stopping with %d ids not embedded: the backfill will embed them", len(self._pending))
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    async def _run(self) -> None:
        try:
            await ensure_vectors(self.store, self.embedder)
        except PalimpsestError as exc:
            logger.warning("semantic search is not ready: %s", exc)
        while True:
            await self._wake.wait()
            while self._pending:
                if self.pause is not None:
                    await self.pause()
                chunk = list(self._pending)[: self.batch]
                await self._embed_chunk(chunk)
                for node_id in chunk:
                    self._pending.pop(node_id, None)
            self._overflowed = False
            self._wake.clear()
            self._idle.set()

    async def _embed_chunk(self, chunk: list[str]) -> None:
        try:
            await embed_new(self.store, self.embedder, chunk)
        except PalimpsestError as exc:
            logger.warning("could not embed %d new nodes (the backfill will retry): %s", len(chunk), exc)
        except Exception:  # noqa: BLE001 - the queue must outlive any one batch; the backfill retries it
            logger.exception("embedding %d new nodes failed (the backfill will retry)", len(chunk))
