"""What a new session is told at start, scored against gold read by hand from real sessions of four agents.

Why: the start-of-session memory (``palimpsest hook AGENT`` on ``SessionStart``) is only
useful if it names what earlier sessions were asked, how they really ended, what is still
open and the facts worth keeping, without noise. Real sessions written by other people
(Claude Code, Codex, Gemini CLI, Cursor) are the test: they are kept outside the
repository, in a folder laid out ``AGENT/FILE`` (``bench/startup_gold.json`` names each
one's public source). Their gold, in that file, was written by reading each session end to
end before any Palimpsest code ran on it, and split once into a ``tune`` and a ``check`` half.

For each session, in a store of its own, the benchmark does what the agent would: it sends
the agent's hook payloads to ``palimpsest hook AGENT`` (a ``Stop`` / ``AfterAgent`` naming
the transcript; for Cursor, whose hook never reads a transcript, one payload per prompt,
answer and tool call), runs ``palimpsest maintain --once``, then starts a new session in the
same project (same working directory, new session id) and reads the memory handed back at
``--budget`` tokens. With ``--before OTHER_CHECKOUT`` it does the same with that checkout's
code, so both columns come from one run on one machine.

Scores per session (each gold item has keyword alternatives; all keywords of one must be in
the text, after `normalize`): requests named; the ending named (its kind, in words, and its
conclusion); open items named in the memory's open-item lines; finished items an open-item
line names, unless that line names one of the open items too (goal 0); facts named; noise:
read-only commands presented as facts and bare headings presented as open items (goal 0);
tokens. Run:

    .venv/bin/python bench/startup.py CAPTURES_DIR [--before OTHER_CHECKOUT] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import regex
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent.parent
GOLD = HERE / "bench" / "startup_gold.json"
#: Agents the benchmark can replay, and how their ``SessionStart`` reply carries the memory.
AGENTS = ("claude", "codex", "gemini", "cursor")
#: Words that say a session ended this way; one must be in the line naming the ending.
KIND_WORDS: dict[str, tuple[str, ...]] = {
    "completed": ("completed", "complete", "done", "finished", "succeeded"),
    "answered": ("answered", "answer", "replied", "explained", "proposed"),
    "failed": ("failed", "failing", "failure", "error"),
    "interrupted": ("interrupted", "interrupt", "cancelled", "canceled", "aborted"),
    "tool_rejected": ("rejected", "declined", "denied", "refused"),
    "stopped_mid_work": ("mid-work", "mid work", "unfinished", "incomplete", "cut off", "in progress", "stopped"),
}
#: A line that speaks of how a session ended.
ENDING_CUE = re.compile(r"\b(end|ended|ending|outcome|result|stopped|status|last|finished|left off)\b", re.I)
#: A line, label or heading that lists open items.
OPEN_CUE = re.compile(
    r"\b(still open|open items?|open next steps?|open questions?|left open|open:|next steps?|to ?do|todos?|"
    r"pending|remaining|unfinished|not done|not yet|left to do|blocked|follow[- ]ups?)\b",
    re.I,
)
#: A command that only reads (a listing, a status, a search): no fact, whatever its outcome.
READ_ONLY = re.compile(
    r"^(ls|ll|cat|bat|head|tail|wc|pwd|find|fd|grep|egrep|rg|ag|tree|stat|du|df|which|echo|nl|awk|jq|whoami|"
    r"printenv|realpath|sed|"
    r"git (status|log|diff|show|branch|remote|rev-parse|ls-files|ls-tree|blame|describe|reflog|tag --list)|"
    r"gh (pr|issue|run|repo) (view|list|diff|checks|status)|gh api)\b"
)
#: What makes a listing command write: ``git branch -m``, ``git tag -d``, ``sed -i``, output sent to a file.
WRITES = re.compile(
    r"^(git (branch|tag)\b.*\s--?(m|M|d|D|c|C|move|delete|copy)\b|"
    r"git remote (add|remove|rm|rename|set-url)\b|sed\b.*\s-i\b|.*[^>&\d]>>?\s*(?!/dev/null)[\w~./\"'$])"
)
#: What leads a memory line before its content: bullets, numbering, labels such as ``Ran:``.
LEAD = re.compile(r"^\s*(?:[-*•]|\d+[.)])?\s*(?:\*\*)?(?:[A-Za-z ]{0,24}:\s*)?(?:\*\*)?\s*")


@dataclass
class Session:
    """One real session and its gold, as ``bench/startup_gold.json`` gives them."""

    key: str
    agent: str
    path: Path
    gold: dict[str, Any]

    @property
    def half(self) -> str:
        return str(self.gold["half"])


@dataclass
class Score:
    """How one memory fares against one session's gold."""

    memory: str
    tokens: int
    requests: list[bool] = field(default_factory=list)
    ending: bool = False
    open: list[bool] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    facts: list[bool] = field(default_factory=list)
    noise: list[str] = field(default_factory=list)


