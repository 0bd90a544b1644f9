"""A project's page: what a new session would be told now, and its facts, each led back to its messages.

The start memory is `project_memory` called as the ``SessionStart`` hook calls it for a
new session (the server's ``startup_budget``, no working tree known), so the page
shows the very text an agent would get, not a paraphrase. Every id in it (a session's
thread, a summary, a message, a fact) becomes a link: a summary to its messages
highlighted in the conversation, a message to its place there, a fact to its row
below. Facts are listed current and superseded alike, each with links to the
messages it was extracted from (its ``EXTRACTED_FROM`` sources).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from palimpsest.graph_schema.errors import NotFound
from palimpsest.graph_schema.models import MAX_BATCH, Fact, MessageRef
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.retrieval.startup import project_memory
from palimpsest.server.ui.links import ref_url, summary_url, thread_url

#: Facts listed on a project's page, newest first.
FACTS_LISTED = 500
#: Ids the start memory names, and session headings (``### <thread id> (``).
_IDS = re.compile(r"\b(?:msg|sum|fact)_[0-9a-f]{16,64}\b")
_HEADING = re.compile(r"^### (\S+) \(", re.MULTILINE)


@dataclass
class Segment:
    """A piece of the start memory's text, linked when it names something."""

    text: str
    url: str | None = None


@dataclass
class FactRow:
    """One fact with the links to its source messages."""

    fact: Fact
    sources: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def current(self) -> bool:
        """Whether no newer fact replaced it."""
        return self.fact.valid_until is None


@dataclass
class ProjectPage:
    """The start memory of a project, linked, and its facts."""

    partition: str
    project: str | None
    budget: int
    memory: list[Segment]
    facts: list[FactRow]


async def _refs(store: MemoryStore, partition: str, ids: list[str]) -> dict[str, MessageRef]:
    refs: dict[str, MessageRef] = {}
    for start in range(0, len(ids), MAX_BATCH):
        for ref in await store.message_refs(partition, ids[start : start + MAX_BATCH]):
            refs[ref.id] = ref
    return refs


def _segments(text: str, links: dict[str, str | None]) -> list[Segment]:
    """The text cut at every linked name."""
    segments: list[Segment] = []
    cuts = sorted(
        [(match.start(), match.end(), match.group(0)) for match in _IDS.finditer(text)]
        + [(match.start(1), match.end(1), match.group(1)) for match in _HEADING.finditer(text)]
    )
    position = 0
    for start, end, name in cuts:
        if start < position:
            continue
        segments.append(Segment(text[position:start]))
        segments.append(Segment(name, links.get(name)))
        position = end
    segments.append(Segment(text[position:]))
    return [segment for segment in segments if segment.text]


async def project_page(store: MemoryStore, partition: str, project: str | None, budget: int) -> ProjectPage:
    """The page of ``project`` in ``partition`` (None: every session of the partition)."""
    memory = await project_memory(store, partition=partition, project=project, budget_tokens=budget)
    facts = await store.list_facts(partition, project=project, current_only=False, limit=FACTS_LISTED)
    named = sorted(set(_IDS.findall(memory)))
    message_ids = sorted({source for fact in facts for source in fact.source_message_ids})
    message_ids += [node for node in named if node.startswith("msg_") and node not in message_ids]
    refs = await _refs(store, partition, message_ids)
    links: dict[str, str | None] = {}
    for node in named:
        if node.startswith("fact_"):
            links[node] = f"#fact-{node}"
        elif node.startswith("msg_"):
            links[node] = ref_url(refs[node]) if node in refs else None
        else:
            links[node] = await _summary_link(store, partition, node)
    for match in _HEADING.finditer(memory):
        links[match.group(1)] = thread_url(partition, match.group(1))
    rows = [
        FactRow(fact, [(source, ref_url(refs[source]) if source in refs else None) for source in sources])
        for fact in facts
        for sources in [fact.source_message_ids]
    ]
    rows.sort(key=lambda row: (not row.current, -row.fact.created_at.timestamp(), row.fact.id))
    return ProjectPage(partition, project, budget, _segments(memory, links), rows)


async def _summary_link(store: MemoryStore, partition: str, summary_id: str) -> str | None:
    try:
        return summary_url(await store.get_summary(partition, summary_id))
    except NotFound:
        return None
