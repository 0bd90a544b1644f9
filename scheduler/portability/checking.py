"""An archive checked against the store it goes into, before anything is written.

`format.read_archive` proves a file whole and its ids derived; what it cannot know is
the store. Written as it came, an archive whose second thread clashed with the store
failed after the first thread's messages were in, and a record whose id the store
already held was skipped whatever it said, so the store silently differed from the
archive. So import and restore first read, through the protocol, what the store holds
of every record in the file, and refuse the whole file, naming the record, when:

- a thread of the archive does not run on from the store's thread of that partition
  and id (another message at a seq both hold: it overlaps, or continues it at a seq that
  exists), or reaches into a run of it that is archived;
- a message, summary or fact the store holds has other content or fields in the archive
  (known id, other ``sha256``), or a new message's id is stored in another thread;
- a new summary would cover a node the store's summaries cover already;
- a new fact is extracted from a message neither the archive nor the store holds.

A record the store holds exactly is a duplicate and is skipped, so importing an archive
again writes nothing. Only then does the caller write (`export.import_archive`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from palimpsest.graph_schema.errors import Conflict, NotFound
from palimpsest.graph_schema.models import MAX_BATCH, Fact, Message, StoredVector, Summary, ThreadSnapshot
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.graph_schema.vectors import unit_vectors
from palimpsest.scheduler.portability.copying import Advance
from palimpsest.scheduler.portability.format import Archive

#: How far a stored vector may be from the archive's (both float32 at unit length) and still be the same.
VECTOR_TOLERANCE = 1e-6


def differing(stored: BaseModel, archived: BaseModel, *, ignore: Sequence[str] = ()) -> list[str]:
    """The fields in which two records of one id differ, by name, in the model's field order."""
    return [
        name
        for name in type(stored).model_fields
        if name not in ignore and getattr(stored, name) != getattr(archived, name)
    ]


def _chunks(items: Sequence[str]) -> list[Sequence[str]]:
    return [items[start : start + MAX_BATCH] for start in range(0, len(items), MAX_BATCH)]


