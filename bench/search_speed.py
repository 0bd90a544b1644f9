"""Search latency: ``grep_memories`` p50/p95 in text and hybrid mode at 100k and 1M messages,
and the cold first semantic search of a fresh process.

Run by hand (not a test)::

    .venv/bin/python bench/search_speed.py --sizes 100000 --neo4j-uri bolt://127.0.0.1:7687
    .venv/bin/python bench/search_speed.py --sizes 100000,1000000 --stores sqlite

For each store and size it generates a realistic memory: coding-agent threads of 200
messages (user questions, assistant answers, tool output) whose words follow a Zipf law
over a technical vocabulary plus many rare identifiers, a speaker in the metadata of
some, written in bulk with the store's own ``append_messages`` (``MAX_BATCH`` messages a
call). Every message then gets a vector through ``set_embeddings`` under the real
embedder's name: the real all-MiniLM-L6-v2 vector of the sentence the message was built
around, plus a little noise, since embedding a million messages on a laptop would take
hours while the search only needs vectors that cluster as real ones do. The queries are
embedded by the real model, inside the timed call, as a user's would be. With ``--keep
DIR`` the SQLite files stay in DIR and a store that already holds the size asked for is
searched as it is (Neo4j too), so a change to the search can be measured again without
filling a million messages each time.

Cold start: before the timed calls, a fresh Python process opens the store and runs one
semantic search (``vector_search`` with a query vector embedded beforehand, so the
model's load is not counted), beside a baseline in the same run: a fresh process that
opens the store and runs one text search. On SQLite each runs twice: once with its vector
files dropped from the page cache first (``posix_fadvise``: only those files, nothing
else on the machine), as after a reboot, and once with them cached, as after an
earlier process. On SQLite the table also shows the recall at 200 of the coarse
partition (``graph_schema/sqlite/vector_file.py``) against an exact scan of the same
files, for the benchmark's questions.

Each query runs once to warm up, then ``--runs`` timed calls of
``palimpsest.server.retrieval.grep.grep_memories`` per mode (the function the MCP tool calls, ``covered_by``
included) over the whole partition. Goals: text p95 < 50 ms at 1M, hybrid p95 < 150 ms
at 100k and < 100 ms at 1M, the cold first semantic search < 1 s at 1M. Neo4j's data is
wiped first: point ``--neo4j-uri`` at a throwaway server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.models import MAX_BATCH, NewMessage, Role
from palimpsest.graph_schema.sqlite.vector_file import VectorFiles, cache_directory
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import Embedder, make_embedder
from palimpsest.scheduler.embedding import ensure_vectors
from palimpsest.server.retrieval.grep import grep_memories

PARTITION = "bench"
THREAD_SIZE = 200
GOALS = {
    ("text", 1_000_000): 50.0,
    ("hybrid", 100_000): 150.0,
    ("hybrid", 1_000_000): 100.0,
    ("cold semantic, files not cached", 1_000_000): 1000.0,
    ("cold semantic, files cached", 1_000_000): 1000.0,
    ("cold semantic, server", 1_000_000): 1000.0,
}
#: Questions whose exact top 200 the coarse partition's recall is measured against.
RECALL_AT = 200
_NEO4J_WIPE = "MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"
SUBJECTS = (
    "the login test",
    "the auth service",
    "the refresh token",
    "the database migration",
    "the deploy script",
    "the cache layer",
    "the websocket handler",
    "the CI pipeline",
    "the payment webhook",
    "the search index",
    "the rate limiter",
    "the config loader",
    "the docker image",
    "the release branch",
    "the logging setup",
    "the session store",
    "the API gateway",
    "the frontend build",
    "the cron job",
    "the email worker",
)
VERBS = (
    "fails after",
    "was refactored for",
    "times out during",
    "uses",
    "was migrated to",
    "breaks on",
    "needs a fix for",
    "was configured with",
    "depends on",
    "was rewritten around",
    "crashes with",
    "got slower after",
    "now implements",
    "should switch to",
    "stopped working with",
)
OBJECTS = (
    "the new Postgres schema",
    "Redis sentinel",
    "JWT rotation",
    "Python 3.12",
    "the Neo4j driver",
    "pytest fixtures",
    "alembic revisions",
    "a Kubernetes liveness probe",
    "the OpenAI client",
    "SQLite WAL mode",
    "asyncio task groups",
    "a retry with backoff",
    "the S3 bucket policy",
    "feature flags",
    "the GraphQL resolver",
    "a missing environment variable",
    "gzip compression",
    "utf-8 decoding",
    "the staging certificate",
    "connection pooling",
)
FILLER = (
    "so we should check it again tomorrow and then rerun the whole suite before merging "
    "because the last change touched several modules and the error only shows under load "
    "let me look at the traceback first then patch the handler and add a regression test "
    "the output below shows the failing assertion and the values it compared"
).split()
SPEAKERS = ("alice", "bob", "carol", "dave")
QUESTIONS = (
    "why does the login test fail after the migration",
    "what did we decide about Redis sentinel",
    "how was the refresh token rotation configured",
    "which Python version does the CI pipeline use",
    "when did the deploy script start timing out",
    "what broke the websocket handler",
    "did alice fix the payment webhook",
    "how do we retry the email worker with backoff",
    "what is wrong with the staging certificate",
    "where is the connection pooling set up",
    "why is the search index slower",
    "what did bob say about feature flags",
)


@dataclass
class Timing:
    """One store, size and mode: latencies of every timed call, in milliseconds."""

    store: str
    size: int
    mode: str
    millis: list[float]

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.millis, q))


def sentences(seed: int = 11) -> list[str]:
    """Every subject-verb-object sentence messages are built around, shuffled."""
    found = [f"{subject} {verb} {obj}" for subject in SUBJECTS for verb in VERBS for obj in OBJECTS]
    random.Random(seed).shuffle(found)
    return found


def vocabulary(size: int = 20_000, seed: int = 13) -> list[str]:
    """Rare identifiers (function names, hashes, paths) that make the index's long tail."""
    rng = random.Random(seed)
    stems = ("get", "set", "load", "parse", "build", "check", "sync", "fetch", "render", "flush")
    nouns = ("user", "token", "row", "cache", "page", "queue", "file", "job", "node", "key")
    words: list[str] = []
    for index in range(size):
        kind = index % 3
        if kind == 0:
            words.append(f"{rng.choice(stems)}_{rng.choice(nouns)}_{index}")
        elif kind == 1:
            words.append(f"src/{rng.choice(nouns)}s/{rng.choice(stems)}{index}.py")
        else:
            words.append(f"{rng.getrandbits(32):08x}")
    return words


