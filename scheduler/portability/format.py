"""The export archive: one gzip file of JSON Lines that describes and checks itself.

Why this shape: a person must be able to take a memory away, read it with ``zcat`` and
``jq``, and bring it back knowing nothing was lost or altered on the way. So:

- Line 1 is a header (`ArchiveHeader`): the format and its version, the store kind it
  came from, the counts of every kind of record, and each thread's digest.
- Every other line is one record, ``{"kind", "data", "sha256"}``, where ``sha256`` is
  over the record's kind and its data exactly as written, so an edited line is caught
  and named.
- The last line is the trailer: the number of records and a hash chained over every
  record's ``sha256`` in order, so a dropped, repeated or reordered line, or a file cut
  short, is caught too.
- A thread's digest (`thread_digest`) is over its messages and summaries as written,
  in order; the header's digests are recomputed on import, and migrate compares the
  same digest between two stores.

`read_archive` checks all of it, and the lossless invariants of every thread (with
`palimpsest.graph_schema.doctor.check_snapshot`), before a caller writes anything. The
checksums prove a file whole, not honest (anyone can recompute them), so it also derives
every message, summary and fact id again from the record's own fields
(`palimpsest.graph_schema.identity`): an id planted for another partition's message
never gets past it. What the store already holds is checked by `checking`.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from palimpsest.graph_schema.doctor import check_snapshot
from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.identity import fact_id_matches, message_id_matches, summary_id_matches
from palimpsest.graph_schema.models import (
    MAX_EMBED_PIECES,
    Fact,
    FactLayerState,
    Message,
    StoredVector,
    Summary,
    Thread,
    ThreadSnapshot,
    UtcDatetime,
)

FORMAT = "palimpsest-export"
VERSION = 1

RecordKind = Literal["thread", "fact_layer", "message", "summary", "fact", "vector"]
_MODELS: dict[str, type[BaseModel]] = {
    "thread": Thread,
    "fact_layer": FactLayerState,
    "message": Message,
    "summary": Summary,
    "fact": Fact,
}


class ThreadEntry(BaseModel):
    """A thread as the header lists it: where it lives, how big it is, its digest."""

    partition: str
    id: str
    messages: int
    summaries: int
    digest: str


class ArchiveHeader(BaseModel):
    """The first line of an archive: what it is and what it holds."""

    format: Literal["palimpsest-export"] = "palimpsest-export"
    version: int = VERSION
    store: str = Field(description="The kind of store it was exported from.")
    created_at: UtcDatetime
    partition: str | None = Field(description="The partition exported; None for every partition.")
    thread_id: str | None = Field(description="The one thread exported, if only one.")
    counts: dict[str, int] = Field(description="Records of each kind.")
    threads: list[ThreadEntry]


class Archive(BaseModel):
    """An archive read and checked: its header and every record, as models."""

    header: ArchiveHeader
    threads: list[ThreadSnapshot]
    fact_layers: list[FactLayerState]
    facts: list[Fact]
    vectors: list[StoredVector]


def dumps(data: Any) -> str:
    """The one serialization of a record's data: compact, UTF-8, key order kept (metadata's too)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def record_sha256(kind: str, data_text: str) -> str:
    return hashlib.sha256(f"{kind}\x1f{data_text}".encode()).hexdigest()


def model_text(model: BaseModel) -> str:
    return dumps(model.model_dump(mode="json"))


def thread_digest(messages: Iterable[Message], summaries: Iterable[Summary]) -> str:
    """A thread's digest: over each message in seq order, then each summary by level and seq.

    Over the records exactly as an archive writes them (ids, seqs, hashes, timestamps,
    content, metadata, edges), so two stores holding the same thread give the same
    digest and any difference in any field changes it.
    """
    digest = hashlib.sha256()
    for message in sorted(messages, key=lambda m: m.seq):
        digest.update(model_text(message).encode())
        digest.update(b"\n")
    for summary in sorted(summaries, key=lambda s: (s.level, s.first_seq)):
        digest.update(model_text(summary).encode())
        digest.update(b"\n")
    return digest.hexdigest()


