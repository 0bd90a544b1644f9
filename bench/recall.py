"""Retrieval quality: evidence recall@k of every ``grep_memories`` mode on LoCoMo, with baselines.

Run by hand (not a test)::

    .venv/bin/python bench/recall.py                       # SQLite, every question
    .venv/bin/python bench/recall.py --store neo4j --neo4j-uri bolt://127.0.0.1:7687
    .venv/bin/python bench/recall.py --limit-questions 20 --modes hybrid

Data: the LoCoMo development split (``--data``, by default
``../shared/data/locomo/locomo-dev.json`` beside the repository; it is never copied into
it). Each conversation is stored twice, in each layout (``--layouts``): ``metadata`` (the
content as spoken, the speaker in ``metadata``, the session's date as ``created_at``) and
``content`` (``Speaker: text`` as the content, no metadata names, no dates), each in its
own store (a fresh SQLite file, or an emptied Neo4j database), through the real path: a
JSONL file, one thread per session, ``message_id`` = the turn's ``dia_id``, read by
``palimpsest.server.feeds.ingest.ingest_files``, then embedded by
``palimpsest.scheduler.embedding.backfill_embeddings`` with the real embedder. Each
question of categories 1-4 is sent to ``palimpsest.server.retrieval.grep.grep_memories``
(the function the MCP tool calls) in each mode, and the hits' ``source_id`` (the
``dia_id``) are compared with the question's evidence.

Held-out discipline: the first ``TUNING_CONVERSATIONS`` conversations are the tuning
half, on which every weight of ``palimpsest.server.retrieval.hybrid`` is chosen; the rest
are the checking half, only reported. A change that helps tuning and hurts checking is
not taken.

The metric (the split's README): evidence recall@k, the share of a question's evidence
turns among the top k hits, averaged over the questions. Baselines, computed in the same
run over the same stored texts: plain BM25 (``rank-bm25``, lower-cased words), plain
dense all-MiniLM-L6-v2 (the same embedder, cosine over every turn) and naive reciprocal
rank fusion of the two (k = 60). ``--ablations`` adds hybrid with one refinement removed
at a time (``palimpsest.server.retrieval.hybrid.FusionWeights``), to show what each is
worth.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import Embedder, make_embedder
from palimpsest.scheduler.embedding import backfill_embeddings
from palimpsest.server.feeds.ingest import ingest_files
from palimpsest.server.retrieval.grep import grep_memories
from palimpsest.server.retrieval.hybrid import DEFAULT_WEIGHTS, FusionWeights, hybrid_search

KS = (1, 5, 10, 25)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
PARTITION = "locomo"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
MODES = ("text", "semantic", "hybrid")
#: How the same conversation is written: names in metadata and dates as ``created_at``,
#: or names in the content (``Speaker: text``) with neither (`write_jsonl`).
LAYOUTS = ("metadata", "content")
#: Weights are chosen on the tuning half and reported on the checking half, never tuned there.
HALVES = ("tuning", "checking")
#: The first this many conversations of the split are the tuning half.
TUNING_CONVERSATIONS = 3
#: Where ``--keep`` keeps the vectors of the texts and questions.
EMBEDDING_CACHE = "embeddings.json"
RRF_K = 60
_WORD = re.compile(r"\w+")
_EVIDENCE = re.compile(r"D(\d+):(\d+)$")
_NEO4J_WIPE = "MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"
ABLATIONS: dict[str, FusionWeights] = {
    "hybrid - query cleanup": FusionWeights(clean_query=False),
    "hybrid - metadata names": FusionWeights(metadata=0.0),
    "hybrid - neighbours": FusionWeights(neighbour=0.0),
    "hybrid - both context steps": FusionWeights(metadata=0.0, neighbour=0.0),
    "hybrid - time signals": FusionWeights(written_time=0.0, created_in_period=0.0),
    "hybrid, 50 candidates each": FusionWeights(candidates=50, text_candidates=50),
    "hybrid, 200 text candidates": FusionWeights(text_candidates=200),
    "hybrid, 200 vector candidates": FusionWeights(candidates=200),
}


@dataclass
class Turn:
    """One turn of a conversation, as the bench writes it to JSONL."""

    dia_id: str
    session: int
    speaker: str
    content: str
    created_at: datetime


@dataclass
class Question:
    """One question of categories 1-4 with its evidence turn ids (normalised)."""

    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    """One LoCoMo sample: its turns in order and its questions."""

    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]


@dataclass
class Scores:
    """Recall of one method: per k, per category, the questions' recalls."""

    recalls: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)

    def add(self, question: Question, ranked: Sequence[str], seconds: float | None = None) -> None:
        """Record one question's ranked dia_ids (best first)."""
        wanted = set(question.evidence)
        for k in KS:
            top = set(ranked[:k])
            recall = len(wanted & top) / len(wanted) if wanted else 0.0
            self.recalls.setdefault((question.category, k), []).append(recall)
        if seconds is not None:
            self.seconds.append(seconds)

    def overall(self, k: int) -> float:
        """Recall@k over every question, in percent."""
        values = [value for (_, at), items in self.recalls.items() if at == k for value in items]
        return 100 * float(np.mean(values)) if values else float("nan")

    def category(self, category: int, k: int) -> float:
        """Recall@k over one category's questions, in percent."""
        values = self.recalls.get((category, k), [])
        return 100 * float(np.mean(values)) if values else float("nan")