def normalize(text: str) -> str:
    """Lowercase, anything but letters, digits and ``. _ / - :`` a space, spaces collapsed."""
    return " ".join(re.sub(r"[^a-z0-9._/:\-]+", " ", text.lower()).split())


def named(match: list[list[str]], text: str) -> bool:
    """Whether one alternative of ``match`` has all its keywords in ``text`` (normalized)."""
    flat = normalize(text)
    return any(all(normalize(word) in flat for word in alternative) for alternative in match)


def open_lines(memory: str) -> list[str]:
    """The lines of a memory that list open items: cued themselves, or under a cued heading or label."""
    found: list[str] = []
    section = False
    label: tuple[int, bool] | None = None  # the open label's indent, and whether it is a bullet itself
    for line in memory.splitlines():
        stripped = line.strip()
        if not stripped:
            label = None
            continue
        indent = len(line) - len(line.lstrip())
        bullet = stripped[0] in "-*•" or bool(re.match(r"\d+[.)]", stripped))
        if stripped.startswith("#"):
            section, label = bool(OPEN_CUE.search(line)), None
            continue
        if label is not None and not (indent > label[0] or (not label[1] and bullet and indent == label[0])):
            label = None
        cued = bool(OPEN_CUE.search(line))
        if cued and stripped.endswith(":"):
            label = (indent, bullet)
            continue
        if cued or section or label is not None:
            found.append(line)
    return found


def open_items(lines: list[str]) -> Iterator[str]:
    """Each item an open-item line holds: ``- Still open: a; b`` holds ``a`` and ``b``."""
    for line in lines:
        body = LEAD.sub("", line, count=1) if OPEN_CUE.search(line.split(":", 1)[0]) else line.strip(" -*•\t")
        for part in body.split(";"):
            if part.strip():
                yield part.strip()


def is_heading(item: str) -> bool:
    """A bare heading shown as an item: ``## Summary``, ``**Changes**``, ``🎯 Key Improvements``, ``Plan:``.

    ``#307 (D3): make rl_validate compare`` is an issue named first, not a heading.
    """
    text = item.strip().strip("`")
    words = text.split()
    if re.match(r"#{1,6}(?:\s|$)", text) or (text.startswith("**") and text.endswith("**") and len(words) <= 6):
        return True
    if text.endswith(":") and len(words) <= 5:
        return True
    lead = bool(words) and not words[0][0].isalnum() and words[0][0] not in "`'\"([/.~$-"
    return lead and not re.match(r"#\d", words[0]) and len(words) <= 5


def command_of(line: str) -> str:
    """The shell command a memory line presents, if it leads with one (``cd DIR &&`` skipped)."""
    text = LEAD.sub("", line, count=1).strip()
    match = re.match(r"`([^`]+)`", text)
    text = match.group(1) if match else text
    return re.sub(r"^cd \S+\s*(&&|;)\s*", "", text).strip()


