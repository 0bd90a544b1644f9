"""What embedding long texts in pieces costs: vectors and embedding time, beside head-only embedding.

Run by hand (not a test)::

    .venv/bin/python bench/pieces.py --sessions DIR

A store of mixed messages: Claude Code transcripts (``*.jsonl`` in ``--sessions``, kept
outside the repository; ``bench/coding_questions.json`` names their sources) read by
``palimpsest.server.feeds.ingest.ingest_files`` into a fresh SQLite file: prompts and
replies, tool calls and their outputs, short and long. Its messages are embedded twice
by ``palimpsest.scheduler.embedding.backfill_embeddings`` with the built-in embedder,
each time into a fresh copy of the store: once with every text cut to its head (one
vector a message, as before pieces) and once in pieces
(``palimpsest.scheduler.pieces``), alternating over ``--rounds`` rounds. The table gives
the vectors written, the characters sent to the model and the seconds, with the ratio
of pieces to head-only: the same run, the same machine, so the ratio is what counts.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.models import MAX_EMBED_CHARS
from palimpsest.scheduler import embedding
from palimpsest.scheduler.embedders import DEFAULT_EMBEDDER, Embedder, make_embedder
from palimpsest.scheduler.pieces import pieces
from palimpsest.server.feeds.ingest import ingest_files

PARTITION = "bench"


class Counting:
    """The embedder, counting the texts and characters it is given."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.texts = 0
        self.chars = 0

    async def dimensions(self) -> int:
        return await self.inner.dimensions()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        self.chars += sum(map(len, texts))
        return await self.inner.embed(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.inner.embed_query(text)


def head_only(text: str) -> list[str]:
    """One window: the text as it was embedded before pieces (the model reads its start)."""
    return [text[:MAX_EMBED_CHARS]]


async def embed_copy(
    source: Path, directory: Path, embedder: Embedder, split: Callable[[str], list[str]]
) -> tuple[int, int, float]:
    """Embed a fresh copy of the store with ``split`` as the windowing; (vectors, chars, seconds)."""
    target = directory / f"copy-{time.monotonic_ns()}.db"
    shutil.copy(source, target)
    store = open_store(f"sqlite:///{target}")
    await store.initialize()
    counting = Counting(embedder)
    embedding.pieces = split
    try:
        start = time.perf_counter()
        await embedding.backfill_embeddings(store, counting)
        seconds = time.perf_counter() - start
    finally:
        embedding.pieces = pieces
        await store.close()
        target.unlink()
    return counting.texts, counting.chars, seconds


async def run(args: argparse.Namespace) -> Table:
    embedder = make_embedder(args.embedder)
    await embedder.dimensions()
    with tempfile.TemporaryDirectory(prefix="palimpsest-pieces-") as scratch:
        directory = Path(scratch)
        source = directory / "source.db"
        store = open_store(f"sqlite:///{source}")
        await store.initialize()
        report = await ingest_files(store, [args.sessions], partition=PARTITION, format="claude")
        messages = report.appended
        await store.close()
        results: dict[str, list[tuple[int, int, float]]] = {"head only": [], "pieces": []}
        for _ in range(args.rounds):
            results["head only"].append(await embed_copy(source, directory, embedder, head_only))
            results["pieces"].append(await embed_copy(source, directory, embedder, pieces))
    table = Table(title=f"Embedding {messages} messages of coding sessions (built-in embedder, best of {args.rounds})")
    for column in ("windowing", "vectors", "chars to the model", "seconds", "messages/s", "time vs head only"):
        table.add_column(column, justify="right")
    base = min(seconds for _, _, seconds in results["head only"])
    for name, rows in results.items():
        vectors, chars, _ = rows[0]
        best = min(seconds for _, _, seconds in rows)
        table.add_row(name, str(vectors), f"{chars:,}", f"{best:.1f}", f"{messages / best:.0f}", f"{best / base:.2f}x")
    return table


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=Path, required=True)
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    Console().print(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