def normalise_evidence(raw: Sequence[str]) -> list[str]:
    """Evidence ids as ``D<session>:<turn>``, malformed ones split and zero-stripped."""
    found: list[str] = []
    for item in raw:
        for part in re.split(r"[;\s]+", item):
            match = _EVIDENCE.match(part.strip())
            if match:
                found.append(f"D{int(match.group(1))}:{int(match.group(2))}")
    return list(dict.fromkeys(found))


def session_time(text: str) -> datetime:
    """``1:56 pm on 8 May, 2023`` as an aware datetime (UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(path: Path, limit_questions: int | None) -> list[Conversation]:
    """The split's conversations with their category 1-4 questions."""
    conversations: list[Conversation] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        talk = sample["conversation"]
        turns: list[Turn] = []
        session = 1
        while f"session_{session}" in talk:
            start = session_time(talk[f"session_{session}_date_time"])
            for index, turn in enumerate(talk[f"session_{session}"]):
                content = turn["text"]
                if turn.get("blip_caption"):
                    content += f" [shares {turn['blip_caption']}]"
                moment = start + timedelta(seconds=index)
                turns.append(Turn(turn["dia_id"], session, turn["speaker"], content, moment))
            session += 1
        questions = [
            Question(item["question"], item["category"], normalise_evidence(item["evidence"]))
            for item in sample["qa"]
            if item["category"] in CATEGORIES
        ]
        if limit_questions is not None:
            questions = questions[:limit_questions]
        speakers = (talk["speaker_a"], talk["speaker_b"])
        conversations.append(Conversation(sample["sample_id"], speakers, turns, questions))
    return conversations


def write_jsonl(conversation: Conversation, layout: str, directory: Path) -> Path:
    """The conversation as Palimpsest's JSONL, one thread per session, in one layout.

    ``metadata``: the content as spoken, the speaker in metadata, the session's date as
    ``created_at``. ``content``: ``Speaker: text`` as the content, no metadata and no
    dates (the store stamps the ingest time), as a plain transcript would be written.
    """
    path = directory / f"{conversation.sample_id}-{layout}.jsonl"
    texts = stored_texts(conversation, layout)
    with path.open("w", encoding="utf-8") as handle:
        for turn, content in zip(conversation.turns, texts, strict=True):
            line: dict[str, object] = {
                "thread_id": f"{conversation.sample_id}-session-{turn.session}",
                "role": "user" if turn.speaker == conversation.speakers[0] else "assistant",
                "content": content,
                "message_id": turn.dia_id,
                "project": conversation.sample_id,
            }
            if layout == "metadata":
                line["created_at"] = turn.created_at.isoformat()
                line["metadata"] = {"speaker": turn.speaker}
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    return path