class StoreCheck:
    """The checks of one archive against one store; `refuse` makes each failure's one line."""

    def __init__(self, store: MemoryStore, archive: Archive, path: Path) -> None:
        self.store = store
        self.archive = archive
        self.path = path
        #: Messages of the archive the store does not hold yet, to look up across threads.
        self.new_messages: list[Message] = []

    def refuse(self, why: str) -> Conflict:
        return Conflict(f"archive {self.path}: {why}; nothing was imported")

    async def run(self, advance: Advance | None) -> None:
        for snapshot in self.archive.threads:
            await self.thread(snapshot)
            if advance is not None:
                advance(len(snapshot.messages))
        await self.messages_elsewhere()
        await self.facts(self.archive.facts)

    async def thread(self, archived: ThreadSnapshot) -> None:
        thread = archived.thread
        try:
            stored = await self.store.snapshot(thread.partition, thread.id)
        except NotFound:
            self.new_messages.extend(archived.messages)
            return
        where = f"thread {thread.id!r} of partition {thread.partition!r}"
        for run in stored.archived:
            if any(run.first_seq <= message.seq <= run.last_seq for message in archived.messages):
                raise self.refuse(
                    f"{where} has seq {run.first_seq}-{run.last_seq} archived in {run.path}; "
                    f"run `palimpsest restore` on that file first"
                )
        live = {message.seq: message for message in stored.messages}
        for message in archived.messages:
            if message.seq >= stored.thread.message_count:
                self.new_messages.append(message)
                continue
            held = live.get(message.seq)
            if held is None or held.id != message.id:
                raise self.refuse(
                    f"message {message.id!r} is seq {message.seq} of {where} in the archive, but the store's seq "
                    f"{message.seq} is {'missing' if held is None else repr(held.id)}: the archive does not "
                    "continue the stored thread"
                )
            self.same(held, message, f"message {message.id!r} (seq {message.seq} of {where})")
        self.summaries(stored.summaries, archived.summaries, where)

    def same(self, stored: BaseModel, archived: BaseModel, what: str, *, ignore: Sequence[str] = ()) -> None:
        """Refuse a record the store holds under the same id with anything else in it."""
        fields = differing(stored, archived, ignore=ignore)
        if "sha256" in fields:
            raise self.refuse(f"{what} is in the store with other content (its sha256 differs)")
        if fields:
            raise self.refuse(f"{what} is in the store with another {' and '.join(fields)}")

    def summaries(self, stored: list[Summary], archived: list[Summary], where: str) -> None:
        held = {summary.id: summary for summary in stored}
        parents = {child_id: summary.id for summary in stored for child_id in summary.child_ids}
        for summary in archived:
            what = f"level-{summary.level} summary {summary.id!r} of {where}"
            known = held.get(summary.id)
            if known is not None:
                # One compacted further than the other has a parent the other lacks; a
                # new parent in the archive is checked as a new summary.
                unparented = known.parent_id is None or summary.parent_id is None
                self.same(known, summary, what, ignore=("parent_id",) if unparented else ())
                continue
            for child_id in summary.child_ids:
                if child_id in parents:
                    raise self.refuse(
                        f"{what} covers {child_id!r}, which the store's summary {parents[child_id]!r} covers already"
                    )

    async def messages_elsewhere(self) -> None:
        """A new message's id stored anywhere else (ids are unique across a store; a corrupt one may clash)."""
        for chunk in _chunks([message.id for message in self.new_messages]):
            refs = await self.store.message_refs(None, chunk)
            if refs:
                raise self.refuse(
                    f"message {refs[0].id!r} of the archive is stored already, at another seq or in another thread"
                )

    async def facts(self, facts: Sequence[Fact]) -> None:
        ids = [fact.id for fact in facts]
        held: dict[str, Fact] = {}
        for chunk in _chunks(ids):
            held.update((fact.id, fact) for fact in await self.store.get_facts(None, chunk))
        in_archive = {m.id: m.partition for snapshot in self.archive.threads for m in snapshot.messages}
        wanted: dict[str, set[str]] = defaultdict(set)
        for fact in facts:
            known = held.get(fact.id)
            if known is None:
                wanted[fact.partition].update(
                    source for source in fact.source_message_ids if in_archive.get(source) != fact.partition
                )
                continue
            # The store may have superseded the fact since the archive was made; a
            # successor one side lacks is left out of a one-thread export, or yet to come.
            ignore = ["valid_until"] if fact.valid_until is None else []
            if fact.superseded_by is None or known.superseded_by is None:
                ignore.append("superseded_by")
            self.same(known, fact, f"fact {fact.id!r}", ignore=ignore)
        for partition, sources in wanted.items():
            missing = set(sources)
            for chunk in _chunks(sorted(sources)):
                missing.difference_update(ref.id for ref in await self.store.message_refs(partition, chunk))
            for fact in facts:
                unknown = [s for s in fact.source_message_ids if fact.partition == partition and s in missing]
                if unknown and fact.id not in held:
                    raise self.refuse(
                        f"fact {fact.id!r} is extracted from message {unknown[0]!r}, which neither the archive "
                        f"nor the store holds in partition {partition!r}"
                    )


async def check_against_store(
    store: MemoryStore, archive: Archive, path: Path, *, advance: Advance | None = None
) -> None:
    """Refuse the archive if any of its records clashes with what the store holds (see the module).

    Only reads. ``advance`` is told how many of the archive's messages were just checked.

    Raises:
        Conflict: naming the first record that clashes; nothing is written.
    """
    await StoreCheck(store, archive, path).run(advance)


async def vectors_to_write(store: MemoryStore, vectors: Sequence[StoredVector]) -> list[StoredVector]:
    """The archive's vectors less each node's pieces the store already holds, the same, of the same model.

    Vectors are derived data: one that differs replaces the stored one (as
    `MemoryStore.set_embeddings` does), but an equal one is not written again, so a
    second import writes nothing.
    """
    by_node: dict[tuple[str, str], list[StoredVector]] = defaultdict(list)
    for vector in vectors:
        by_node[(vector.node_id, vector.model)].append(vector)
    node_ids = list(dict.fromkeys(vector.node_id for vector in vectors))
    stored: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    for chunk in _chunks(node_ids):
        for vector in await store.read_embeddings(chunk):
            stored[(vector.node_id, vector.model)].append(vector.vector)
    kept: list[StoredVector] = []
    for key, pieces in by_node.items():
        if not _same_pieces(stored.get(key, []), [piece.vector for piece in pieces]):
            kept.extend(pieces)
    return kept


def _same_pieces(stored: list[list[float]], archived: list[list[float]]) -> bool:
    """Whether a node's stored pieces are the archive's at unit length (`format` has checked the archive's)."""
    if len(stored) != len(archived) or any(len(s) != len(a) for s, a in zip(stored, archived, strict=True)):
        return False
    size = len(archived[0])
    return bool((abs(unit_vectors(archived, size) - unit_vectors(stored, size)) <= VECTOR_TOLERANCE).all())
