"""The viewer's search: ``grep_memories`` in any of its modes, each hit linked to where it sits.

No mode asked means what the tools mean by none: hybrid when the server has an
embedder and the partition has vectors of its model, else text; the page says which
mode ran. A message hit links to the message on its page of the conversation (its
folded call opened), a summary hit to its messages highlighted there, a fact to its
row on its project's page; a message a summary folds also links to that summary.
"""

from __future__ import annotations

from dataclasses import dataclass

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import MAX_BATCH
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import Embedder
from palimpsest.server.retrieval.grep import GrepHit, GrepMode, grep_memories
from palimpsest.server.ui.links import partition_url, project_url, ref_url, summary_url, thread_url

#: Search hits shown.
SEARCH_HITS = 30
#: The modes a search may ask for, in the order the form offers them.
MODES: tuple[GrepMode, ...] = ("text", "regex", "semantic", "hybrid")


@dataclass
class HitRow:
    """A hit and where it leads."""

    hit: GrepHit
    url: str
    #: The lowest summary folding a message hit, highlighted in the conversation.
    summary_url: str | None = None


@dataclass
class SearchPage:
    """The hits of one search and the mode that ran."""

    query: str
    mode: str
    hits: list[HitRow]


def parse_mode(raw: str | None) -> GrepMode | None:
    """The mode a query asks for (None: let the search choose).

    Raises:
        InvalidInput: for a mode that is none of `MODES`.
    """
    if raw in (None, ""):
        return None
    for mode in MODES:
        if raw == mode:
            return mode
    raise InvalidInput(f"unknown search mode {raw!r}: use {', '.join(MODES)}, or none for the default")


async def search(
    store: MemoryStore, partition: str, query: str, mode: GrepMode | None, embedder: Embedder | None
) -> SearchPage:
    """Search messages, summaries and facts of ``partition``; link each hit."""
    found = await grep_memories(
        store,
        query,
        partition=partition,
        mode=mode,
        kinds=("message", "summary", "fact"),
        limit=SEARCH_HITS,
        embedder=embedder,
    )
    message_ids = [hit.id for hit in found.hits if hit.kind == "message"][:MAX_BATCH]
    refs = {ref.id: ref for ref in await store.message_refs(partition, message_ids)}
    covering = sorted({hit.covered_by[0] for hit in found.hits if hit.kind == "message" and hit.covered_by})
    summaries = {node_id: await store.get_summary(partition, node_id) for node_id in covering}
    for hit in found.hits:
        if hit.kind == "summary":
            summaries[hit.id] = await store.get_summary(partition, hit.id)
    facts = {fact.id: fact for fact in await store.get_facts(partition, [h.id for h in found.hits if h.kind == "fact"])}
    rows = []
    for hit in found.hits:
        if hit.kind == "message" and hit.id in refs:
            cover = summaries.get(hit.covered_by[0]) if hit.covered_by else None
            rows.append(HitRow(hit, ref_url(refs[hit.id]), summary_url(cover) if cover else None))
        elif hit.kind == "summary":
            rows.append(HitRow(hit, summary_url(summaries[hit.id])))
        elif hit.kind == "fact" and hit.id in facts:
            rows.append(HitRow(hit, project_url(partition, facts[hit.id].project) + f"#fact-{hit.id}"))
        elif hit.thread_id is not None:
            rows.append(HitRow(hit, thread_url(partition, hit.thread_id)))
        else:
            rows.append(HitRow(hit, partition_url(partition)))
    return SearchPage(query=query, mode=found.mode, hits=rows)