async def empty_neo4j(uri: str) -> None:
    """Delete every node of the bench's Neo4j database (its indexes stay)."""
    import neo4j

    async with neo4j.AsyncGraphDatabase.driver(uri, auth=None) as driver:
        # CALL ... IN TRANSACTIONS needs an implicit transaction: a session's run, not execute_query.
        async with driver.session() as session:
            await (await session.run(_NEO4J_WIPE)).consume()


async def open_conversation_store(kind: str, neo4j_uri: str | None, directory: Path, name: str) -> MemoryStore:
    """A fresh, empty store for one conversation (or the SQLite file ``--keep`` kept)."""
    if kind == "neo4j":
        if neo4j_uri is None:
            raise SystemExit("--store neo4j needs --neo4j-uri")
        await empty_neo4j(neo4j_uri)
        store = open_store(neo4j_uri, Neo4jCredentials())
    else:
        store = open_store(f"sqlite:///{directory / (name + '.db')}")
    await store.initialize()
    return store


def stored_texts(conversation: Conversation, layout: str) -> list[str]:
    """Each turn's content as the layout stores it (``Speaker: text`` in the content layout)."""
    if layout == "content":
        return [f"{turn.speaker}: {turn.content}" for turn in conversation.turns]
    return [turn.content for turn in conversation.turns]


def bm25_ranker(texts: Sequence[str], ids: Sequence[str]) -> Callable[[str], list[str]]:
    """Plain BM25 (rank-bm25's Okapi) over the stored texts, lower-cased words."""
    from rank_bm25 import BM25Okapi

    index = BM25Okapi([_WORD.findall(text.lower()) or [""] for text in texts])

    def rank(query: str) -> list[str]:
        scores = index.get_scores(_WORD.findall(query.lower()))
        return [ids[i] for i in np.argsort(-scores, kind="stable")[: max(KS)]]

    return rank