class ArchiveWriter:
    """Writes records to a body file as they come, then the header and body into the archive.

    The header needs counts and digests known only at the end, so records go to a
    temporary body first; `finish` writes the gzip archive (header, records, trailer)
    next to the target and renames it into place, so a failed export leaves no file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._body_path = path.with_name(path.name + ".body.tmp")
        self._body: IO[str] = self._body_path.open("w", encoding="utf-8")
        self._chain = hashlib.sha256()
        self.counts: dict[str, int] = {kind: 0 for kind in (*_MODELS, "vector")}
        self.records = 0

    def write(self, kind: RecordKind, data: BaseModel | dict[str, Any]) -> None:
        text = model_text(data) if isinstance(data, BaseModel) else dumps(data)
        sha = record_sha256(kind, text)
        self._body.write(f'{{"kind":"{kind}","data":{text},"sha256":"{sha}"}}\n')
        self._chain.update(sha.encode())
        self.counts[kind] += 1
        self.records += 1

    def finish(self, header: ArchiveHeader) -> None:
        self._body.close()
        partial = self.path.with_name(self.path.name + ".tmp")
        try:
            with gzip.open(partial, "wt", encoding="utf-8") as out, self._body_path.open(encoding="utf-8") as body:
                out.write(model_text(header) + "\n")
                for line in body:
                    out.write(line)
                trailer = {"records": self.records, "chain": self._chain.hexdigest()}
                out.write(dumps({"kind": "end", "data": trailer}) + "\n")
            partial.replace(self.path)
        finally:
            self._body_path.unlink(missing_ok=True)
            partial.unlink(missing_ok=True)

    def abandon(self) -> None:
        self._body.close()
        self._body_path.unlink(missing_ok=True)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """The archive's lines, numbered from 1; a cut or corrupt gzip stream is `InvalidInput`."""
    number = 0
    try:
        with gzip.open(path, "rt", encoding="utf-8") as stream:
            for number, line in enumerate(stream, 1):  # noqa: B007 - the last number names the cut
                yield number, line
    except (EOFError, OSError, zlib.error, UnicodeDecodeError) as exc:
        raise InvalidInput(f"archive {path} is truncated or corrupt after line {number} ({exc})") from None


def read_archive(path: Path) -> Archive:
    """Read an archive and check everything in it; nothing is written anywhere.

    :raises InvalidInput: naming the first bad line: not JSON, an unknown kind, a
        record whose checksum or fields are wrong, an id its record's fields do not
        give or that an earlier record has, a vector of no node before it or of
        another size, a missing or wrong trailer, counts or thread digests that differ
        from the header, a fact layer of no thread or past its messages, or a thread
        that breaks one of the lossless invariants.
    """
    if not path.is_file():
        raise InvalidInput(f"archive {path} does not exist")
    lines = _lines(path)
    header = _header(path, next(lines, (0, ""))[1])
    reader = _RecordReader(path)
    for number, line in lines:
        if reader.done:
            raise InvalidInput(f"archive {path}: line {number} follows the trailer")
        reader.add(number, line)
    if not reader.done:
        raise InvalidInput(f"archive {path} is truncated: no trailer after record {reader.count}")
    return reader.archive(header)


def _header(path: Path, line: str) -> ArchiveHeader:
    try:
        raw = json.loads(line)
        if raw.get("format") != FORMAT:
            raise InvalidInput(f"{path} is not a Palimpsest export (line 1 is no {FORMAT} header)")
        if raw.get("version") != VERSION:
            raise InvalidInput(f"{path} is export format version {raw.get('version')}; this Palimpsest reads {VERSION}")
        return ArchiveHeader.model_validate(raw)
    except (ValueError, AttributeError, ValidationError):
        raise InvalidInput(f"{path} is not a Palimpsest export (line 1 is no {FORMAT} header)") from None