def generate(size: int, base: list[str], rare: list[str], seed: int = 17) -> list[tuple[int, NewMessage]]:
    """``size`` messages in threads of ``THREAD_SIZE``: (sentence index, message) pairs."""
    rng = random.Random(seed)
    weights = 1.0 / np.arange(1, len(rare) + 1)
    cumulative = np.cumsum(weights / weights.sum())
    start = datetime(2025, 1, 1, tzinfo=UTC)
    roles = (Role.user, Role.assistant, Role.assistant, Role.tool)
    out: list[tuple[int, NewMessage]] = []
    for index in range(size):
        sentence = rng.randrange(len(base))
        draws = [rng.random() for _ in range(rng.randint(1, 6))]
        rare_words = [rare[int(i)] for i in np.searchsorted(cumulative, draws)]
        filler = rng.sample(FILLER, rng.randint(8, 30))
        words = [base[sentence], *filler[: len(filler) // 2], *rare_words, *filler[len(filler) // 2 :]]
        role = roles[index % len(roles)]
        metadata = {"speaker": SPEAKERS[(index // THREAD_SIZE) % len(SPEAKERS)]} if role == Role.user else {}
        content = " ".join(words)
        if role == Role.tool:
            content = f"$ pytest -q\nFAILED tests/test_{rare_words[0][:20]}.py - {content}\n" * rng.randint(1, 4)
        message = NewMessage(role=role, content=content, created_at=start + timedelta(seconds=index), metadata=metadata)
        out.append((sentence, message))
    return out


async def fill(
    store: MemoryStore, embedder: Embedder, size: int, base: list[str], base_vectors: np.ndarray, console: Console
) -> float:
    """Generate and write ``size`` messages with their vectors; seconds taken."""
    started = time.perf_counter()
    messages = generate(size, base, vocabulary())
    await ensure_vectors(store, embedder)
    rng = np.random.default_rng(5)
    for offset in range(0, size, THREAD_SIZE):
        chunk = messages[offset : offset + THREAD_SIZE]
        thread = f"thread-{offset // THREAD_SIZE:06d}"
        for start in range(0, len(chunk), MAX_BATCH):
            part = chunk[start : start + MAX_BATCH]
            result = await store.append_messages(PARTITION, thread, [message for _, message in part])
            noise = rng.normal(0, 0.02, (len(part), base_vectors.shape[1]))
            noisy = base_vectors[[sentence for sentence, _ in part]] + noise
            await store.set_embeddings(list(zip(result.message_ids, noisy.tolist(), strict=True)), embedder.name)
        if (offset // THREAD_SIZE) % 100 == 0:
            console.print(f"  {offset + len(chunk)} / {size} messages ({time.perf_counter() - started:.0f} s)")
    return time.perf_counter() - started


async def measure(store: MemoryStore, embedder: Embedder, mode: str, runs: int) -> list[float]:
    """Milliseconds of each timed ``grep_memories`` call, after one warm-up per query."""
    for question in QUESTIONS:
        await grep_memories(store, question, partition=PARTITION, mode=mode, embedder=embedder)
    millis: list[float] = []
    for run in range(runs):
        question = QUESTIONS[run % len(QUESTIONS)]
        started = time.perf_counter()
        await grep_memories(store, question, partition=PARTITION, mode=mode, embedder=embedder)
        millis.append(1000 * (time.perf_counter() - started))
    return millis


def evict_vector_files(url: str) -> None:
    """Drop SQLite's vector files (only those) from the page cache, as a reboot would."""
    if not url.startswith("sqlite:///"):
        return
    for path in cache_directory(url.removeprefix("sqlite:///")).glob("*"):
        with open(path, "rb") as handle:
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def cold_search(url: str, model: str, vector: list[float], question: str) -> dict[str, float]:
    """A fresh process opens the store and runs one text search, another one semantic search: ms each."""
    timings: dict[str, float] = {}
    for mode in ("text", "semantic"):
        spec = {"url": url, "model": model, "vector": vector, "question": question, "mode": mode}
        done = subprocess.run(
            [sys.executable, __file__, "--probe", json.dumps(spec)], capture_output=True, text=True, check=True
        )
        timings[mode] = json.loads(done.stdout.strip().splitlines()[-1])["ms"]
    return timings


async def probe(spec: dict[str, object]) -> float:
    """In a fresh process: open the store, search once; milliseconds from before the open."""
    started = time.perf_counter()
    store = open_store(str(spec["url"]), Neo4jCredentials())
    await store.initialize()
    try:
        vector = [float(value) for value in spec["vector"]]  # type: ignore[attr-defined]
        await store.ensure_vector_index(len(vector), str(spec["model"]))
        if spec["mode"] == "semantic":
            hits = await store.vector_search(vector, partition=PARTITION, limit=200)
        else:
            hits = await store.search_text(str(spec["question"]), partition=PARTITION, limit=100)
        if not hits:
            raise SystemExit(f"the {spec['mode']} probe found nothing")
    finally:
        await store.close()
    return 1000 * (time.perf_counter() - started)


async def coarse_recall(directory: Path, size: int, model: str, queries: np.ndarray) -> float | None:
    """Mean share of the exact top `RECALL_AT` that SQLite's coarse partition returns."""
    files = VectorFiles(cache_directory(str(directory / f"speed-{size}.db")), model, queries.shape[1])
    header = files.header()
    if header is None:
        return None
    mapped = files.map(header)
    shares: list[float] = []
    for query in queries:
        asked = {"kinds": ("message", "summary"), "partition": PARTITION, "thread_id": None}
        window = {"since_us": None, "until_us": None, "limit": RECALL_AT}
        exact = {pk for pk, _ in mapped.nearest(query, **asked, **window, exact=True)}  # type: ignore[arg-type]
        found = {pk for pk, _ in mapped.nearest(query, **asked, **window)}  # type: ignore[arg-type]
        shares.append(len(exact & found) / max(len(exact), 1))
    return float(np.mean(shares))


async def open_filled(kind: str, size: int, neo4j_uri: str | None, directory: Path) -> tuple[MemoryStore, bool]:
    """A store of ``kind`` and whether it already holds ``size`` messages (else it is emptied)."""
    if kind == "neo4j" and neo4j_uri is None:
        raise SystemExit("--stores neo4j needs --neo4j-uri")
    url = neo4j_uri if kind == "neo4j" else f"sqlite:///{directory / f'speed-{size}.db'}"
    store = open_store(url, Neo4jCredentials())
    await store.initialize()
    if (await store.stats(PARTITION)).messages == size:
        return store, True
    await store.close()
    if kind == "neo4j":
        import neo4j

        async with neo4j.AsyncGraphDatabase.driver(neo4j_uri, auth=None) as driver:
            async with driver.session() as session:
                await (await session.run(_NEO4J_WIPE)).consume()
    else:
        for leftover in directory.glob(f"speed-{size}.db*"):
            if leftover.is_dir():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
    store = open_store(url, Neo4jCredentials())
    await store.initialize()
    return store, False


async def run(args: argparse.Namespace, console: Console) -> tuple[list[Timing], dict[tuple[str, int], float]]:
    embedder = make_embedder(args.embedder)
    if embedder is None:
        raise SystemExit("--embedder must name a model: hybrid mode needs one")
    base = sentences()
    console.print(f"embedding the {len(base)} sentences messages are built around")
    base_vectors = np.asarray(await embedder.embed(base), dtype=np.float32)
    query_vectors = np.asarray(await embedder.embed(list(QUESTIONS)), dtype=np.float32)
    query_vectors /= np.linalg.norm(query_vectors, axis=1, keepdims=True)
    timings: list[Timing] = []
    recalls: dict[tuple[str, int], float] = {}
    with contextlib.ExitStack() as stack:
        if args.keep is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="palimpsest-speed-")))
        else:
            directory = args.keep
            directory.mkdir(parents=True, exist_ok=True)
        for kind in args.stores:
            for size in args.sizes:
                store, filled = await open_filled(kind, size, args.neo4j_uri, directory)
                try:
                    if filled:
                        console.print(f"{kind}, {size} messages: kept from an earlier run; searching")
                    else:
                        console.print(f"{kind}, {size} messages: filling")
                        seconds = await fill(store, embedder, size, base, base_vectors, console)
                        console.print(f"  filled in {seconds:.0f} s; searching")
                    url = args.neo4j_uri if kind == "neo4j" else f"sqlite:///{directory / f'speed-{size}.db'}"
                    # Writes laid the vector files out; upkeep (maintenance's vector_upkeep step)
                    # files them into cells, as the evolution tick would after a fill.
                    await ensure_vectors(store, embedder)
                    started = time.perf_counter()
                    await store.maintain_vectors()
                    console.print(f"  vector upkeep: {time.perf_counter() - started:.1f} s")
                    started = time.perf_counter()
                    await store.vector_search(query_vectors[0].tolist(), partition=PARTITION, limit=1)
                    console.print(f"  first search in this process: {time.perf_counter() - started:.1f} s")
                    await store.close()
                    # Neo4j keeps its vectors in the server: no files of ours to drop from the cache.
                    for cached in (False, True) if kind == "sqlite" else (True,):
                        if not cached:
                            evict_vector_files(url)
                        cold = cold_search(url, embedder.name, query_vectors[0].tolist(), QUESTIONS[0])
                        label = ("files cached" if cached else "files not cached") if kind == "sqlite" else "server"
                        for mode in ("text", "semantic"):
                            timings.append(Timing(kind, size, f"cold {mode}, {label}", [cold[mode]]))
                        console.print(
                            f"  fresh process, {label}: text {cold['text']:.0f} ms, semantic {cold['semantic']:.0f} ms"
                        )
                    if kind == "sqlite":
                        recall = await coarse_recall(directory, size, embedder.name, query_vectors)
                        if recall is not None:
                            recalls[(kind, size)] = recall
                            console.print(f"  coarse partition recall@{RECALL_AT} vs exact: {recall:.3f}")
                    store = open_store(url, Neo4jCredentials())
                    await store.initialize()
                    for mode in args.modes:
                        timings.append(Timing(kind, size, mode, await measure(store, embedder, mode, args.runs)))
                        latest = timings[-1]
                        p50, p95 = latest.percentile(50), latest.percentile(95)
                        console.print(f"  {mode}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
                finally:
                    await store.close()
    return timings, recalls


def render(timings: Sequence[Timing], runs: int, recalls: dict[tuple[str, int], float]) -> Table:
    table = Table(
        title=f"grep_memories latency, {runs} calls per row after warm-up (ms); cold: one fresh process "
        f"(open + one search, one call, p50 = p95); SQLite's coarse recall@{RECALL_AT} vs exact in the last column"
    )
    for column in ("store", "messages", "mode", "p50", "p95", "goal", "recall"):
        table.add_column(column, justify="right" if column in ("messages", "p50", "p95", "recall") else "left")
    for timing in timings:
        recall = recalls.get((timing.store, timing.size)) if timing.mode == "hybrid" else None
        goal = GOALS.get((timing.mode, timing.size))
        verdict = "" if goal is None else f"p95 < {goal:g}: {'met' if timing.percentile(95) < goal else 'NOT met'}"
        table.add_row(
            timing.store, f"{timing.size:,}", timing.mode,
            f"{timing.percentile(50):.1f}", f"{timing.percentile(95):.1f}", verdict,
            "" if recall is None else f"{recall:.3f}",
        )  # fmt: skip
    return table


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated message counts")
    parser.add_argument("--stores", default="sqlite,neo4j", help="comma-separated: sqlite, neo4j")
    parser.add_argument("--neo4j-uri", default=os.environ.get("NEO4J_URI"), help="bolt://HOST:PORT (wiped)")
    parser.add_argument("--modes", default="text,hybrid", help="comma-separated grep_memories modes")
    parser.add_argument("--runs", type=int, default=120, help="timed calls per store, size and mode")
    parser.add_argument("--embedder", default="builtin:all-MiniLM-L6-v2", help="PALIMPSEST_EMBEDDER spec")
    parser.add_argument("--keep", type=Path, default=None, help="keep filled stores here and reuse them")
    parser.add_argument("--probe", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    args.stores = [store.strip() for store in args.stores.split(",") if store.strip()]
    args.modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    return args


def main(argv: Sequence[str] | None = None) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.getLogger("neo4j").setLevel(logging.ERROR)
    args = parse_args(argv)
    if args.probe is not None:
        print(json.dumps({"ms": asyncio.run(probe(json.loads(args.probe)))}))
        return
    console = Console(width=max(Console().width, 120))
    timings, recalls = asyncio.run(run(args, console))
    console.print(render(timings, args.runs, recalls))


if __name__ == "__main__":
    main()