def rrf(*rankings: Sequence[str], k: int = RRF_K) -> list[str]:
    """Naive reciprocal rank fusion of ranked id lists."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for position, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + position + 1)
    return sorted(scores, key=lambda item: -scores[item])


class CachedEmbedder:
    """An embedder that embeds each distinct text once per run.

    The two layouts store the same turns, and the baselines embed the texts the store
    embedded; caching keeps the run to one model pass per distinct text.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self._documents: dict[str, list[float]] = {}
        self._queries: dict[str, list[float]] = {}

    async def dimensions(self) -> int:
        return await self.inner.dimensions()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(text for text in texts if text not in self._documents))
        if missing:
            self._documents.update(zip(missing, await self.inner.embed(missing), strict=True))
        return [self._documents[text] for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        if text not in self._queries:
            self._queries[text] = await self.inner.embed_query(text)
        return self._queries[text]

    def load(self, path: Path) -> None:
        """The vectors a previous run kept (``--keep``), if any."""
        if path.exists():
            kept = json.loads(path.read_text(encoding="utf-8"))
            self._documents.update(kept["documents"])
            self._queries.update(kept["queries"])

    def save(self, path: Path) -> None:
        """Keep every vector for the next run (``--keep``)."""
        path.write_text(json.dumps({"documents": self._documents, "queries": self._queries}), encoding="utf-8")


async def evaluate_conversation(
    conversation: Conversation,
    layout: str,
    args: argparse.Namespace,
    embedder: Embedder,
    directory: Path,
    results: Callable[[str], Scores],
    console: Console,
) -> None:
    """Ingest one conversation in one layout into its own store, embed it, and score every method."""
    started = time.perf_counter()
    name = f"{conversation.sample_id}-{layout}"
    kept = args.store == "sqlite" and (directory / f"{name}.db").exists()
    store = await open_conversation_store(args.store, args.neo4j_uri, directory, name)
    try:
        if kept:
            console.print(f"{conversation.sample_id} ({layout} layout): the store kept in {directory}")
        else:
            report = await ingest_files(store, [write_jsonl(conversation, layout, directory)], partition=PARTITION)
            embedded = await backfill_embeddings(store, embedder, partition=PARTITION)
            console.print(
                f"{conversation.sample_id} ({layout} layout): {report.appended} turns in {report.threads} sessions, "
                f"{embedded} embedded, {len(conversation.questions)} questions "
                f"({time.perf_counter() - started:.0f} s)"
            )
        turn_ids = [turn.dia_id for turn in conversation.turns]
        depth = max(KS)
        texts = stored_texts(conversation, layout)
        bm25 = bm25_ranker(texts, turn_ids)
        vectors = np.asarray(await embedder.embed(texts))
        for question in conversation.questions:
            query = np.asarray(await embedder.embed_query(question.text))
            lexical = bm25(question.text)
            dense = [turn_ids[i] for i in np.argsort(-(vectors @ query), kind="stable")[:depth]]
            results("baseline: BM25 (rank-bm25)").add(question, lexical)
            results("baseline: dense MiniLM").add(question, dense)
            results("baseline: RRF(BM25, dense)").add(question, rrf(lexical, dense))
            for mode in args.modes:
                clock = time.perf_counter()
                found = await grep_memories(
                    store, question.text, partition=PARTITION, mode=mode, kinds=("message",),
                    limit=depth, embedder=embedder,
                )  # fmt: skip
                elapsed = time.perf_counter() - clock
                ranked = [hit.source_id for hit in found.hits if hit.source_id]
                results(f"grep_memories {mode}").add(question, ranked, elapsed)
            if args.ablations:
                for label, weights in ABLATIONS.items():
                    hits = await hybrid_search(
                        store, embedder, question.text, partition=PARTITION, kinds=("message",),
                        limit=depth, weights=weights,
                    )  # fmt: skip
                    results(label).add(question, [hit.source_id for hit in hits if hit.source_id])
    finally:
        await store.close()


Results = dict[str, dict[tuple[str, str], Scores]]


def render(results: Results, layouts: Sequence[str], counts: dict[str, int], title: str) -> tuple[Table, Table]:
    """Recall@10 per method for each half and layout, then recall@k over everything."""
    cells = [(half, layout) for half in HALVES for layout in layouts if counts.get(half)]
    halves = Table(title=title)
    halves.add_column("method")
    for half, layout in cells:
        halves.add_column(f"{half} ({counts[half]} q)\n{layout}", justify="right")
    halves.add_column("gap between\nlayouts (all)", justify="right")
    halves.add_column("p50 ms", justify="right")
    for method, by_cell in results.items():
        row = [f"{by_cell[cell].overall(10):.1f}" if cell in by_cell else "" for cell in cells]
        per_layout = [merged(by_cell, layout).overall(10) for layout in layouts]
        gap = f"{max(per_layout) - min(per_layout):.1f}" if len(layouts) > 1 else ""
        seconds = [value for scores in by_cell.values() for value in scores.seconds]
        latency = f"{1000 * float(np.median(seconds)):.1f}" if seconds else ""
        halves.add_row(method, *row, gap, latency)
    overall = Table(title="evidence recall@k (%) over every question, per layout")
    overall.add_column("method")
    for layout in layouts:
        for k in KS:
            overall.add_column(f"{layout}\nR@{k}", justify="right")
    for method, by_cell in results.items():
        overall.add_row(method, *(f"{merged(by_cell, layout).overall(k):.1f}" for layout in layouts for k in KS))
    return halves, overall


def merged(by_cell: dict[tuple[str, str], Scores], layout: str) -> Scores:
    """One layout's scores over both halves."""
    total = Scores()
    for (_, at_layout), scores in by_cell.items():
        if at_layout == layout:
            for key, values in scores.recalls.items():
                total.recalls.setdefault(key, []).extend(values)
    return total


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the LoCoMo JSON file")
    parser.add_argument("--store", choices=("sqlite", "neo4j"), default="sqlite")
    parser.add_argument("--neo4j-uri", default=os.environ.get("NEO4J_URI"), help="bolt://HOST:PORT (its data is wiped)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated grep_memories modes")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="comma-separated layouts: metadata, content")
    parser.add_argument("--halves", default=",".join(HALVES), help="comma-separated halves: tuning, checking")
    parser.add_argument("--limit-questions", type=int, default=None, help="questions per conversation, for quick runs")
    parser.add_argument("--embedder", default="sentence-transformers:all-MiniLM-L6-v2", help="PALIMPSEST_EMBEDDER spec")
    parser.add_argument("--ablations", action="store_true", help="also hybrid with each refinement removed")
    parser.add_argument("--keep", type=Path, default=None, help="keep the SQLite stores and vectors here, reuse them")
    args = parser.parse_args(argv)
    for option, allowed in (("modes", MODES), ("layouts", LAYOUTS), ("halves", HALVES)):
        chosen = [item.strip() for item in getattr(args, option).split(",") if item.strip()]
        unknown = set(chosen) - set(allowed)
        if unknown:
            parser.error(f"unknown {option} {sorted(unknown)}: use {', '.join(allowed)}")
        setattr(args, option, chosen)
    if not args.data.is_file():
        parser.error(f"no data at {args.data}: pass --data PATH to locomo-dev.json")
    return args