class _RecordReader:
    """Checks records one line at a time and gathers them by thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.chain = hashlib.sha256()
        self.count = 0
        self.done = False
        self.counts: dict[str, int] = {kind: 0 for kind in (*_MODELS, "vector")}
        self.threads: dict[tuple[str, str], ThreadSnapshot] = {}
        self.fact_layers: list[FactLayerState] = []
        self.facts: list[Fact] = []
        self.vectors: list[StoredVector] = []
        #: The kind of every message, summary and fact id so far: ids are unique across a store.
        self.ids: dict[str, str] = {}
        self.vector_size: int | None = None
        self.pieces: dict[tuple[str, str], int] = {}

    def bad(self, number: int, why: str) -> InvalidInput:
        return InvalidInput(f"archive {self.path}: record {self.count + 1} (line {number}) {why}; nothing was imported")

    def add(self, number: int, line: str) -> None:
        try:
            raw = json.loads(line)
            kind, data = raw["kind"], raw["data"]
        except (ValueError, KeyError, TypeError):
            raise self.bad(number, "is not a record") from None
        if kind == "end":
            if data != {"records": self.count, "chain": self.chain.hexdigest()}:
                raise self.bad(number, "is a trailer that does not match the records before it")
            self.done = True
            return
        if kind not in self.counts:
            raise self.bad(number, f"has an unknown kind {kind!r}")
        if raw.get("sha256") != record_sha256(kind, dumps(data)):
            raise self.bad(number, f"({kind}) does not match its checksum: it was altered")
        try:
            self.keep(number, kind, data)
        except ValidationError as exc:
            raise self.bad(number, f"({kind}) has a bad field: {exc.errors()[0]['msg']}") from None
        except KeyError:
            raise self.bad(number, f"({kind}) belongs to a thread with no thread record before it") from None
        self.chain.update(raw["sha256"].encode())
        self.counts[kind] += 1
        self.count += 1

    def keep(self, number: int, kind: str, data: Any) -> None:
        if kind == "thread":
            thread = Thread.model_validate(data)
            if (thread.partition, thread.id) in self.threads:
                raise self.bad(number, f"(thread) repeats thread {thread.id!r} of partition {thread.partition!r}")
            self.threads[(thread.partition, thread.id)] = ThreadSnapshot(thread=thread, messages=[], summaries=[])
        elif kind == "message":
            message = Message.model_validate(data)
            snapshot = self.threads[(message.partition, message.thread_id)]
            derived = message_id_matches(message.id, message.partition, message.thread_id, message.source_id)
            self.check_id(number, kind, message.id, derived, "partition, thread and source id")
            snapshot.messages.append(message)
        elif kind == "summary":
            summary = Summary.model_validate(data)
            snapshot = self.threads[(summary.partition, summary.thread_id)]
            derived = summary_id_matches(
                summary.id, summary.partition, summary.thread_id, summary.level, summary.child_ids
            )
            self.check_id(number, kind, summary.id, derived, "partition, thread, level and children")
            snapshot.summaries.append(summary)
        elif kind == "fact_layer":
            self.fact_layers.append(FactLayerState.model_validate(data))
        elif kind == "fact":
            fact = Fact.model_validate(data)
            derived = fact_id_matches(fact.id, fact.partition, fact.text, fact.source_message_ids)
            self.check_id(number, kind, fact.id, derived, "partition, text and sources")
            self.facts.append(fact)
        else:
            vector = _vector(data)
            self.check_vector(number, vector)
            self.vectors.append(vector)

    def check_id(self, number: int, kind: str, node_id: str, derived: bool, fields: str) -> None:
        """Refuse an id its record's own fields do not give, or one an earlier record took."""
        if not derived:
            raise self.bad(
                number, f"({kind}) has id {node_id!r}, which its {fields} do not give: it was planted or altered"
            )
        if node_id in self.ids:
            raise self.bad(number, f"({kind}) repeats id {node_id!r} of an earlier {self.ids[node_id]}")
        self.ids[node_id] = kind

    def check_vector(self, number: int, vector: StoredVector) -> None:
        """What `MemoryStore.set_embeddings` would refuse after the records are written, refused now."""
        if vector.node_id not in self.ids:
            raise self.bad(number, f"(vector) is of node {vector.node_id!r}, which no record before it holds")
        if self.vector_size is None:
            self.vector_size = len(vector.vector)
        if len(vector.vector) != self.vector_size:
            raise self.bad(
                number, f"(vector) has {len(vector.vector)} numbers, not the {self.vector_size} of the first vector"
            )
        if not all(math.isfinite(x) for x in vector.vector) or not any(vector.vector):
            raise self.bad(number, "(vector) holds a number that is not finite, or only zeros")
        key = (vector.node_id, vector.model)
        self.pieces[key] = self.pieces.get(key, 0) + 1
        if self.pieces[key] > MAX_EMBED_PIECES:
            raise self.bad(number, f"(vector) is piece {self.pieces[key]} of its node, over {MAX_EMBED_PIECES}")

    def archive(self, header: ArchiveHeader) -> Archive:
        if self.counts != header.counts:
            raise InvalidInput(f"archive {self.path}: the header counts {header.counts} but it holds {self.counts}")
        listed = {(entry.partition, entry.id): entry.digest for entry in header.threads}
        if set(listed) != set(self.threads):
            raise InvalidInput(f"archive {self.path}: the header lists other threads than it holds")
        for key, snapshot in self.threads.items():
            if thread_digest(snapshot.messages, snapshot.summaries) != listed[key]:
                raise InvalidInput(f"archive {self.path}: thread {key[1]!r} does not match its digest in the header")
            breaches = check_snapshot(snapshot)
            if breaches:
                first = breaches[0]
                raise InvalidInput(
                    f"archive {self.path}: thread {key[1]!r} breaks invariant {first.invariant}: {first.message}"
                )
        for layer in self.fact_layers:
            held = self.threads.get((layer.partition, layer.thread_id))
            if held is None or not -1 <= layer.extracted_seq <= max((m.seq for m in held.messages), default=-1):
                raise InvalidInput(
                    f"archive {self.path}: the fact layer of thread {layer.thread_id!r} names no thread or "
                    f"message of the archive (cursor {layer.extracted_seq})"
                )
        return Archive(
            header=header,
            threads=list(self.threads.values()),
            fact_layers=self.fact_layers,
            facts=self.facts,
            vectors=self.vectors,
        )


class VectorRecord(BaseModel):
    """A vector as an archive holds it (`StoredVector` is a tuple; records are objects)."""

    node_id: str
    model: str
    vector: list[float]


def _vector(data: Any) -> StoredVector:
    checked = VectorRecord.model_validate(data)
    return StoredVector(checked.node_id, checked.model, checked.vector)
