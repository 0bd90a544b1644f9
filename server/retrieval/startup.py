"""Memory handed back when an agent's session starts, so a new session does not start blank.

An agent only searches memory if it thinks to; a session-start hook hands it what the
project's earlier sessions left without being asked. Two cases:

- a new or cleared session (`project_memory`): each recent session of the project as a
  block (`session_blocks.py`: when it happened, by the messages' own times; each thing the
  user asked and what was done for it; what it did; how it truly ended; what is still
  open; its facts worth keeping), then facts of the project's other sessions, and one
  line on how to grep and expand;
- a resumed session, or one the agent just compacted itself (`session_memory` with
  ``resume``): that thread's ``assemble_context``, so the agent gets exact pointers back
  to what its own compaction dropped.

Sessions are ranked for the session starting: the same project first (only its sessions
when the project is known), then those on the same git branch or in the same worktree,
then those that touched the files at hand (changed in the working tree now), then the
newest. Sessions that are no work (never reached the model, only injected context) are
left out and counted. One line says how many tokens of history the memory stands for.

One budget for all of it: ``PALIMPSEST_STARTUP_BUDGET`` estimated tokens (and, for a
rules file, a cap in characters). Each session shown gets its base first (heading,
ending, whether anything is open), in rank order, while whole bases fit; the rest of the
budget is shared by rank, the first session getting the most (shares 1, 1/2, 1/3, ...),
each session filling its share with its best items, whatever a session leaves going to
the next; what is left at the end goes to the facts of sessions not shown. Items are
whole or left out, never cut mid-way, and everything is ordered by stored values (and
the working tree's branch and changed files) only, so the same memory gives the same
bytes: the agent's prompt cache, which keys on the exact prefix, stays warm from one
session to the next.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from palimpsest.graph_schema.errors import NotFound
from palimpsest.graph_schema.models import Fact
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.retrieval.session_blocks import Item, block_items, fact_score, render, shown_fact
from palimpsest.server.retrieval.standing import Standing, close_finished, read_standing

#: Earlier sessions presented, at most.
STARTUP_SESSIONS = 5
#: Sessions read to find them (some are no work), newest first.
SESSIONS_READ = 8
#: Current facts of the project looked at for sessions not shown, newest first.
STARTUP_FACTS = 60
#: Current facts of one shown session looked at.
SESSION_FACTS = 300
#: Threads of the partition listed to find the project's sessions.
THREADS_LISTED = 500
#: Longest one-line digest of a fact, in characters (its id leads to the rest).
LINE_CHARS = 300
#: A Windsurf rules file is cut off past 6,000 characters; stay under.
RULES_CHARS = 5_800
#: Seconds ``git status`` may take before the files at hand are taken as unknown.
GIT_TIMEOUT_S = 2.0
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


def _heading(standing: Standing) -> str:
    where = f", branch {standing.branch}" if standing.branch else ""
    pointer = f"summary {standing.summary_id}" if standing.summary_id else f"last message {standing.last_message_id}"
    return f"### {standing.thread.id} ({_when(standing)}{where}, {standing.thread.message_count} messages; {pointer})\n"


def _fill(items: list[Item], chosen: list[Item], room: int) -> int:
    """Add ``items`` best first while they fit in ``room`` characters; how many characters they took.

    A label is paid for with its part's first item; an upgrade takes the place of the item
    it enriches, for the characters it adds, and only once that item is chosen.
    """
    used = 0
    labels = {item.part: item for item in items if item.label}
    ordered = sorted((item for item in items if not item.label), key=lambda item: (item.rank, item.part, item.position))
    for item in ordered:
        placed = any((c.part, c.position) == (item.part, item.position) for c in chosen)
        if item in chosen or (placed and not item.upgrade):
            continue
        if item.upgrade:
            base = next((c for c in chosen if (c.part, c.position) == (item.part, item.position)), None)
            if base is None or base.upgrade or used + len(item.text) - len(base.text) > room:
                continue
            chosen[chosen.index(base)] = item
            used += len(item.text) - len(base.text)
            continue
        label = labels.get(item.part)
        cost = len(item.text) + (len(label.text) if label is not None and label not in chosen else 0)
        if used + cost > room:
            continue
        if label is not None and label not in chosen:
            chosen.append(label)
        chosen.append(item)
        used += cost
    return used


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
    others: list[Fact] = []
    if threads:
        others = await store.list_facts(partition, project=project, current_only=True, limit=STARTUP_FACTS)
    if not work and not others:
        return ""
    where = f" of project {project}" if project else ""
    tokens = sum(standing.tokens for standing in work)
    dates = sorted(standing.last_at for standing in work if standing.last_at)
    span = f", {dates[0]:%Y-%m-%d} to {dates[-1]:%Y-%m-%d}" if dates else ""
    skipped = f"; {not_work} session{'s' if not_work > 1 else ''} with no work left out" if not_work else ""
    heading = (
        f"# Memory{where} from earlier sessions (Palimpsest)\n"
        f"Stands for {tokens:,} tokens of history in {len(work)} "
        f"session{'s' if len(work) != 1 else ''}{span}{skipped}.\n" + HOW_TO
    )
    room = min(budget_tokens * 4, max_chars if max_chars is not None else budget_tokens * 4) - len(heading)
    if room < 0:
        return ""
    section = "\n## Where things stand, most relevant session first\n"
    blocks: list[tuple[Standing, list[Item], Item, Item]] = []
    for standing in work[:STARTUP_SESSIONS]:
        facts = await store.list_facts(partition, thread_id=standing.thread.id, current_only=True, limit=SESSION_FACTS)
        facts.sort(key=lambda fact: (fact.created_at, fact.id))
        items, brief, full = block_items(standing, facts, pointer=_heading(standing))
        blocks.append((standing, items, brief, full))
    shown: list[tuple[list[Item], list[Item], Item, Item]] = []
    for _standing, items, brief, full in blocks:
        base = [item for item in items if item.rank == 0.0] + [brief]
        cost = sum(len(item.text) for item in base) + (len(section) if not shown else 0)
        if cost <= room:
            shown.append((items, base, brief, full))
            room -= cost
    text = heading
    if shown:
        weights = [1 / (rank + 1) for rank in range(len(shown))]
        for index, (items, chosen, brief, full) in enumerate(shown):
            share = int(room * weights[index] / sum(weights[index:]))
            used = 0
            if len(full.text) - len(brief.text) <= share and full.text != brief.text:
                chosen[chosen.index(brief)] = full
                used += len(full.text) - len(brief.text)
            used += _fill(items, chosen, share - used)
            room -= used
        for items, chosen, _brief, _full in shown:  # what a share left, best items first
            room -= _fill(items, chosen, room)
        text += section + "".join(render(chosen) for _items, chosen, _brief, _full in shown)
    shown_threads = {standing.thread.id for standing in work[:STARTUP_SESSIONS]}
    rest = [fact for fact in others if fact.thread_id not in shown_threads and shown_fact(fact)]
    rest.sort(key=lambda fact: (-fact_score(fact), _inverse(fact.created_at.isoformat()), fact.id))
    lines = [f"- {_one_line(fact.text)} ({fact.kind}, fact {fact.id})\n" for fact in rest]
    facts_heading = "\n## Facts of other sessions\n"
    if lines and len(facts_heading) + len(lines[0]) <= room:
        room -= len(facts_heading)
        text += facts_heading
        for line in lines:
            if len(line) <= room:
                text += line
                room -= len(line)
    return text


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