async def run(args: argparse.Namespace, console: Console) -> tuple[Results, dict[str, int]]:
    """Every chosen conversation in every layout, each in its own fresh store."""
    inner = make_embedder(args.embedder)
    if inner is None:
        raise SystemExit("--embedder must name a model: the semantic and hybrid modes need one")
    embedder = CachedEmbedder(inner)
    results: Results = {}
    counts: dict[str, int] = {}
    conversations = load(args.data, args.limit_questions)
    with tempfile.TemporaryDirectory(prefix="palimpsest-recall-") as scratch:
        tmp = args.keep or scratch
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            embedder.load(args.keep / EMBEDDING_CACHE)
        for index, conversation in enumerate(conversations):
            half = HALVES[0] if index < TUNING_CONVERSATIONS else HALVES[1]
            if half not in args.halves:
                continue
            counts[half] = counts.get(half, 0) + len(conversation.questions)
            for layout in args.layouts:

                def scores(method: str, cell: tuple[str, str] = (half, layout)) -> Scores:
                    return results.setdefault(method, {}).setdefault(cell, Scores())

                await evaluate_conversation(conversation, layout, args, embedder, Path(tmp), scores, console)
        if args.keep:
            embedder.save(args.keep / EMBEDDING_CACHE)
    return results, counts


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its tables."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.getLogger("neo4j").setLevel(logging.ERROR)
    args = parse_args(argv)
    console = Console(width=max(Console().width, 150))
    started = time.perf_counter()
    results, counts = asyncio.run(run(args, console))
    title = (
        f"LoCoMo {args.data.stem}: evidence recall@10 (%), categories 1-4, tuning = first "
        f"{TUNING_CONVERSATIONS} conversations, checking = the rest; store {args.store}, {args.embedder}"
    )
    for table in render(results, args.layouts, counts, title):
        console.print(table)
    hybrid = results.get("grep_memories hybrid", {})
    text = results.get("grep_memories text", {})
    bm25 = results.get("baseline: BM25 (rank-bm25)", {})
    for cell in hybrid:
        if cell[0] == "checking":
            met = hybrid[cell].overall(10) >= 72 and (
                cell not in text or text[cell].overall(10) >= bm25[cell].overall(10)
            )
            console.print(f"goal on checking/{cell[1]}: hybrid >= 72 and text >= BM25: {'met' if met else 'NOT met'}")
    console.print(f"{time.perf_counter() - started:.0f} s in all; default weights {DEFAULT_WEIGHTS}")


if __name__ == "__main__":
    main()
