"""Checkpoint quality, run by hand: does a checkpoint say what the tool calls did, and keep what people said?

Two measures of the extractive summarizer, each beside a baseline or a goal:

1. Coding sessions. Claude Code transcripts and Codex rollouts written by
   ``tests/support/agent_sessions.py`` (the shape of real ones: tool_use blocks and
   function_call items, errors marked, numbered file reads full of TODOs) go through the
   real parsers and the real planner (default settings, every message outside none);
   each chunk's level-1 checkpoint is scored against the truth of the chunk's tool
   calls: recall and precision of files modified, commands and failures (goal: recall
   at least 95 %), and how many checkpoints, escalated ones included, hold raw JSON
   (goal: none).
2. LoCoMo, development split (``--data``, by default ``../shared/data/locomo/locomo-dev.json``
   beside the repository; read, never copied). Each session is a thread and is chunked
   by the planner; for each question of categories 1-4, does its answer (every
   content word of it) still appear in the level-1 checkpoints of the chunks holding
   its evidence, and in a truncation of those chunks to the same length? Goal: the
   checkpoint keeps at least 1.5x the truncation's answers.
3. Distinctiveness of "Expand for details about", on both corpora, before (the chunk
   alone, as the summarizer saw it until it was given the thread) and after (the
   thread's `Background`, as compaction of an imported session or conversation hands
   it over): how many of the thread's messages hold each term (mean share, and the
   share of terms in at most 5 % of them), for LoCoMo how many terms occur in the
   chunk's own evidence turns (what the questions ask about), and how many terms are
   chat filler ("great", "really", "something", "always"; goal: none). For LoCoMo the
   thread is the whole conversation, every session of it.

    .venv/bin/python bench/checkpoints.py
    .venv/bin/python bench/checkpoints.py --sessions 2 --turns 20   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from palimpsest.graph_schema.identity import estimate_tokens  # noqa: E402
from palimpsest.graph_schema.models import Message, Role, Summary  # noqa: E402
from palimpsest.scheduler.config import CompactionSettings  # noqa: E402
from palimpsest.scheduler.extractive import EXPAND_PREFIX, ExtractiveSummarizer  # noqa: E402
from palimpsest.scheduler.planner import plan_escalation, plan_leaf_chunks  # noqa: E402
from palimpsest.scheduler.summarizer import Background  # noqa: E402
from tests.support.agent_sessions import Truth, claude_code_lines, codex_lines, parsed_messages, stored  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
RECALL_GOAL = 0.95
LOCOMO_GOAL = 1.5
CATEGORIES = (1, 2, 3, 4)
_RAW_JSON = re.compile(r"\{\s*\"[^\"]*\"\s*:")
_ANSWER_STOPWORDS = frozenset("a an the of and or in on at to for with by from is was be her his their".split())
_EVIDENCE = re.compile(r"^D(\d+):0*(\d+)$")
#: A term in at most this share of the thread's messages counts as rare there.
RARE_SHARE = 0.05
#: Words of small talk that name nothing: an "Expand for details about" line holding one failed.
CHAT_FILLER = frozenset(
    """
    great really something always awesome amazing cool nice good thanks thank totally definitely glad love wow
    yeah hey hi hello sure okay ok lol haha hope guess wanna gonna looks taking maybe anyway btw
    """.split()
)


@dataclass
class Distinctiveness:
    """How telling the "Expand for details about" terms of level-1 checkpoints are, against their thread."""

    checkpoints: int = 0
    terms: int = 0
    share_sum: float = 0.0
    rare: int = 0
    in_evidence: int = 0
    evidence_terms: int = 0
    filler: list[str] = field(default_factory=list)

    def add(self, text: str, background: Background, evidence: str | None = None) -> None:
        """Score the expand line of one checkpoint; ``evidence`` is the text of the chunk's evidence turns."""
        self.checkpoints += 1
        evidence_words = _words(evidence) if evidence else None
        for term in expand_terms(text):
            share = background.share(term)
            self.terms += 1
            self.share_sum += share
            self.rare += share <= RARE_SHARE
            if term.lower().strip("'.") in CHAT_FILLER:
                self.filler.append(term)
            if evidence_words is not None:
                self.evidence_terms += 1
                self.in_evidence += bool(_words(term)) and _words(term) <= evidence_words

    @property
    def mean_share(self) -> float:
        return self.share_sum / self.terms if self.terms else 0.0

    @property
    def rare_share(self) -> float:
        return self.rare / self.terms if self.terms else 0.0

    @property
    def evidence_share(self) -> float | None:
        return self.in_evidence / self.evidence_terms if self.evidence_terms else None