#: Where a command line splits into simple commands: ``a && b; c | d``.
PARTS = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")
#: Programs that run the command after them (``rtk git status`` is ``git status``), with their own options.
WRAPPER = re.compile(r"^(?:(?:sudo|env|time|nohup|nice|timeout|stdbuf|rtk|command)\b(?:\s+-\S+)*(?:\s+\d+[smh]?)?\s+)+")


#: The shell's own words before a command (``while read pr; do gh pr view "$pr"; done``).
KEYWORD = re.compile(r"^(?:(?:do|then|else|elif|if|while|until|!)\s+)+")
#: Parts of a loop or condition that run nothing: ``done``, ``read pr``, ``for f in *.py``.
NEUTRAL = re.compile(r"^(?:done|fi|esac|true|:|read(?:\s+-\w+)*\s+\w+|for\s+\w+\s+in\b.*|cd(?:\s.*)?)$")


#: `READ_ONLY` for a command the memory cut off (``gh pr vie…``): matched as a prefix of one.
READ_ONLY_PREFIX = regex.compile(READ_ONLY.pattern)


def read_only(command: str) -> bool:
    """Whether every simple command of a line only reads (``cd``, a loop's words, wrappers such as ``rtk``, skipped).

    A line the memory cut off ends in ``…``: its last, cut command reads when what is
    left of it could begin a read (``gh pr vie``), since the rest of it was not shown.
    """
    cut = command.endswith("…")
    command = command.rstrip("… ")
    parts = [KEYWORD.sub("", WRAPPER.sub("", part.strip())) for part in PARTS.split(command) if part.strip()]
    parts = [part for part in parts if not NEUTRAL.match(part)]

    def reads(part: str, last: bool) -> bool:
        if WRITES.match(part):
            return False
        return bool(READ_ONLY.match(part) or (cut and last and READ_ONLY_PREFIX.match(part, partial=True)))

    return bool(parts) and all(reads(part, index == len(parts) - 1) for index, part in enumerate(parts))


def noise(memory: str) -> list[str]:
    """Lines presenting a read-only command as a fact, and open items that are bare headings.

    A compound command is read-only when each of its parts is: ``git status && git diff`` is,
    ``git status && rm x`` is not.
    """
    commands = [(line.strip(), command_of(line)) for line in memory.splitlines() if line.strip()]
    found = [line for line, command in commands if command and read_only(command)]
    found += [f"open item: {item}" for item in open_items(open_lines(memory)) if is_heading(item)]
    return found


def ending_named(ending: dict[str, Any], memory: str) -> bool:
    """The ending's conclusion is named, and a word of its kind stands where the memory tells the ending."""
    words = KIND_WORDS[ending["kind"]]
    lines = [line for line in memory.splitlines() if named(ending["match"], line) or ENDING_CUE.search(line)]
    has_kind = any(re.search(rf"\b{re.escape(word)}\b", line, re.I) for line in lines for word in words)
    return has_kind and named(ending["match"], memory)


def stale(gold: dict[str, Any], lines: list[str]) -> list[str]:
    """The finished items an open-item line names, unless that line names one of the session's open items.

    Keywords are shared: "committed, not pushed: 1a89f6c" names the commit a finished item
    ("committed as 1a89f6c") names too, but it tells what is open about it (the push).
    """
    return [
        item["text"]
        for item in gold["not_open"]
        if any(
            named(item["match"], line) and not any(named(open_item["match"], line) for open_item in gold["open"])
            for line in lines
        )
    ]


def score(gold: dict[str, Any], memory: str, tokens: int) -> Score:
    """One memory against one session's gold."""
    opened = "\n".join(open_lines(memory))
    return Score(
        memory=memory,
        tokens=tokens,
        requests=[named(item["match"], memory) for item in gold["requests"]],
        ending=ending_named(gold["ending"], memory),
        open=[named(item["match"], opened) for item in gold["open"]],
        stale=stale(gold, open_lines(memory)),
        facts=[named(item["match"], memory) for item in gold["facts"]],
        noise=noise(memory),
    )


