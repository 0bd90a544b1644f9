"""Retrieval quality on coding sessions: evidence recall@1, @5 and @10 per mode, per half and per kind of question.

Run by hand (not a test)::

    .venv/bin/python bench/coding_recall.py --sessions DIR
    .venv/bin/python bench/coding_recall.py --sessions DIR --store neo4j --neo4j-uri bolt://127.0.0.1:7687
    .venv/bin/python bench/coding_recall.py --sessions DIR --questions bench/coding_questions.json \
        --questions bench/coding_questions_heldout.json --dump hits.jsonl

Data: Claude Code transcripts (``*.jsonl``) in ``--sessions``, kept outside the
repository; ``bench/coding_questions.json`` names each one's public source and holds
the questions written by reading them, each with its kind (``command``: which command
did it; ``failure``: what failed and why; ``file``: which file, what it held;
``decision``: why it was done so), the transcript lines (``uuid``) that answer it, and
its half (``tune``: what ranking may be tuned on; ``check``: only reported).
``bench/coding_questions_heldout.json`` has the same form over six other public
sessions, every question in the half ``heldout``: written by someone who never tuned
ranking, before any search ran on them, so it says whether the tuned figures carry.
``--questions`` may be given more than once: every set's sessions (all in
``--sessions``) go into one store and each set is reported apart, so two sets can be
compared over the same haystack. ``--sources`` asks only the questions of the named
sessions (all are still ingested). ``--dump`` writes each question's hits per method,
one JSON object a line, to read why a question was missed.

The sessions go through the real path: ``palimpsest.server.feeds.ingest.ingest_files``
with Claude Code's parser into a fresh store (a SQLite file, or an emptied Neo4j
database), then ``palimpsest.scheduler.embedding.backfill_embeddings`` with the
built-in embedder. Each question is sent to
``palimpsest.server.retrieval.grep.grep_memories`` in each mode, ``--k`` hits (10); a hit
answers for its ``source_id`` and, when it carries a tool call with its result, for
the other half's too (``paired_source_id``). The score of a question at a cutoff is the
share of its evidence lines among that many first hits. The baseline is plain BM25 (``rank-bm25``,
from the ``bench`` extra) over the stored contents, lower-cased words.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.models import Message
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import make_embedder
from palimpsest.scheduler.embedding import backfill_embeddings
from palimpsest.server.feeds.ingest import ingest_files
from palimpsest.server.retrieval.grep import GrepHit, GrepMode, grep_memories

QUESTIONS = Path(__file__).with_name("coding_questions.json")
MODES: tuple[GrepMode, ...] = ("text", "hybrid")
HALVES = ("tune", "check", "heldout")
CUTOFFS = (1, 5, 10)
KINDS = ("command", "failure", "file", "decision")
PARTITION = "claude"
BM25 = "baseline: BM25 (rank-bm25)"
_WORD = re.compile(r"\w+")
_NEO4J_WIPE = "MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"
#: Per method, per (half, kind), each question's score.
Scores = dict[str, dict[tuple[str, str], list[float]]]


async def open_fresh_store(kind: str, neo4j_uri: str | None, directory: Path) -> MemoryStore:
    """An empty, initialized store: a new SQLite file, or the Neo4j database at ``neo4j_uri`` wiped."""
    if kind == "neo4j":
        if neo4j_uri is None:
            raise SystemExit("--store neo4j needs --neo4j-uri")
        import neo4j

        async with neo4j.AsyncGraphDatabase.driver(neo4j_uri, auth=None) as driver:
            async with driver.session() as session:
                await (await session.run(_NEO4J_WIPE)).consume()
        store = open_store(neo4j_uri, Neo4jCredentials())
    else:
        store = open_store(f"sqlite:///{directory / 'coding.db'}")
    await store.initialize()
    return store


async def every_message(store: MemoryStore) -> list[Message]:
    """Every stored message of the partition, for the BM25 baseline."""
    messages: list[Message] = []
    for thread in await store.list_threads(PARTITION, limit=10_000):
        messages += await store.get_messages(PARTITION, thread.id)
    return messages


def bm25_ranking(messages: Sequence[Message], query: str) -> list[str]:
    """Plain BM25 (rank-bm25's Okapi) over the stored contents: source ids, best first."""
    from rank_bm25 import BM25Okapi

    index = BM25Okapi([_WORD.findall(message.content.lower()) or [""] for message in messages])
    scores = index.get_scores(_WORD.findall(query.lower()))
    order = sorted(range(len(messages)), key=lambda at: -scores[at])
    return [messages[at].source_id for at in order]


def recall_at_k(evidence: Sequence[str], found: Sequence[set[str]], k: int) -> float:
    """The share of the evidence lines among the first ``k`` hits, each hit standing for its ids."""
    seen = set().union(*found[:k]) if found else set()
    return sum(line in seen for line in evidence) / len(evidence)


def chosen_questions(data: dict[str, Any], sources: Sequence[str]) -> list[dict[str, Any]]:
    """The questions of ``sources`` (every question when none is named); an unknown name is an error."""
    unknown = sorted(set(sources) - set(data["sources"]))
    if unknown:
        raise SystemExit(f"--sources: no session named {', '.join(unknown)} (known: {', '.join(data['sources'])})")
    return [question for question in data["questions"] if not sources or question["source"] in sources]


def question_sets(paths: Sequence[Path], sources: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Each file's questions by the file's stem; ``sources`` filters every set that names one of them."""
    sets = {path.stem: json.loads(path.read_text()) for path in paths}
    known = {name for data in sets.values() for name in data["sources"]}
    unknown = sorted(set(sources) - known)
    if unknown:
        raise SystemExit(f"--sources: no session named {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    chosen = {stem: [name for name in sources if name in data["sources"]] for stem, data in sets.items()}
    return {stem: chosen_questions(data, chosen[stem]) for stem, data in sets.items() if chosen[stem] or not sources}


def hit_ids(hit: GrepHit) -> set[str]:
    """The transcript lines a hit answers for: its own and, for a call with its result, the other half's."""
    return {found for found in (hit.source_id, hit.paired_source_id) if found is not None}


def hit_record(rank: int, found: set[str], head: str) -> dict[str, Any]:
    """One hit as ``--dump`` writes it: its rank, the lines it stands for, the start of its text."""
    return {"rank": rank, "ids": sorted(found), "head": head[:240]}


async def evaluate(args: argparse.Namespace, console: Console) -> dict[str, dict[int, Scores]]:
    """Per question set, per cutoff, per method, per (half, kind), the question scores."""
    sets = question_sets(args.questions, args.sources)
    embedder = make_embedder(args.embedder)
    if embedder is None:
        raise SystemExit("--embedder must name a model: the hybrid mode needs one")
    cutoffs = sorted({cutoff for cutoff in CUTOFFS if cutoff < args.k} | {args.k})
    scores: dict[str, dict[int, Scores]] = {
        stem: {cutoff: defaultdict(lambda: defaultdict(list)) for cutoff in cutoffs} for stem in sets
    }
    dump = args.dump.open("w") if args.dump else None
    with tempfile.TemporaryDirectory(prefix="palimpsest-coding-") as scratch:
        store = await open_fresh_store(args.store, args.neo4j_uri, Path(scratch))
        try:
            report = await ingest_files(store, [args.sessions], partition=PARTITION, format="claude")
            embedded = await backfill_embeddings(store, embedder)
            console.print(f"ingested {report.messages} messages from {len(report.files)} files; {embedded} vectors")
            messages = await every_message(store)
            contents = {message.source_id: message.content for message in messages}
            for stem, questions in sets.items():
                for question in questions:
                    cell = (question["half"], question["kind"])
                    ranked: dict[str, list[tuple[set[str], str]]] = {}
                    if not args.no_bm25:
                        ranking = bm25_ranking(messages, question["question"])[: args.k]
                        ranked[BM25] = [({found}, contents[found]) for found in ranking]
                    for mode in args.modes:
                        result = await grep_memories(
                            store, question["question"], partition=PARTITION, mode=mode, kinds=("message",),
                            limit=args.k, embedder=embedder,
                        )  # fmt: skip
                        ranked[mode] = [
                            (hit_ids(hit), contents.get(hit.source_id or "", hit.snippet)) for hit in result.hits
                        ]
                    for method, hits in ranked.items():
                        found = [ids for ids, _ in hits]
                        for cutoff in cutoffs:
                            scores[stem][cutoff][method][cell].append(recall_at_k(question["evidence"], found, cutoff))
                        if dump:
                            record = {"set": stem, "method": method, **question}
                            record["hits"] = [hit_record(rank, ids, head) for rank, (ids, head) in enumerate(hits, 1)]
                            dump.write(json.dumps(record) + "\n")
        finally:
            await store.close()
            if dump:
                dump.close()
    return scores


def mean(values: Sequence[float]) -> str:
    return f"{100 * sum(values) / len(values):.1f}" if values else "-"


def halves_of(scores: Scores) -> list[str]:
    """The halves the scores hold, in ``HALVES`` order."""
    present = {half for cells in scores.values() for half, _ in cells}
    return [half for half in HALVES if half in present]


def render(scores: Scores, k: int) -> Table:
    """One row per method: recall@k % per half, then per kind over both halves."""
    halves = halves_of(scores)
    table = Table(title=f"Coding sessions: evidence recall@{k} %")
    for column in ("method", *halves, *KINDS, "n"):
        table.add_column(column, justify="left" if column == "method" else "right")
    for method, cells in scores.items():
        by_half = [mean([s for (half, _), values in cells.items() if half == h for s in values]) for h in halves]
        kinds = [mean([s for (_, kind), values in cells.items() if kind == k for s in values]) for k in KINDS]
        count = sum(len(values) for values in cells.values())
        table.add_row(method, *by_half, *kinds, str(count))
    return table


def render_halves(scores: Scores, k: int) -> Table:
    """One row per method and half: recall@k % per kind, so that a kind's tuning and checking scores read apart."""
    table = Table(title=f"Coding sessions by half and kind: evidence recall@{k} %")
    for column in ("method", "half", *KINDS, "all", "n"):
        table.add_column(column, justify="left" if column in ("method", "half") else "right")
    for method, cells in scores.items():
        for half in halves_of(scores):
            values = [s for (h, _), cell in cells.items() if h == half for s in cell]
            kinds = [mean(cells.get((half, kind), [])) for kind in KINDS]
            table.add_row(method, half, *kinds, mean(values), str(len(values)))
    return table


def render_cutoffs(by_cutoff: dict[int, Scores], title: str) -> Table:
    """One row per method and kind (all kinds first): recall % at each cutoff, so that @1 and @5 read beside @10."""
    table = Table(title=f"{title}: evidence recall % at each cutoff")
    for column in ("method", "kind", *(f"@{cutoff}" for cutoff in by_cutoff), "n"):
        table.add_column(column, justify="left" if column in ("method", "kind") else "right")
    first = next(iter(by_cutoff.values()))
    for method in first:
        for kind in ("all", *KINDS):
            row = []
            for scores in by_cutoff.values():
                row.append(mean([s for (_, k), cell in scores[method].items() if kind in ("all", k) for s in cell]))
            count = sum(len(cell) for (_, k), cell in first[method].items() if kind in ("all", k))
            table.add_row(method, kind, *row, str(count))
    return table


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=Path, required=True, help="folder of the Claude Code transcripts")
    parser.add_argument(
        "--questions", type=Path, action="append", help="a question set; again for another (the tuned set)"
    )
    parser.add_argument("--store", choices=("sqlite", "neo4j"), default="sqlite")
    parser.add_argument("--neo4j-uri", default=os.environ.get("NEO4J_URI"), help="bolt://HOST:PORT (its data is wiped)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated grep_memories modes")
    parser.add_argument("--embedder", default="builtin:all-MiniLM-L6-v2", help="PALIMPSEST_EMBEDDER spec")
    parser.add_argument("--k", type=int, default=10, help="hits looked at per question")
    parser.add_argument("--no-bm25", action="store_true", help="leave out the BM25 baseline (no bench extra)")
    parser.add_argument("--sources", default="", help="comma-separated session names whose questions are asked (all)")
    parser.add_argument("--dump", type=Path, help="write each question's hits per method here, one JSON object a line")
    args = parser.parse_args(argv)
    args.questions = args.questions or [QUESTIONS]
    args.modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    args.sources = [name.strip() for name in args.sources.split(",") if name.strip()]
    if not args.sessions.is_dir():
        parser.error(f"no folder at {args.sessions}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    console = Console()
    for stem, by_cutoff in asyncio.run(evaluate(args, console)).items():
        console.print(render_cutoffs(by_cutoff, stem))
        console.print(render(by_cutoff[args.k], args.k))
        console.print(render_halves(by_cutoff[args.k], args.k))


if __name__ == "__main__":
    main()