def expand_terms(text: str) -> list[str]:
    """The terms of a checkpoint's "Expand for details about" line."""
    for line in text.splitlines():
        if line.startswith(EXPAND_PREFIX):
            return [term.strip() for term in line[len(EXPAND_PREFIX) :].split(",") if term.strip()]
    return []


@dataclass
class Score:
    """Matches, expected and found items of one field, over every chunk."""

    hits: int = 0
    expected: int = 0
    found: int = 0
    correct: int = 0

    @property
    def recall(self) -> float:
        return self.hits / self.expected if self.expected else 1.0

    @property
    def precision(self) -> float:
        return self.correct / self.found if self.found else 1.0


@dataclass
class CodingResult:
    """One format's scores."""

    fmt: str
    messages: int = 0
    chunks: int = 0
    summaries: int = 0
    with_json: int = 0
    scores: dict[str, Score] = field(default_factory=lambda: {n: Score() for n in ("files", "commands", "failures")})
    before: Distinctiveness = field(default_factory=Distinctiveness)
    after: Distinctiveness = field(default_factory=Distinctiveness)


def section(text: str, name: str) -> list[str]:
    """The items under ``## name``."""
    lines = text.splitlines()
    if f"## {name}" not in lines:
        return []
    items = []
    for line in lines[lines.index(f"## {name}") + 1 :]:
        if not line.startswith("- "):
            break
        items.append(line[2:])
    return items


def score_chunk(result: CodingResult, chunk: Sequence[Message], text: str, truth: Truth) -> None:
    """Compare one checkpoint with the truth of its chunk's tool calls."""
    calls = [m.tool_call_id for m in chunk if m.metadata.get("kind") == "tool_use" and m.tool_call_id]
    expected_files = {truth.modified[c] for c in calls if c in truth.modified}
    found_files = {
        re.sub(r" \((created|edited|deleted)( ×\d+)?\)$", "", item) for item in section(text, "Files modified")
    }
    expected_commands = {truth.commands[c] for c in calls if c in truth.commands}
    found_commands = {m.group(1) for item in section(text, "Commands") if (m := re.match(r"^`(.+)` → ", item))}
    expected_failures = [truth.failures[c] for c in calls if c in truth.failures]
    failed = section(text, "Failed attempts")
    tools = {m.metadata.get("tool_name") for m in chunk}
    from_tools = [item for item in failed if item.split(" ", 1)[0] in tools]
    for name, expected, found in (
        ("files", expected_files, found_files),
        ("commands", expected_commands, found_commands),
    ):
        score = result.scores[name]
        score.expected += len(expected)
        score.hits += len(expected & found)
        score.found += len(found)
        score.correct += len(expected & found)
    score = result.scores["failures"]
    score.expected += len(expected_failures)
    score.hits += sum(1 for error in dict.fromkeys(expected_failures) if any(error in item for item in failed)) + (
        len(expected_failures) - len(set(expected_failures))
    )
    score.found += len(from_tools)
    score.correct += sum(1 for item in from_tools if any(error in item for error in expected_failures))


async def measure_coding(fmt: str, sessions: int, turns: int, folder: Path) -> CodingResult:
    """Write, parse, chunk and summarize ``sessions`` sessions of one format, scoring every chunk."""
    result = CodingResult(fmt)
    summarizer = ExtractiveSummarizer()
    config = CompactionSettings(keep_recent=0)
    for seed in range(sessions):
        write = claude_code_lines if fmt == "claude" else codex_lines
        lines, truth = write(turns, seed=seed, session=f"{fmt}-{seed}")
        messages = stored(parsed_messages(lines, folder / f"{fmt}-{seed}.jsonl", fmt), thread_id=f"{fmt}-{seed}")
        result.messages += len(messages)
        background = Background.of_messages(messages)
        level: list[Summary] = []
        for chunk in plan_leaf_chunks(messages, config, force=True):
            text = (await summarizer.summarize_messages(chunk, background=background)).text
            result.chunks += 1
            score_chunk(result, chunk, text, truth)
            result.after.add(text, background)
            result.before.add((await summarizer.summarize_messages(chunk)).text, background)
            level.append(_as_summary(text, chunk[0].seq, chunk[-1].seq, 1, chunk[0].created_at))
        texts = [summary.text for summary in level]
        depth = 1
        while len(level) >= config.escalation_fanin:
            depth += 1
            upper: list[Summary] = []
            while (run := plan_escalation(level, config)) is not None:
                text = (await summarizer.summarize_summaries(run, depth, background=background)).text
                upper.append(_as_summary(text, run[0].first_seq, run[-1].last_seq, depth, run[0].earliest_at))
                level = level[len(run) :]
            texts += [summary.text for summary in upper]
            level = upper
        result.summaries += len(texts)
        result.with_json += sum(1 for text in texts if _RAW_JSON.search(text))
    return result


