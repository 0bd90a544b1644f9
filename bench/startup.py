"""What a new session is told at start, on real Claude Code sessions, against the code before.

Each transcript in a folder is a real session written by someone else (kept outside the
repository; the README names the sources). As a user would, the benchmark replays each
through ``palimpsest hook claude``, runs ``palimpsest maintain --once`` (compaction, and
facts at their defaults), then starts a new session in the same project and reads its
``SessionStart`` memory at ``--budget`` tokens (1,500, the default). It does all of it
twice in one run: with this repository's code and with ``--before`` (another checkout,
main's, say), so the two columns are measured on the same machine and the same data.

Gold items come from each session's own structure, read here from the raw JSON lines
(independently of Palimpsest's parser): the last ``TodoWrite`` list (open items should be
named; finished ones must not be listed as open), the last outcome of each command
(only a command whose last run failed may be open), the files written or edited, the
last message of the assistant, and the date of the last line. Reported per session and
code: the share of gold items the memory names (recall), stale open steps (finished
todos or passed commands shown as open; goal 0), whether the session's own date is
shown, how many facts the defaults extract and the share that are raw tool-call JSON or
fragments (goal 0). Then, unless ``--speed ''``, it times ``project_memory`` of both
checkouts in process over generated sessions (``8x3000``: eight of 3,000 messages, not
compacted). Run:

    .venv/bin/python bench/startup.py /work/captures/claude --before /work/main
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
#: Tools whose input names a file they write.
WRITERS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
#: A fact that is a tool call's JSON (``Bash {"command": ...}``) or a piece of one.
RAW_JSON = re.compile(r'^\w+ \{|^[\[{]|\{"|"\w+":')
#: Characters of the last message that must be found in the memory.
LAST_CHARS = 60


@dataclass
class Gold:
    """What a session's structure says happened."""

    session: str
    cwd: str
    lines: int
    date: str = ""
    open_todos: list[str] = field(default_factory=list)
    done_todos: list[str] = field(default_factory=list)
    last_runs: dict[str, bool] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    last_message: str = ""

    def items(self) -> list[str]:
        """The strings a memory should name."""
        names = [path.replace("\\", "/").rsplit("/", 1)[-1] for path in self.files]
        failing = [command for command, passed in self.last_runs.items() if not passed]
        last = [self.last_message[:LAST_CHARS]] if self.last_message else []
        return [*self.open_todos, *failing, *names, *last]


def _flat(text: str) -> str:
    return " ".join(text.split())


def read_gold(path: Path) -> Gold:
    """The gold items of one transcript, from its lines alone."""
    gold = Gold(session=path.stem, cwd="", lines=0)
    calls: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        line = json.loads(raw)
        gold.lines += 1
        if line.get("type") not in ("user", "assistant"):
            continue
        gold.session = line.get("sessionId", gold.session)
        gold.cwd = line.get("cwd") or gold.cwd
        gold.date = str(line.get("timestamp", ""))[:10] or gold.date
        content = line.get("message", {}).get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                args = block.get("input") or {}
                if block.get("name") == "TodoWrite":
                    todos = args.get("todos") or []
                    gold.open_todos = [_flat(t["content"]) for t in todos if t.get("status") != "completed"]
                    gold.done_todos = [_flat(t["content"]) for t in todos if t.get("status") == "completed"]
                elif block.get("name") in WRITERS and args.get("file_path") and args["file_path"] not in gold.files:
                    gold.files.append(args["file_path"])
                elif block.get("name") == "Bash" and isinstance(args.get("command"), str):
                    calls[block.get("id", "")] = _flat(args["command"].splitlines()[0])[:60]
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in calls:
                gold.last_runs[calls[block["tool_use_id"]]] = block.get("is_error") is not True
            elif block.get("type") == "text" and line.get("type") == "assistant" and block.get("text", "").strip():
                if line.get("message", {}).get("model") != "<synthetic>":
                    gold.last_message = _flat(block["text"])
    return gold


