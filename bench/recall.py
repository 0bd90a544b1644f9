"""Retrieval quality: evidence recall@k of every ``grep_memories`` mode on LoCoMo, with baselines.

Run by hand (not a test)::

    .venv/bin/python bench/recall.py                       # SQLite, every question
    .venv/bin/python bench/recall.py --store neo4j --neo4j-uri bolt://127.0.0.1:7687
    .venv/bin/python bench/recall.py --limit-questions 20 --modes hybrid

Data: the LoCoMo development split (``--data``, by default
``../shared/data/locomo/locomo-dev.json`` beside the repository; it is never copied into
it). Each conversation gets its own store (a fresh SQLite file, or an emptied Neo4j
database) and goes in through the real path: its turns are written to a JSONL file, one
thread per session, ``message_id`` = the turn's ``dia_id``, ``created_at`` from the
session's date, the speaker in ``metadata``, and read by ``palimpsest.server.feeds.ingest.ingest_files``;
then ``palimpsest.scheduler.embedding.backfill_embeddings`` embeds them with the real embedder.
Each question of categories 1-4 is sent to ``palimpsest.server.retrieval.grep.grep_memories`` (the function
the MCP tool calls) in each mode, and the hits' ``source_id`` (the ``dia_id``) are
compared with the question's evidence.

The metric (the split's README): evidence recall@k, the share of a question's evidence
turns among the top k hits, averaged over the questions. Baselines, computed in the same
run over the raw turn texts: plain BM25 (``rank-bm25``, lower-cased words), plain dense
all-MiniLM-L6-v2 (the same embedder, cosine over every turn) and naive reciprocal rank
fusion of the two (k = 60); and the same three over ``Speaker: text``, a stronger
variant (the issue's plain dense figure, about 51, is this one's). ``--ablations`` adds
hybrid with one refinement removed at a time (``palimpsest.server.retrieval.hybrid.FusionWeights``), to show
what each is worth.
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
RRF_K = 60
_WORD = re.compile(r"\w+")
_EVIDENCE = re.compile(r"D(\d+):(\d+)$")
_NEO4J_WIPE = "MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"
ABLATIONS: dict[str, FusionWeights] = {
    "hybrid - query cleanup": FusionWeights(clean_query=False),
    "hybrid - metadata names": FusionWeights(metadata=0.0),
    "hybrid - neighbours": FusionWeights(neighbour=0.0),
    "hybrid - both context steps": FusionWeights(metadata=0.0, neighbour=0.0),
    "hybrid, 50 candidates each": FusionWeights(candidates=50, text_candidates=50),
    "hybrid, 200 text candidates": FusionWeights(text_candidates=200),
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


def write_jsonl(conversation: Conversation, directory: Path) -> Path:
    """The conversation as Palimpsest's JSONL: one thread per session, the speaker in metadata."""
    path = directory / f"{conversation.sample_id}.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for turn in conversation.turns:
            line = {
                "thread_id": f"{conversation.sample_id}-session-{turn.session}",
                "role": "user" if turn.speaker == conversation.speakers[0] else "assistant",
                "content": turn.content,
                "message_id": turn.dia_id,
                "created_at": turn.created_at.isoformat(),
                "project": conversation.sample_id,
                "metadata": {"speaker": turn.speaker},
            }
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
    """A fresh, empty store for one conversation."""
    if kind == "neo4j":
        if neo4j_uri is None:
            raise SystemExit("--store neo4j needs --neo4j-uri")
        await empty_neo4j(neo4j_uri)
        store = open_store(neo4j_uri, Neo4jCredentials())
    else:
        store = open_store(f"sqlite:///{directory / (name + '.db')}")
    await store.initialize()
    return store


def turn_texts(conversation: Conversation, *, speaker: bool) -> list[str]:
    """Each turn's text, prefixed with ``Speaker:`` when ``speaker`` (the issue's baselines)."""
    return [f"{turn.speaker}: {turn.content}" if speaker else turn.content for turn in conversation.turns]


def bm25_ranker(conversation: Conversation, *, speaker: bool) -> Callable[[str], list[str]]:
    """Plain BM25 (rank-bm25's Okapi) over the turn texts, lower-cased words."""
    from rank_bm25 import BM25Okapi

    texts = turn_texts(conversation, speaker=speaker)
    index = BM25Okapi([_WORD.findall(text.lower()) or [""] for text in texts])
    ids = [turn.dia_id for turn in conversation.turns]

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


