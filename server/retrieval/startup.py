"""Memory handed back when an agent's session starts, so a new session does not start blank.

An agent only searches memory if it thinks to; a session-start hook hands it what the
project's earlier sessions left without being asked. Two cases:

- a new or cleared session (`project_memory`): where each recent session of the project
  stands (`standing.py`: when it happened, by the messages' own times; what it set out
  to do; what it did; how it ended; what is still open), then the project's current
  facts, and one line on how to grep and expand;
- a resumed session, or one the agent just compacted itself (`session_memory` with
  ``resume``): that thread's ``assemble_context``, so the agent gets exact pointers back
  to what its own compaction dropped.

Sessions are ranked for the session starting: the same project first (only its sessions
when the project is known), then those on the same git branch or in the same worktree,
then those that touched the files at hand (changed in the working tree now), then the
newest. Sessions that are no work (never reached the model, only injected context) are
left out and counted. One line says how many tokens of history the memory stands for.

Both fit ``PALIMPSEST_STARTUP_BUDGET`` estimated tokens (and, for a rules file, a cap in
characters). Items are whole or left out, never cut mid-way, and everything is ordered
by stored values (and the working tree's branch and changed files) only, so the same
memory gives the same bytes: the agent's prompt cache, which keys on the exact prefix,
stays warm from one session to the next.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from palimpsest.graph_schema.errors import NotFound
from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import Fact
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.retrieval.standing import Standing, close_finished, read_standing

#: Earlier sessions presented, at most.
STARTUP_SESSIONS = 5
#: Sessions read to find them (some are no work), newest first.
SESSIONS_READ = 8
#: Current facts looked at, newest first.
STARTUP_FACTS = 60
#: Threads of the partition listed to find the project's sessions.
THREADS_LISTED = 500
#: Longest one-line digest of a fact, in characters (its id leads to the rest).
LINE_CHARS = 300
#: A Windsurf rules file is cut off past 6,000 characters; stay under.
RULES_CHARS = 5_800
#: Seconds ``git status`` may take before the files at hand are taken as unknown.
GIT_TIMEOUT_S = 2.0
#: Fact kinds in the order they are shown: what was decided and set before what was run.
#: A file's own facts are left out: each session's line names the files it changed.
FACT_ORDER = ("decision", "configuration", "dependency", "commit", "technology", "recommendation", "change", "command")
HOW_TO = (
    "Search all of it with grep_memories(query) or recall(query); expand_summary(id) gives back "
    "the exact messages a summary covers, describe_summary(id) says what it spans.\n"
)


def _one_line(text: str, limit: int = LINE_CHARS) -> str:
    """Text on one line, at most ``limit`` characters, cut at a word with an ellipsis."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rsplit(" ", 1)[0] + "…"


@dataclass(frozen=True)
class WorkingTree:
    """What the starting session has at hand: its directory, git branch and changed files."""

    cwd: str | None = None
    branch: str | None = None
    changed: tuple[str, ...] = ()


