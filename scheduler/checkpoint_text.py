"""The checkpoint as data and as text: its sections, how it is written, fitted, read back and merged.

Both summarizers write the same sections (`SECTIONS`), so that a level-2 checkpoint can
merge level-1 checkpoints whoever wrote them: `parse_checkpoint` reads any of them back
into sections (tolerating the headings models vary), `merge_checkpoints` combines them
field by field — files by path with their counts added, commands by command line with
the latest status, the most recent state and next steps — instead of re-reading
sentences, and `fit` writes the result under a token budget by dropping items, never
by cutting the text mid-line.

Same input, same text: no randomness, no set iteration, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from palimpsest.scheduler.session_facts import CommandRun, FileChange, clip, describe_change, describe_command

#: The checkpoint's sections, in the order they are written; empty ones are left out.
SECTIONS = (
    "Objective",
    "Events",
    "Completed",
    "Current state",
    "Files modified",
    "Files read",
    "Commands",
    "Failed attempts",
    "Decisions",
    "Open processes",
    "Next steps",
)
#: Starts the last line, which names topics the checkpoint leaves out.
EXPAND_PREFIX = "Expand for details about:"
#: Headings of older checkpoints, read as today's sections.
_ALIASES = {"important files": "Files read"}

ITEM_CHARS = 220
_TOPICS = 8
_TOPIC_CHARS = 48
_LIMITS = {"Files modified": 12, "Files read": 10, "Commands": 8, "Events": 40}
_DEFAULT_LIMIT = 6
#: Sections in time order: fitting drops their oldest item first (the rest lose their last).
_DROP_FRONT = (
    "Events",
    "Completed",
    "Current state",
    "Commands",
    "Failed attempts",
    "Decisions",
    "Open processes",
    "Next steps",
)
#: Sections fitting trims first, in this order: what sentences suggest goes before what the
#: tool calls prove, and decisions (the hardest to recover) last among them.
_SOFT = ("Completed", "Files read", "Open processes", "Current state", "Next steps", "Decisions")
_HEADING_RE = re.compile(
    r"^\s*#{0,6}\s*\*{0,2}\s*(" + "|".join([*SECTIONS, *(a.title() for a in _ALIASES)]) + r")\s*\*{0,2}\s*"
    r"(?::\s*\*{0,2}\s*(.*))?$",
    re.IGNORECASE,
)
_BULLET_RE = re.compile(r"^\s*(?:#{1,6}\s+|[-*•>]\s+|\d+[.)]\s+)+")
_NONE_ITEM = re.compile(r"^\(?(?:none|n/a|nothing)\)?\.?$", re.IGNORECASE)
_CHANGE_RE = re.compile(r"^(?P<path>.+?) \((?P<action>created|edited|deleted)(?: ×(?P<count>\d+))?\)$")
_COMMAND_RE = re.compile(r"^`(?P<command>.+)` → (?P<status>.+?)(?: \(×(?P<count>\d+)\))?$")
_NON_WORD = re.compile(r"\W+")
_JSON_RE = re.compile(r"\{\s*\"[^\"]*\"\s*:.*", re.DOTALL)


@dataclass
class Checkpoint:
    """The sections of one checkpoint as lists of items, before it is fitted and written."""

    sections: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in SECTIONS})
    topics: list[str] = field(default_factory=list)
    #: Items at the front of "Next steps" that fitting keeps longest (the last user request).
    pinned_next: int = 0
    #: The first sentence of the sources: the one-line checkpoint when nothing else fits.
    lead: str = ""


def tidy_item(item: str) -> str:
    """An item on one line, clipped, with any JSON object cut out (a checkpoint never holds raw JSON)."""
    return clip(_JSON_RE.sub("{…}", item), ITEM_CHARS)


def tidy(checkpoint: Checkpoint) -> None:
    """Drop duplicates, cut JSON and keep each section to its size."""
    for name, items in checkpoint.sections.items():
        first_seen: dict[str, str] = {}
        for item in items:
            cleaned = tidy_item(item)
            if cleaned:
                first_seen.setdefault(_key(cleaned), cleaned)
        unique = list(first_seen.values())
        limit = _LIMITS.get(name, _DEFAULT_LIMIT) + (checkpoint.pinned_next if name == "Next steps" else 0)
        if len(unique) > limit:
            pinned = checkpoint.pinned_next if name == "Next steps" else 0
            if name in _DROP_FRONT:
                unique = unique[:pinned] + unique[len(unique) - (limit - pinned) :]
            else:
                unique = unique[:limit]
        checkpoint.sections[name] = unique
    checkpoint.topics = list(dict.fromkeys(tidy_item(topic) for topic in checkpoint.topics if topic.strip()))


def _key(item: str) -> str:
    return " ".join(_NON_WORD.sub(" ", item.lower()).split())


def render(checkpoint: Checkpoint) -> str:
    """The checkpoint as text: a ``## Section`` heading and ``- item`` lines per non-empty section.

    The last line names topics not already in the text, so an agent knows what
    ``expand`` would bring back.
    """
    lines: list[str] = []
    for name in SECTIONS:
        items = checkpoint.sections[name]
        if items:
            lines.append(f"## {name}")
            lines += [f"- {item}" for item in items]
    body = "\n".join(lines)
    lowered = body.lower()
    topics = [clip(t, _TOPIC_CHARS) for t in checkpoint.topics if t.lower() not in lowered]
    topics = list(dict.fromkeys(topics))[:_TOPICS]
    if topics:
        expand = f"{EXPAND_PREFIX} {', '.join(topics)}"
        body = f"{body}\n{expand}" if body else expand
    return body


def fit(checkpoint: Checkpoint, budget_tokens: int) -> str:
    """The longest rendering of ``checkpoint`` within ``budget_tokens`` (estimate_tokens: 4 characters a token).

    Items go one at a time: first from the sections read from sentences, in `_SOFT`
    order (decisions last), then from the fullest of those the tool calls prove (files
    modified, commands, failures); each loses its oldest item if it is in time order,
    its last otherwise, and the objective goes last. When even the objective alone is too long, a
    single clipped line. A budget below one token gives empty text.
    """
    max_chars = 4 * budget_tokens
    text = render(checkpoint)
    if len(text) <= max_chars:
        return text
    sections = {name: list(items) for name, items in checkpoint.sections.items()}
    trimmed = Checkpoint(sections=sections, topics=list(checkpoint.topics), pinned_next=checkpoint.pinned_next)
    while True:
        droppable = [name for name in SECTIONS[1:] if sections[name]]
        if not droppable:
            trimmed.topics = []
            text = render(trimmed)
            if len(text) <= max_chars:
                return text
            break
        soft = [name for name in _SOFT if sections[name] and (name != "Next steps" or len(sections[name]) > 1)]
        name = soft[0] if soft else max(droppable, key=lambda n: (len(sections[n]), sum(len(i) for i in sections[n])))
        items = sections[name]
        pinned = min(trimmed.pinned_next, len(items) - 1) if name == "Next steps" else 0
        items.pop(pinned if name in _DROP_FRONT else len(items) - 1)
        if name == "Next steps":
            trimmed.pinned_next = min(trimmed.pinned_next, len(items))
        text = render(trimmed)
        if len(text) <= max_chars:
            return text
    first_item = next((items[0] for items in checkpoint.sections.values() if items), checkpoint.lead)
    return clip(f"Checkpoint: {first_item or 'no text'}", max_chars)


def parse_checkpoint(text: str) -> Checkpoint:
    """Read a checkpoint back into sections, whoever wrote it.

    Tolerant on purpose: LLM checkpoints vary headings (``## Objective``, ``**Decisions:**``,
    ``Next steps: ...``); the lines of a text without headings (a one-line checkpoint)
    are read as what it completed, the first also kept as its lead.
    """
    checkpoint = Checkpoint()
    current: str | None = None
    loose: list[str] = []
    canonical = {name.lower(): name for name in SECTIONS} | _ALIASES
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.lower().startswith(EXPAND_PREFIX.lower()):
            topics = line[len(EXPAND_PREFIX) :].strip().rstrip(".")
            checkpoint.topics += [topic.strip() for topic in topics.split(",") if topic.strip()]
            continue
        heading = _HEADING_RE.match(line)
        if heading:
            current = canonical[heading.group(1).lower()]
            line = heading.group(2) or ""
            if not line.strip():
                continue
        item = _BULLET_RE.sub("", line).strip()
        if not item or _NONE_ITEM.match(item):
            continue
        if current is None:
            loose.append(item)
        elif current == "Files read":
            checkpoint.sections[current].append(item.split(" — ")[0])
        else:
            checkpoint.sections[current].append(item)
    if loose:
        if not any(checkpoint.sections.values()):
            loose[0] = checkpoint.lead = re.sub(r"^checkpoint:\s*", "", loose[0], flags=re.IGNORECASE)
        checkpoint.sections["Completed"][:0] = loose
    return checkpoint


def merge_checkpoints(children: Sequence[Checkpoint]) -> Checkpoint:
    """One checkpoint over several consecutive ones, oldest first, field by field.

    The objective is the first child's; current state and next steps are the latest
    child's that has any (the most recent state wins); files modified add their
    counts by path, commands keep their latest status by command line; files read
    leave out what was modified; the other sections are the children's items in
    order, deduplicated.
    """
    merged = Checkpoint(lead=next((child.lead for child in children if child.lead), ""))
    sections = merged.sections
    sections["Objective"] = next((c.sections["Objective"][:1] for c in children if c.sections["Objective"]), [])
    for name in ("Current state", "Next steps"):
        sections[name] = next((c.sections[name] for c in reversed(children) if c.sections[name]), [])
    for name in ("Events", "Completed", "Failed attempts", "Decisions", "Open processes"):
        sections[name] = [item for child in children for item in child.sections[name]]
    changes: dict[str, FileChange] = {}
    runs: dict[str, CommandRun] = {}
    loose_files: list[str] = []
    for child in children:
        for item in child.sections["Files modified"]:
            match = _CHANGE_RE.match(item)
            if match is None:
                loose_files.append(item)
                continue
            count = int(match.group("count") or 1)
            known = changes.get(match.group("path"))
            if known is None:
                changes[match.group("path")] = FileChange(match.group("action"), count)
            else:
                known.count += count
                known.action = "deleted" if match.group("action") == "deleted" else known.action
        for item in child.sections["Commands"]:
            match = _COMMAND_RE.match(item)
            command = match.group("command") if match else item
            known_run = runs.pop(command, None)
            count = int(match.group("count") or 1) if match else 1
            status = match.group("status") if match else ""
            runs[command] = CommandRun(command, status, count + (known_run.count if known_run else 0))
    sections["Files modified"] = [describe_change(path, change) for path, change in changes.items()] + loose_files
    sections["Commands"] = [describe_command(run) if run.status else run.command for run in runs.values()]
    reads = [path for child in children for path in child.sections["Files read"]]
    sections["Files read"] = [path for path in dict.fromkeys(reads) if path not in changes]
    merged.topics = [topic for child in reversed(children) for topic in child.topics]
    tidy(merged)
    return merged