def lines_of(path: Path) -> list[dict[str, Any]]:
    """A JSON Lines file's objects."""
    return [json.loads(raw) for raw in path.read_text(encoding="utf-8").split("\n") if raw.strip()]


def user_text(content: Any) -> str:
    """What a Cursor user typed: inside the ``<user_query>`` wrapper, without the context Cursor puts before it.

    The transcript holds ``<attached_files>`` or ``<external_links>`` before the query; the
    ``beforeSubmitPrompt`` hook's ``prompt`` is the typed text alone.
    """
    blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]
    text = "\n".join(
        block.get("text", "") for block in blocks if isinstance(block, dict) and block.get("type") == "text"
    )
    query = re.search(r"<user_query>(.*?)(?:</user_query>|\Z)", text, re.DOTALL)
    return (query.group(1) if query else text).strip()


def cursor_payloads(path: Path, conversation: str, cwd: str) -> list[dict[str, Any]]:
    """Cursor's hook payloads for an agent transcript: a prompt, each answer, each tool call (no output kept)."""
    payloads: list[dict[str, Any]] = []
    turn = 0

    def send(event: str, **fields: Any) -> None:
        generation = f"{conversation}-{turn}"
        base = {"conversation_id": conversation, "workspace_roots": [cwd], "generation_id": generation}
        payloads.append({**base, "hook_event_name": event, **fields})

    for index, line in enumerate(lines_of(path)):
        content = (line.get("message") or {}).get("content")
        if line.get("role") == "user" and user_text(content):
            turn += 1
            send("beforeSubmitPrompt", prompt=user_text(content))
        elif line.get("role") == "assistant":
            for number, block in enumerate(content if isinstance(content, list) else []):
                if block.get("type") == "text" and block.get("text", "").strip():
                    send("afterAgentResponse", text=block["text"])
                elif block.get("type") == "tool_use":
                    call = {"tool_name": block.get("name", "tool"), "tool_input": block.get("input", {})}
                    send("postToolUse", **call, tool_use_id=f"{conversation}-{index}-{number}", tool_output="")
    return payloads


def identity(session: Session) -> tuple[str, str]:
    """The session id and working directory the agent's own file gives (the gold's ``cwd`` where it gives none)."""
    fallback = str(session.gold.get("cwd") or f"/bench/{session.gold['project']}")
    if session.agent == "gemini":
        recording = json.loads(session.path.read_text(encoding="utf-8")) if session.path.suffix == ".json" else None
        first = recording or lines_of(session.path)[0]
        return str(first.get("sessionId") or session.key), fallback
    lines = lines_of(session.path)
    if session.agent == "codex":
        meta: dict[str, Any] = next((line["payload"] for line in lines if line.get("type") == "session_meta"), {})
        return str(meta.get("id") or session.key), str(meta.get("cwd") or fallback)
    if session.agent == "claude":
        said = [line for line in lines if line.get("sessionId")]
        cwd = next((line["cwd"] for line in said if line.get("cwd")), fallback)
        return (str(said[0]["sessionId"]) if said else session.key), str(cwd)
    return session.path.stem, fallback


def replay_payloads(session: Session, thread: str, cwd: str) -> list[tuple[str, dict[str, Any]]]:
    """The ``(agent, payload)`` calls the agent would make while the session ran."""
    transcript = str(session.path)
    if session.agent == "cursor":
        return [("cursor", payload) for payload in cursor_payloads(session.path, thread, cwd)]
    if session.agent == "gemini":
        event = {"hook_event_name": "AfterAgent", "prompt": "", "prompt_response": "", "stop_hook_active": False}
        return [("gemini", {"session_id": thread, "transcript_path": transcript, "cwd": cwd, **event})]
    return [
        (session.agent, {"session_id": thread, "transcript_path": transcript, "cwd": cwd, "hook_event_name": "Stop"})
    ]