def _as_summary(text: str, first: int, last: int, level: int, at: datetime) -> Summary:
    """A summary as the store would hand it back, enough for the planner and the merge."""
    return Summary(
        id=f"sum_{level}_{first}",
        thread_id="bench",
        partition="bench",
        level=level,
        text=text,
        tokens=estimate_tokens(text),
        source_tokens=0,
        first_seq=first,
        last_seq=last,
        earliest_at=at,
        latest_at=at,
        message_count=last - first + 1,
        digest="bench",
        summarizer="extractive",
        created_at=at,
    )


# -- LoCoMo --------------------------------------------------------------------------------


@dataclass
class LocomoResult:
    """Answers kept by the checkpoints and by the same-length truncation."""

    questions: int = 0
    in_summary: int = 0
    in_truncation: int = 0
    chunks: int = 0
    summary_chars: int = 0
    source_chars: int = 0
    before: Distinctiveness = field(default_factory=Distinctiveness)
    after: Distinctiveness = field(default_factory=Distinctiveness)

    @property
    def ratio(self) -> float:
        return self.in_summary / self.in_truncation if self.in_truncation else float("inf")


def _words(text: str) -> set[str]:
    return set(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def answer_found(answer: str, text_words: set[str]) -> bool:
    """Whether every content word of the answer is a word of the text."""
    words = [w for w in re.sub(r"[^a-z0-9]+", " ", answer.lower()).split() if w not in _ANSWER_STOPWORDS]
    return bool(words) and all(word in text_words for word in words)


async def measure_locomo(path: Path, limit: int | None) -> LocomoResult:
    """Chunk every session of every conversation, summarize, and look for each answer."""
    result = LocomoResult()
    summarizer = ExtractiveSummarizer()
    config = CompactionSettings(keep_recent=0)
    samples = json.loads(path.read_text(encoding="utf-8"))
    for sample in samples[:limit]:
        talk = sample["conversation"]
        speaker_a = talk["speaker_a"]
        where: dict[str, tuple[int, int]] = {}  # dia_id -> (session, chunk index)
        summaries: dict[tuple[int, int], str] = {}
        truncations: dict[tuple[int, int], str] = {}
        sessions: list[list[Message]] = []
        session = 1
        while f"session_{session}" in talk:
            start = datetime.strptime(talk[f"session_{session}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
            turns = talk[f"session_{session}"]
            sessions.append(
                [
                    _turn_message(turn, index, start + timedelta(seconds=index), turn["speaker"] == speaker_a, session)
                    for index, turn in enumerate(turns)
                ]
            )
            session += 1
        background = Background.of_messages([message for turns in sessions for message in turns])
        evidence_ids = {e for item in sample["qa"] for e in _evidence(item.get("evidence", []))}
        for session, messages in enumerate(sessions, start=1):
            for number, chunk in enumerate(plan_leaf_chunks(messages, config, force=True)):
                text = (await summarizer.summarize_messages(chunk, background=background)).text
                source = "\n".join(f"{m.metadata['speaker']}: {m.content}" for m in chunk)
                summaries[(session, number)] = text
                truncations[(session, number)] = source[: len(text)]
                result.chunks += 1
                result.summary_chars += len(text)
                result.source_chars += len(source)
                evidence = " ".join(m.content for m in chunk if m.metadata["dia_id"] in evidence_ids)
                result.after.add(text, background, evidence)
                result.before.add((await summarizer.summarize_messages(chunk)).text, background, evidence)
                for message in chunk:
                    where[message.metadata["dia_id"]] = (session, number)
        for item in sample["qa"]:
            if item.get("category") not in CATEGORIES or "answer" not in item:
                continue
            chunks = list(dict.fromkeys(where[e] for e in _evidence(item["evidence"]) if e in where))
            if not chunks:
                continue
            result.questions += 1
            answer = str(item["answer"])
            result.in_summary += answer_found(answer, _words(" ".join(summaries[c] for c in chunks)))
            result.in_truncation += answer_found(answer, _words(" ".join(truncations[c] for c in chunks)))
    return result


def _turn_message(turn: dict[str, str], index: int, at: datetime, first_speaker: bool, session: int) -> Message:
    """One LoCoMo turn as a stored message of its session's thread (the speaker in metadata)."""
    content = turn["text"] + (f" [shares {turn['blip_caption']}]" if turn.get("blip_caption") else "")
    return Message(
        id=f"msg_{session}_{index}",
        source_id=turn["dia_id"],
        thread_id=f"session-{session}",
        partition="locomo",
        seq=index,
        role=Role.user if first_speaker else Role.assistant,
        content=content,
        sha256="-",
        tokens=estimate_tokens(content),
        created_at=at,
        metadata={"speaker": turn["speaker"], "dia_id": turn["dia_id"]},
    )


def _evidence(raw: Sequence[str]) -> list[str]:
    found = []
    for item in raw:
        for part in re.split(r"[;\s]+", item):
            match = _EVIDENCE.match(part.strip())
            if match:
                found.append(f"D{int(match.group(1))}:{int(match.group(2))}")
    return found


# -- output --------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    """A coloured yes or no for a goal column."""
    return "[green]yes[/green]" if ok else "[red]no[/red]"


def coding_table(results: list[CodingResult]) -> Table:
    """Recall and precision per format and field, with the raw-JSON count."""
    table = Table(title="Coding sessions: level-1 checkpoints against the truth of their chunk's tool calls")
    for column in ("format", "messages", "chunks", "field", "expected", "recall %", "precision %",
                   f"recall >= {RECALL_GOAL:.0%}", "summaries with raw JSON"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("format", "field") else "right")
    for result in results:
        for name, score in result.scores.items():
            table.add_row(
                result.fmt, f"{result.messages:,}", str(result.chunks), name, str(score.expected),
                f"{100 * score.recall:.1f}", f"{100 * score.precision:.1f}", verdict(score.recall >= RECALL_GOAL),
                f"{result.with_json} of {result.summaries}",
            )  # fmt: skip
    return table


def locomo_table(result: LocomoResult, name: str) -> Table:
    """Answers kept by checkpoints against the same-length truncation."""
    table = Table(title=f"LoCoMo {name}: answers still present after level-1 summarizing (categories 1-4)")
    for column in ("questions", "chunks", "summary / source chars", "in checkpoint", "in truncation", "ratio",
                   f">= {LOCOMO_GOAL:g}x"):  # fmt: skip
        table.add_column(column, justify="right")
    share = result.summary_chars / result.source_chars if result.source_chars else 0.0
    table.add_row(
        str(result.questions), str(result.chunks), f"{share:.2f}",
        f"{result.in_summary} ({100 * result.in_summary / max(result.questions, 1):.1f} %)",
        f"{result.in_truncation} ({100 * result.in_truncation / max(result.questions, 1):.1f} %)",
        f"{result.ratio:.2f}", verdict(result.ratio >= LOCOMO_GOAL),
    )  # fmt: skip
    return table


def distinctiveness_table(rows: list[tuple[str, Distinctiveness, Distinctiveness]]) -> Table:
    """Expand terms before (the chunk alone) and after (the thread's background), per corpus."""
    table = Table(title='"Expand for details about" against the whole thread: the chunk alone / with the thread')
    for column in ("corpus", "checkpoints", "terms", "mean share of thread messages", f"terms in <= {RARE_SHARE:.0%}",
                   "terms in the chunk's evidence", "chat filler terms"):  # fmt: skip
        table.add_column(column, justify="left" if column == "corpus" else "right")
    for name, before, after in rows:
        evidence = [d.evidence_share for d in (before, after)]
        filler = [", ".join(d.filler[:4]) or "none" for d in (before, after)]
        table.add_row(
            name, f"{after.checkpoints}", f"{before.terms} / {after.terms}",
            f"{100 * before.mean_share:.1f} / {100 * after.mean_share:.1f} %",
            f"{100 * before.rare_share:.1f} / {100 * after.rare_share:.1f} %",
            " / ".join("-" if e is None else f"{100 * e:.1f}" for e in evidence) + ("" if None in evidence else " %"),
            f"{len(before.filler)} ({filler[0]}) / {len(after.filler)} ({filler[1]})",
        )  # fmt: skip
    return table


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=4, help="Sessions per format (default: %(default)s).")
    parser.add_argument("--turns", type=int, default=40, help="User turns per session (default: %(default)s).")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="The LoCoMo JSON file.")
    parser.add_argument("--conversations", type=int, help="Only the first N LoCoMo conversations.")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        parser.error(f"no data at {args.data}: pass --data PATH to locomo-dev.json")
    return args


async def run(args: argparse.Namespace) -> tuple[list[CodingResult], LocomoResult]:
    """Both measures, one after the other."""
    with tempfile.TemporaryDirectory(prefix="palimpsest-checkpoints-") as scratch:
        coding = [await measure_coding(fmt, args.sessions, args.turns, Path(scratch)) for fmt in ("claude", "codex")]
    return coding, await measure_locomo(args.data, args.conversations)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print the tables."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    coding, locomo = asyncio.run(run(args))
    console = Console() if sys.stdout.isatty() else Console(width=200)
    console.print(coding_table(coding))
    console.print(locomo_table(locomo, args.data.stem))
    rows = [(f"{result.fmt} sessions", result.before, result.after) for result in coding]
    console.print(distinctiveness_table([*rows, (f"LoCoMo {args.data.stem}", locomo.before, locomo.after)]))


if __name__ == "__main__":
    main()