def working_tree(cwd: str | None) -> WorkingTree:
    """The branch and changed files of the git work tree at ``cwd`` (nothing known outside one)."""
    if not cwd or not Path(cwd).is_dir():
        return WorkingTree(cwd)
    try:
        done = subprocess.run(
            ["git", "-C", cwd, "status", "--porcelain=v1", "--branch", "-z"],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return WorkingTree(cwd)
    if done.returncode != 0:
        return WorkingTree(cwd)
    branch: str | None = None
    changed: list[str] = []
    for entry in done.stdout.decode("utf-8", "replace").split("\0"):
        if entry.startswith("## "):
            name = entry[3:].removeprefix("No commits yet on ").split("...", 1)[0].strip()
            branch = None if name.startswith("HEAD (") else name
        elif len(entry) > 3 and entry[2] == " ":
            changed.append(entry[3:])
    return WorkingTree(cwd, branch, tuple(sorted(changed)))


def _rank(standing: Standing, tree: WorkingTree) -> tuple[int, int, str, str]:
    """Sort key: same branch (or worktree, where a branch is unknown), then touched files at hand, then newest."""
    if tree.branch and standing.branch:
        same_place = standing.branch == tree.branch
    else:  # a branch unknown on either side: the same worktree directory instead
        same_place = bool(tree.cwd) and standing.cwd == tree.cwd
    at_hand = any(
        path == changed or path.endswith("/" + changed) for path in standing.modified for changed in tree.changed
    )
    when = standing.last_at.isoformat() if standing.last_at else ""
    return (0 if same_place else 1, 0 if at_hand else 1, _inverse(when), standing.thread.id)


def _inverse(text: str) -> str:
    """A string that sorts in the reverse order of ``text`` (newest first inside an ascending sort)."""
    return "".join(chr(0x10FFFF - ord(char)) for char in text)


def _when(standing: Standing) -> str:
    if standing.first_at is None or standing.last_at is None:
        return "no time"
    first, last = standing.first_at, standing.last_at
    if first.date() == last.date():
        return f"{first:%Y-%m-%d %H:%M}–{last:%H:%M} UTC"
    return f"{first:%Y-%m-%d %H:%M} – {last:%Y-%m-%d %H:%M} UTC"


def _block(standing: Standing) -> str:
    """One session, whole: a heading line and what it set out to do, did, ended with, left open."""
    where = f", branch {standing.branch}" if standing.branch else ""
    pointer = f"summary {standing.summary_id}" if standing.summary_id else f"last message {standing.last_message_id}"
    lines = [
        f"### {standing.thread.id} ({_when(standing)}{where}, {standing.thread.message_count} messages; {pointer})\n"
    ]
    if standing.goal:
        lines.append(f"- Set out to: {standing.goal}\n")
    if standing.did:
        lines.append(f"- Did: {'; '.join(standing.did)}\n")
    if standing.ended:
        lines.append(f"- Ended with: {standing.ended}\n")
    if standing.open_steps:
        lines.append("- Still open: " + "; ".join(_one_line(step, 160) for step in standing.open_steps[:5]) + "\n")
    else:
        lines.append("- Still open: nothing\n")
    return "".join(lines)


def _fact_key(fact: Fact) -> tuple[int, str, str]:
    rank = FACT_ORDER.index(fact.kind) if fact.kind in FACT_ORDER else len(FACT_ORDER)
    return (rank, _inverse(fact.created_at.isoformat()), fact.id)


class _Budget:
    """Adds whole lines while the text stays within the token budget and character cap."""

    def __init__(self, tokens: int, chars: int | None) -> None:
        self.tokens, self.chars = tokens, chars
        self.text = ""
        self.left_out = 0

    def fits(self, more: str) -> bool:
        candidate = self.text + more
        return estimate_tokens(candidate) <= self.tokens and (self.chars is None or len(candidate) <= self.chars)

    def add(self, line: str) -> bool:
        if self.fits(line):
            self.text += line
            return True
        self.left_out += 1
        return False

    def section(self, heading: str, lines: Sequence[str]) -> None:
        """A heading and as many of its lines, in order, as fit (none: no heading)."""
        if not lines or not self.fits(heading + lines[0]):
            self.left_out += len(lines)
            return
        self.text += heading
        for line in lines:
            self.add(line)


async def project_memory(
    store: MemoryStore,
    *,
    partition: str,
    project: str | None,
    budget_tokens: int,
    max_chars: int | None = None,
    exclude_thread: str | None = None,
    tree: WorkingTree | None = None,
) -> str:
    """What the project's earlier sessions left, within the budget; empty when they left nothing.

    Args:
        store: The store to read (nothing is written).
        partition: The agent's partition.
        project: The project (``None``: every session of the partition).
        budget_tokens: Most estimated tokens of the whole text (0: none at all).
        max_chars: Most characters of the whole text, if capped.
        exclude_thread: The session starting now, left out of its own memory.
        tree: The starting session's working tree, for ranking (`working_tree`).
    """
    if budget_tokens <= 0:
        return ""
    tree = tree or WorkingTree()
    threads = [
        thread
        for thread in await store.list_threads(partition, limit=THREADS_LISTED)
        if (project is None or thread.project == project) and thread.id != exclude_thread and thread.message_count
    ]
    threads.sort(key=lambda thread: (thread.updated_at, thread.id), reverse=True)
    standings = list(
        await asyncio.gather(*(read_standing(store, partition, thread) for thread in threads[:SESSIONS_READ]))
    )
    work = [standing for standing in standings if standing.is_work]
    not_work = len(standings) - len(work)
    work.sort(key=lambda standing: _inverse(standing.last_at.isoformat() if standing.last_at else ""))
    close_finished(work)
    work.sort(key=lambda standing: _rank(standing, tree))
    facts: list[Fact] = []
    if threads:
        facts = await store.list_facts(partition, project=project, current_only=True, limit=STARTUP_FACTS)
    facts = [fact for fact in facts if not (fact.subject or "").startswith("file:")]
    facts.sort(key=_fact_key)
    if not work and not facts:
        return ""
    where = f" of project {project}" if project else ""
    budget = _Budget(budget_tokens, max_chars)
    shown = work[:STARTUP_SESSIONS]
    tokens = sum(standing.tokens for standing in work)
    dates = sorted(standing.last_at for standing in work if standing.last_at)
    span = f", {dates[0]:%Y-%m-%d} to {dates[-1]:%Y-%m-%d}" if dates else ""
    skipped = f"; {not_work} session{'s' if not_work > 1 else ''} with no work left out" if not_work else ""
    heading = (
        f"# Memory{where} from earlier sessions (Palimpsest)\n"
        f"Stands for {tokens:,} tokens of history in {len(work)} "
        f"session{'s' if len(work) != 1 else ''}{span}{skipped}.\n" + HOW_TO
    )
    if not budget.add(heading):
        return ""
    budget.section("\n## Where things stand, most relevant session first\n", [_block(standing) for standing in shown])
    budget.section(
        "\n## Current facts\n", [f"- {_one_line(fact.text)} ({fact.kind}, fact {fact.id})\n" for fact in facts]
    )
    return budget.text


async def session_memory(
    store: MemoryStore,
    *,
    partition: str,
    thread_id: str,
    project: str | None,
    resume: bool,
    budget_tokens: int,
    cwd: str | None = None,
) -> str:
    """The memory a starting session gets: its own thread's context when resuming, else the project's.

    A resumed or self-compacted session whose thread holds nothing yet gets the
    project's memory instead, like a new one. A budget of 0 gives nothing.
    """
    if budget_tokens <= 0:
        return ""
    if resume:
        from palimpsest.server.retrieval.context import MAX_BUDGET, MIN_BUDGET, assemble_context

        try:
            assembled = await assemble_context(
                store, thread_id, partition=partition, budget_tokens=min(max(budget_tokens, MIN_BUDGET), MAX_BUDGET)
            )
        except NotFound:
            assembled = None
        if assembled is not None and assembled.text:
            return assembled.text
    return await project_memory(
        store,
        partition=partition,
        project=project,
        budget_tokens=budget_tokens,
        exclude_thread=thread_id,
        tree=working_tree(cwd),
    )


def write_rules(path: Path, memory: str) -> bool:
    """Write memory as an always-on Windsurf rule, only when it changed; whether it wrote.

    Replaced atomically (a temporary file renamed over it), so Cascade never reads half a file.
    """
    text = "---\ntrigger: always_on\n---\n\n" + (
        memory or "# Memory from earlier sessions (Palimpsest)\n\nNothing yet.\n"
    )
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".palimpsest-", suffix=".md")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, path)
    return True