async def evaluate_conversation(
    conversation: Conversation,
    args: argparse.Namespace,
    embedder: Embedder,
    directory: Path,
    results: dict[str, Scores],
    console: Console,
) -> None:
    """Ingest one conversation into its own store, embed it, and score every method on it."""
    started = time.perf_counter()
    store = await open_conversation_store(args.store, args.neo4j_uri, directory, conversation.sample_id)
    try:
        report = await ingest_files(store, [write_jsonl(conversation, directory)], partition=PARTITION)
        embedded = await backfill_embeddings(store, embedder, partition=PARTITION)
        console.print(
            f"{conversation.sample_id}: {report.appended} turns in {report.threads} sessions, "
            f"{embedded} embedded, {len(conversation.questions)} questions "
            f"({time.perf_counter() - started:.0f} s)"
        )
        turn_ids = [turn.dia_id for turn in conversation.turns]
        depth = max(KS)
        baselines = []
        for speaker, label in ((False, ""), (True, ", 'Speaker: text'")):
            vectors = np.asarray(await embedder.embed(turn_texts(conversation, speaker=speaker)))
            baselines.append((label, bm25_ranker(conversation, speaker=speaker), vectors))
        for question in conversation.questions:
            query = np.asarray(await embedder.embed_query(question.text))
            for label, bm25, vectors in baselines:
                lexical = bm25(question.text)
                dense = [turn_ids[i] for i in np.argsort(-(vectors @ query), kind="stable")[:depth]]
                results.setdefault(f"baseline: BM25 (rank-bm25){label}", Scores()).add(question, lexical)
                results.setdefault(f"baseline: dense MiniLM{label}", Scores()).add(question, dense)
                results.setdefault(f"baseline: RRF(BM25, dense){label}", Scores()).add(question, rrf(lexical, dense))
            ranked_by_mode: dict[str, list[str]] = {}
            for mode in args.modes:
                clock = time.perf_counter()
                found = await grep_memories(
                    store, question.text, partition=PARTITION, mode=mode, kinds=("message",),
                    limit=depth, embedder=embedder,
                )  # fmt: skip
                elapsed = time.perf_counter() - clock
                ranked_by_mode[mode] = [hit.source_id for hit in found.hits if hit.source_id]
                results.setdefault(f"grep_memories {mode}", Scores()).add(question, ranked_by_mode[mode], elapsed)
            if "text" in ranked_by_mode and "semantic" in ranked_by_mode:
                fused = rrf(ranked_by_mode["text"], ranked_by_mode["semantic"])
                results.setdefault("RRF(text mode, semantic mode)", Scores()).add(question, fused)
            if args.ablations:
                for name, weights in ABLATIONS.items():
                    hits = await hybrid_search(
                        store, embedder, question.text, partition=PARTITION, kinds=("message",),
                        limit=depth, weights=weights,
                    )  # fmt: skip
                    results.setdefault(name, Scores()).add(question, [hit.source_id for hit in hits if hit.source_id])
    finally:
        await store.close()


def render(results: dict[str, Scores], title: str) -> tuple[Table, Table]:
    """The overall table (recall@k per method) and the per-category table."""
    overall = Table(title=title)
    overall.add_column("method")
    for k in KS:
        overall.add_column(f"R@{k}", justify="right")
    overall.add_column("p50 ms", justify="right")
    for name, scores in results.items():
        latency = f"{1000 * float(np.median(scores.seconds)):.1f}" if scores.seconds else ""
        overall.add_row(name, *(f"{scores.overall(k):.1f}" for k in KS), latency)
    categories = Table(title="recall@1 / @5 / @10 / @25 per category")
    categories.add_column("method")
    for category, label in CATEGORIES.items():
        count = len(next(iter(results.values())).recalls.get((category, KS[0]), []))
        categories.add_column(f"{category} {label} ({count})", justify="right")
    for name, scores in results.items():
        cells = [" / ".join(f"{scores.category(category, k):.0f}" for k in KS) for category in CATEGORIES]
        categories.add_row(name, *cells)
    return overall, categories


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the LoCoMo JSON file")
    parser.add_argument("--store", choices=("sqlite", "neo4j"), default="sqlite")
    parser.add_argument("--neo4j-uri", default=os.environ.get("NEO4J_URI"), help="bolt://HOST:PORT (its data is wiped)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated grep_memories modes")
    parser.add_argument("--limit-questions", type=int, default=None, help="questions per conversation, for quick runs")
    parser.add_argument("--embedder", default="sentence-transformers:all-MiniLM-L6-v2", help="PALIMPSEST_EMBEDDER spec")
    parser.add_argument("--ablations", action="store_true", help="also hybrid with each refinement removed")
    args = parser.parse_args(argv)
    args.modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = set(args.modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}: use {', '.join(MODES)}")
    if not args.data.is_file():
        parser.error(f"no data at {args.data}: pass --data PATH to locomo-dev.json")
    return args


async def run(args: argparse.Namespace, console: Console) -> dict[str, Scores]:
    """Every conversation in turn, each in its own fresh store."""
    embedder = make_embedder(args.embedder)
    if embedder is None:
        raise SystemExit("--embedder must name a model: the semantic and hybrid modes need one")
    results: dict[str, Scores] = {}
    with tempfile.TemporaryDirectory(prefix="palimpsest-recall-") as tmp:
        for conversation in load(args.data, args.limit_questions):
            await evaluate_conversation(conversation, args, embedder, Path(tmp), results, console)
    return results


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its tables."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.getLogger("neo4j").setLevel(logging.ERROR)
    args = parse_args(argv)
    console = Console(width=max(Console().width, 150))
    started = time.perf_counter()
    results = asyncio.run(run(args, console))
    first = next(iter(results.values()))
    questions = sum(len(first.recalls.get((category, KS[0]), [])) for category in CATEGORIES)
    title = (
        f"LoCoMo {args.data.stem}: evidence recall@k (%), {questions} questions of categories 1-4, "
        f"store {args.store}, {args.embedder}"
    )
    for table in render(results, title):
        console.print(table)
    hybrid = results.get("grep_memories hybrid")
    if hybrid is not None:
        verdict = "met" if hybrid.overall(10) >= 70 else "NOT met"
        console.print(f"goal hybrid recall@10 >= 70: {hybrid.overall(10):.1f} ({verdict})")
    console.print(f"{time.perf_counter() - started:.0f} s in all; default weights {DEFAULT_WEIGHTS}")


if __name__ == "__main__":
    main()
