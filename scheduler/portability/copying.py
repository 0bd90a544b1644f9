"""Writing a memory into a store with the transfer verbs, thread by thread: migrate's copy, and vectors for both.

Migrate copies threads (messages, then summaries lowest level first), each thread's
fact layer, then facts and vectors, in batches of one transaction each, reading the
source as it goes. Every verb skips what the target already holds, so a copy that
stopped half-way, run again, writes only the rest, and one that finished writes
nothing. Import holds the whole archive already and checks it against the store before
writing it with one `MemoryStore.restore_records` call (``export.import_archive``); it
shares only `copy_vectors`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from palimpsest.graph_schema.models import Fact, FactLayerState, StoredVector, ThreadSnapshot
from palimpsest.graph_schema.store import MemoryStore

#: Records written per transaction: one commit each, small enough for Neo4j's memory.
BATCH = 1000

#: Told how many messages were just copied, to move a progress bar.
Advance = Callable[[int], None]


async def copy_thread(target: MemoryStore, snapshot: ThreadSnapshot, advance: Advance | None = None) -> tuple[int, int]:
    """Write one thread, its messages and its summaries into ``target``.

    Returns:
        How many messages and summaries were written (those already there are not counted).
    """
    written_messages = written_summaries = 0
    messages = sorted(snapshot.messages, key=lambda message: message.seq)
    for start in range(0, max(len(messages), 1), BATCH):
        batch = messages[start : start + BATCH]
        written_messages += await target.restore_thread(snapshot.thread, batch)
        if advance is not None:
            advance(len(batch))
    summaries = sorted(snapshot.summaries, key=lambda summary: (summary.level, summary.first_seq))
    for start in range(0, len(summaries), BATCH):
        written_summaries += await target.restore_summaries(summaries[start : start + BATCH])
    return written_messages, written_summaries


async def copy_fact_layer(target: MemoryStore, layer: FactLayerState) -> None:
    """The thread's fact-layer switch and extraction cursor, as the source had them."""
    if not layer.enabled:
        await target.set_fact_layer(layer.partition, layer.thread_id, False)
    if layer.extracted_seq >= 0:
        await target.advance_fact_cursor(layer.partition, layer.thread_id, layer.extracted_seq)


async def copy_facts(target: MemoryStore, facts: Sequence[Fact]) -> int:
    """Facts in batches, then once more so a SUPERSEDES edge to a later batch is written too."""
    written = 0
    for start in range(0, len(facts), BATCH):
        written += await target.restore_facts(facts[start : start + BATCH])
    if len(facts) > BATCH:
        for start in range(0, len(facts), BATCH):
            await target.restore_facts(facts[start : start + BATCH])
    return written


async def copy_vectors(target: MemoryStore, vectors: Sequence[StoredVector]) -> int:
    """Vectors grouped by model, each group after `ensure_vector_index` for its size.

    A node's pieces (its vectors, in order) go in one `MemoryStore.set_embeddings` call,
    which replaces what the node had: a batch never splits them.
    """
    by_model: dict[str, dict[str, list[StoredVector]]] = defaultdict(dict)
    for vector in vectors:
        by_model[vector.model].setdefault(vector.node_id, []).append(vector)
    written = 0
    for model, nodes in by_model.items():
        pieces = list(nodes.values())
        await target.ensure_vector_index(len(pieces[0][0].vector), model)
        for start in range(0, len(pieces), BATCH):
            batch = [v for node in pieces[start : start + BATCH] for v in node]
            written += await target.set_embeddings([(v.node_id, v.vector) for v in batch], model)
    return written