def start_payload(agent: str, thread: str, cwd: str, work: Path) -> dict[str, Any]:
    """The payload a new session of the same project sends on start."""
    if agent == "cursor":
        return {
            "hook_event_name": "sessionStart",
            "conversation_id": thread,
            "session_id": thread,
            "generation_id": f"{thread}-0",
            "workspace_roots": [cwd],
        }
    event = {"hook_event_name": "SessionStart", "source": "startup"}
    return {"session_id": thread, "transcript_path": str(work / "none.jsonl"), "cwd": cwd, **event}


def memory_of(agent: str, stdout: str) -> str:
    """The memory text out of the agent's ``SessionStart`` reply."""
    if not stdout.strip():
        return ""
    reply = json.loads(stdout)
    if agent == "cursor":
        return str(reply.get("additional_context", ""))
    return str(reply.get("hookSpecificOutput", {}).get("additionalContext", ""))


def palimpsest(code: Path, store: Path, args: list[str], stdin: dict[str, Any] | None = None, **env: str) -> str:
    """Run the ``palimpsest`` command of checkout ``code`` on ``store``; its stdout."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
    environment |= {"PYTHONPATH": str(code), "PALIMPSEST_STORE": f"sqlite:///{store}"}
    environment |= {"PALIMPSEST_HOOK_FOLLOW_UP": "off", **env}
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


def estimate_tokens(code: Path, text: str) -> int:
    """Tokens of ``text`` as checkout ``code`` counts them (its startup budget counts the same way)."""
    script = "import sys; from palimpsest.graph_schema.identity import estimate_tokens as e; print(e(sys.stdin.read()))"
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=text,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(code)},
        cwd=code,
        check=True,
    )
    return int(done.stdout)


def measure(code: Path, session: Session, budget: int) -> Score:
    """Replay ``session`` through checkout ``code`` in a store of its own; the new session's memory, scored."""
    thread, cwd = identity(session)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        store = work / "memory.db"
        for agent, payload in replay_payloads(session, thread, cwd):
            palimpsest(code, store, ["hook", agent], payload)
        palimpsest(code, store, ["maintain", "--once"])
        start = start_payload(session.agent, f"bench-new-{session.key}", cwd, work)
        out = palimpsest(code, store, ["hook", session.agent], start, PALIMPSEST_STARTUP_BUDGET=str(budget))
    memory = memory_of(session.agent, out)
    return score(session.gold, memory, estimate_tokens(code, memory))


def load_sessions(folder: Path, gold_path: Path, only: set[str], half: str | None) -> list[Session]:
    """The sessions of the gold file whose capture is in ``folder`` (the rest are named and skipped)."""
    document = json.loads(gold_path.read_text(encoding="utf-8"))
    sessions, missing = [], []
    for key, gold in document["sessions"].items():
        if (only and key not in only) or (half and gold["half"] != half):
            continue
        if gold["agent"] not in AGENTS:
            raise SystemExit(f"{key}: no replay for agent {gold['agent']!r} (known: {', '.join(AGENTS)})")
        path = folder / gold["file"]
        if path.is_file():
            sessions.append(Session(key, gold["agent"], path, gold))
        else:
            missing.append(gold["file"])
    if missing:
        print(f"not in {folder.name}/, skipped: {', '.join(missing)}", file=sys.stderr)
    if not sessions:
        raise SystemExit(f"no captured session of the gold in {folder}")
    return sessions


def share(flags: list[bool]) -> str:
    return f"{sum(flags)}/{len(flags)}" if flags else "-"


def cells(row: Score, gold: dict[str, Any]) -> list[str]:
    """A session's scores as table cells."""
    kind = gold["ending"]["kind"]
    return [
        share(row.requests),
        ("yes " if row.ending else "no ") + kind,
        share(row.open),
        str(len(row.stale)),
        share(row.facts),
        str(len(row.noise)),
        str(row.tokens),
    ]