def palimpsest(code: Path, store: Path, args: list[str], stdin: dict[str, Any] | None = None, **env: str) -> str:
    """Run the ``palimpsest`` command of checkout ``code`` on ``store``; its stdout."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
    environment |= {"PYTHONPATH": str(code), "PALIMPSEST_STORE": f"sqlite:///{store}", **env}
    done = subprocess.run(
        [sys.executable, "-c", "from palimpsest.server.cli.launch import main; main()", *args],
        input=json.dumps(stdin) if stdin is not None else None,
        capture_output=True,
        text=True,
        env=environment,
        cwd=code,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"palimpsest {' '.join(args)} failed ({code}): {done.stderr.strip()}")
    return done.stdout


def open_part(memory: str) -> str:
    """The parts of a memory that list open steps (either code's layout)."""
    parts = [line for line in memory.splitlines() if line.startswith("- Still open:")]
    if "## Open next steps" in memory:
        parts.append(memory.split("## Open next steps", 1)[1].split("\n## ", 1)[0])
    return "\n".join(parts)


def facts(store: Path) -> list[str]:
    """Every fact the store holds, current or superseded."""
    with sqlite3.connect(store) as conn:
        return [row[0] for row in conn.execute("SELECT text FROM facts")]


def is_fragment(text: str) -> bool:
    """A piece of a sentence or of code: too short, or with unbalanced quotes or brackets."""
    words = text.split()
    balanced = text.count("`") % 2 == 0 and text.count("(") == text.count(")") and text.count("[") == text.count("]")
    return len(words) < 2 or not balanced


@dataclass
class Row:
    recall: float
    stale: int
    date_shown: bool
    facts: int
    raw_share: float
    facts_on: int
    raw_share_on: float
    tokens: int
    memory: str


def measure(code: Path, transcripts: list[Path], gold: Gold, budget: int) -> Row:
    """Replay every transcript, maintain, start a new session in ``gold``'s project: its memory against ``gold``."""
    with tempfile.TemporaryDirectory() as work:
        store = Path(work) / "memory.db"
        for path in transcripts:
            session = read_gold(path)
            stdin = {"session_id": session.session, "transcript_path": str(path), "cwd": session.cwd}
            palimpsest(code, store, ["hook", "claude"], {**stdin, "hook_event_name": "Stop"})
        palimpsest(code, store, ["maintain", "--once"])
        start = {"session_id": "bench-new-session", "transcript_path": f"{work}/none.jsonl", "cwd": gold.cwd}
        start |= {"hook_event_name": "SessionStart", "source": "startup"}
        out = palimpsest(code, store, ["hook", "claude"], start, PALIMPSEST_STARTUP_BUDGET=str(budget))
        memory = json.loads(out)["hookSpecificOutput"]["additionalContext"] if out.strip() else ""
        found = _flat(memory)
        items = gold.items()
        named = sum(1 for item in items if _flat(item) in found)
        opened = _flat(open_part(memory))
        passed = [command for command, ok in gold.last_runs.items() if ok]
        stale = sum(1 for item in [*gold.done_todos, *passed] if _flat(item) in opened)
        texts = facts(store)
        raw = sum(1 for text in texts if RAW_JSON.search(text) or is_fragment(text))
        for path in transcripts:  # every thread's layer turned on by hand, as main needed
            palimpsest(code, store, ["kg", "on", "--thread", read_gold(path).session, "--partition", "claude"])
        all_on = facts(store)
        raw_on = sum(1 for text in all_on if RAW_JSON.search(text) or is_fragment(text))
        return Row(
            recall=named / len(items) if items else 1.0,
            stale=stale,
            date_shown=bool(gold.date) and gold.date in memory,
            facts=len(texts),
            raw_share=raw / len(texts) if texts else 0.0,
            facts_on=len(all_on),
            raw_share_on=raw_on / len(all_on) if all_on else 0.0,
            tokens=len(memory) // 4,
            memory=memory,
        )


SPEED_SCRIPT = """
import asyncio, sys, tempfile, time
from palimpsest.graph_schema.backends import open_store
from palimpsest.server.retrieval.startup import project_memory
from tests.transcripts import transcript

async def run(sessions, messages):
    with tempfile.TemporaryDirectory() as work:
        store = open_store(f"sqlite:///{work}/m.db")
        await store.initialize()
        for index in range(sessions):
            rows = transcript(messages, seed=index, prefix=f"t{index}-")
            for start in range(0, messages, 1000):
                await store.append_messages("p", f"t{index}", rows[start : start + 1000], project="x")
        times = []
        for _ in range(5):
            began = time.perf_counter()
            await project_memory(store, partition="p", project="x", budget_tokens=1500)
            times.append(time.perf_counter() - began)
        await store.close()
        print(times[0], sorted(times)[2])

asyncio.run(run(int(sys.argv[1]), int(sys.argv[2])))
"""


def speed(code: Path, sessions: int, messages: int) -> tuple[float, float]:
    """Seconds ``project_memory`` of checkout ``code`` takes over ``sessions`` of ``messages``: first call, median."""
    done = subprocess.run(
        [sys.executable, "-c", SPEED_SCRIPT, str(sessions), str(messages)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(code)},
        cwd=code,
        check=True,
    )
    first, median = done.stdout.split()
    return float(first), float(median)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="Claude Code transcripts (*.jsonl), one session each")
    parser.add_argument("--before", type=Path, help="another checkout to compare with (main's)")
    parser.add_argument("--budget", type=int, default=1500, help="PALIMPSEST_STARTUP_BUDGET")
    parser.add_argument("--show", action="store_true", help="print each memory")
    parser.add_argument(
        "--speed", default="8x3000", help="time the memory over SESSIONSxMESSAGES generated sessions ('' skips it)"
    )
    options = parser.parse_args()
    transcripts = sorted(options.folder.glob("*.jsonl"))
    if not transcripts:
        raise SystemExit(f"no *.jsonl transcripts in {options.folder}")
    codes = [("this", HERE)] + ([("before", options.before.resolve())] if options.before else [])
    print(f"budget {options.budget} tokens; {len(transcripts)} sessions; gold items from each session's own lines\n")
    print(
        "| session | lines | gold items | code | recall | stale open | date shown | facts (defaults) "
        "| raw JSON / fragments | facts (kg on) | raw JSON / fragments |"
    )
    print("|---|---:|---:|---|---:|---:|---|---:|---:|---:|---:|")
    for path in transcripts:
        gold = read_gold(path)
        for name, code in codes:
            row = measure(code, transcripts, gold, options.budget)
            print(
                f"| {path.name} | {gold.lines} | {len(gold.items())} | {name} | {row.recall:.0%} | {row.stale} | "
                f"{'yes' if row.date_shown else 'no'} | {row.facts} | {row.raw_share:.0%} | {row.facts_on} | "
                f"{row.raw_share_on:.0%} |"
            )
            if options.show:
                print(f"\n<!-- {name} memory for {path.name} ({row.tokens} tokens) -->\n{row.memory}\n")
    if options.speed:
        sessions, messages = (int(part) for part in options.speed.split("x"))
        print(f"\nproject_memory over {sessions} sessions of {messages} messages, SQLite, in process\n")
        print("| code | first call | median of 5 |\n|---|---:|---:|")
        for name, code in codes:
            first, median = speed(code, sessions, messages)
            print(f"| {name} | {first * 1000:.0f} ms | {median * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