COLUMNS = ("requests", "ending", "open", "finished as open", "facts", "noise", "tokens")


def session_table(sessions: list[Session], results: dict[str, dict[str, Score]], codes: list[str]) -> Table:
    table = Table(title="start-of-session memory, per session")
    for name in ("session", "agent", "lines", "half"):
        table.add_column(name)
    for column in COLUMNS:
        for code in codes:
            table.add_column(column if len(codes) == 1 else f"{column} ({code})", justify="right")
    for session in sessions:
        per_code = [cells(results[code][session.key], session.gold) for code in codes]
        values = [per_code[c][i] for i in range(len(COLUMNS)) for c in range(len(codes))]
        table.add_row(session.key, session.agent, str(session.gold["lines"]), session.half, *values)
    return table


def totals(rows: list[Score]) -> list[str]:
    """A half's summary: shares over all its gold items, counts summed, tokens averaged."""

    def pooled(name: str) -> str:
        flags = [flag for row in rows for flag in getattr(row, name)]
        return f"{sum(flags) / len(flags):.0%} ({sum(flags)}/{len(flags)})" if flags else "-"

    endings = sum(row.ending for row in rows)
    return [
        pooled("requests"),
        f"{endings / len(rows):.0%} ({endings}/{len(rows)})",
        pooled("open"),
        str(sum(len(row.stale) for row in rows)),
        pooled("facts"),
        str(sum(len(row.noise) for row in rows)),
        f"{sum(row.tokens for row in rows) / len(rows):.0f}",
    ]


def summary_table(sessions: list[Session], results: dict[str, dict[str, Score]], codes: list[str]) -> Table:
    table = Table(title="summary per half (shares pooled over gold items; noise and finished-as-open summed)")
    for name in ("half", "code", "sessions", *COLUMNS[:-1], "mean tokens"):
        table.add_column(name, justify="right" if name not in ("half", "code") else "left")
    for half in ("tune", "check", "all"):
        chosen = [s for s in sessions if half in ("all", s.half)]
        if not chosen:
            continue
        for code in codes:
            table.add_row(half, code, str(len(chosen)), *totals([results[code][s.key] for s in chosen]))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("captures", type=Path, help="CAPTURES_DIR: the real sessions, as AGENT/FILE (see the gold)")
    parser.add_argument("--before", type=Path, help="OTHER_CHECKOUT to measure beside this one (main's, say)")
    parser.add_argument("--budget", type=int, default=1500, help="PALIMPSEST_STARTUP_BUDGET (default 1500)")
    parser.add_argument("--gold", type=Path, default=GOLD, help="the gold file (default bench/startup_gold.json)")
    parser.add_argument("--only", action="append", default=[], help="measure this session key only (repeatable)")
    parser.add_argument("--half", choices=("tune", "check"), help="measure one half only")
    parser.add_argument("--jobs", type=int, default=1, help="sessions replayed at once (default 1)")
    parser.add_argument("--json", type=Path, help="OUT: write each memory and its scores here")
    options = parser.parse_args()
    sessions = load_sessions(options.captures, options.gold, set(options.only), options.half)
    codes = {"this": HERE} | ({"before": options.before.resolve()} if options.before else {})
    results: dict[str, dict[str, Score]] = {}
    for name, code in codes.items():
        with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            scored = pool.map(lambda s, c=code: measure(c, s, options.budget), sessions)
            results[name] = {session.key: row for session, row in zip(sessions, scored, strict=True)}
    console = Console(width=240)
    console.print(f"budget {options.budget} tokens; {len(sessions)} real sessions, gold read by hand")
    console.print(session_table(sessions, results, list(codes)))
    console.print(summary_table(sessions, results, list(codes)))
    if options.json:
        dump = {
            key: {"agent": s.agent, "half": s.half, **{name: asdict(results[name][key]) for name in codes}}
            for s in sessions
            for key in [s.key]
        }
        options.json.write_text(json.dumps(dump, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
