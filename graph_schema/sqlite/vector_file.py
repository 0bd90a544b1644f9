"""The SQLite store's vectors as memory-mapped files beside the database, kept in step with it.

Why: SQLite has no vector index, and reading a million 384-number vectors out of the
``embeddings`` table into memory took 12-16 s, paid by the first semantic or hybrid
search of every process. The table stays the source of truth; this module keeps a cache
of it in ``<database>.vectors/`` that a process maps in milliseconds
(``numpy.memmap``), whatever its size; what it lacks is read from the table by the
table's version.

Why not sqlite-vec: its ``vec0`` tables scan every vector of a query, as a matmul over
the mapped file would (about 0.3 s for a million on a busy two-core machine), and it
would keep a second copy of every vector inside the database. Searching a million
vectors in tens of milliseconds needs to read fewer of them: here a coarse partition
(an inverted file, "IVF": `CELLS` k-means centroids, each vector filed under its
nearest) lets a broad search score only the vectors of the `PROBES` cells nearest the
query, exactly, from the float32 rows. Narrow searches (a thread, a small partition, a
short time range: at most `EXACT_ROWS` candidates) and stores under `IVF_MIN_ROWS`
score every candidate, so they are exact; `bench/search_speed.py` reports the broad
search's recall against the exact ranking. Measured at a million messages (384-number
vectors, the benchmark's questions, recall@200 / ms for the scan): 4 probes 0.855 / 10,
8 probes 0.966 / 8, 16 probes 0.974 / 14, 24 probes 1.0 / 29; a fresh process's first
semantic search, open included, took 0.14 s with the files in the page cache and 0.35 s
without (24 s before, reading the table).

Files, per embedding model (named by a hash of the model's name):

- ``<key>-<generation>.f32``: the vectors, float32 rows; in cell order once there are
  cells (each cell one block of the file, read in one sweep even from disk), then
  appended rows in pk order (the tail, sorted in again by upkeep once it outgrows an
  eighth);
- ``<key>-<generation>.rows``: per vector, its ``embeddings.pk``, created time, a hash
  of its thread and partition, its kind, whether it is still in the table, and its cell;
- ``<key>-<generation>.cells.npy``: the centroids, once there are enough vectors;
- ``<key>.json``: the header (`CacheHeader`): how many rows are valid, the last pk and
  the table version they reflect. Replaced by an atomic rename, after the rows it counts
  were written, so a crash mid-append leaves rows the header does not count (cut off by
  the next writer) and never a header that counts missing rows.

Who writes: a writer of vectors appends its rows (``append``) and marks deleted ones
dead in place (``mark_dead``, from the ``embedding_deletions`` log a trigger keeps,
never counting the table); upkeep (``lay_out``, maintenance's ``vector_upkeep`` step)
trains the cells, re-sorts the tail in and drops dead rows, each a new generation the
header is switched to. A search writes nothing: it maps the generation the header
names and reads what the files lack from the table (`SearchView`). Files of another
layout, model or size, or another database's (their last row is in the table with other
numbers), are rewritten as a new generation. Writers in several processes take an
advisory lock on ``<key>.lock``. The cache holds pks, never node ids: a hit's id,
partition and thread are read back from the table, so a stale or colliding cache row
can never name a wrong node.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from palimpsest.graph_schema.vectors import KIND_CODES, np

if sys.platform != "win32":
    import fcntl

#: The layout of the files; a header of another format is rebuilt.
FORMAT = 3
#: Vectors a store needs before broad searches go through the coarse partition.
IVF_MIN_ROWS = 200_000
#: Centroids of the coarse partition (about 4,000 vectors each at a million).
CELLS = 256
#: Cells scored per broad search, nearest the query first (about 6 % of the vectors).
PROBES = 16
#: Candidates (after the kind, thread, partition and time filters) scored exactly.
EXACT_ROWS = 60_000
#: Rows appended past the cell-sorted rows before the files are sorted again (a share of
#: the sorted rows, at least this many): until then they are gathered row by row.
TAIL_ROWS = 20_000
#: Rows from which a block is scored by BLAS (threads pay off) rather than einsum.
BLAS_ROWS = 100_000
#: Vectors a k-means step trains on, per centroid.
TRAIN_PER_CELL = 64
#: Vectors scored against the centroids per step when filing them.
ASSIGN_CHUNK = 65_536


#: Bytes of one vector's metadata in the ``.rows`` file (`row_dtype`), known without numpy.
ROW_BYTES = 40
#: Share of dead rows (their embedding deleted) at which upkeep rewrites the files without them.
RECLAIM_SHARE = 16


@functools.cache
def row_dtype() -> np.dtype:
    """One vector's metadata in the ``.rows`` file (`ROW_BYTES`)."""
    return np.dtype(
        [
            ("pk", "<i8"),
            ("created", "<i8"),
            ("thread", "<i8"),
            ("partition", "<i8"),
            ("kind", "i1"),
            ("alive", "u1"),
            ("cell", "<i2"),
            ("spare", "<i4"),
        ]
    )


def cosines(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each row's dot product with the query (all unit vectors: cosines).

    Blocks under `BLAS_ROWS` go through einsum on this thread: a BLAS call wakes its
    thread pool, which on a busy two-core machine cost 4-8 ms for a 2,000-row cell
    that einsum scores in 0.15 ms.
    """
    return np.einsum("ij,j->i", rows, query) if len(rows) < BLAS_ROWS else rows @ query


def text_hash(value: str | None) -> int:
    """A thread's or partition's 64-bit hash (0 for none); hits are checked against the table."""
    if value is None:
        return 0
    return int.from_bytes(hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


class CacheHeader(BaseModel):
    """What the files of one model hold, as of which table version."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    format: int
    model: str
    dimensions: int
    generation: int
    version: int
    rows: int
    alive: int
    max_pk: int
    cells: int
    sorted_rows: int
    #: The last entry of the ``embedding_deletions`` log these rows reflect.
    deletions: int


@dataclass(frozen=True)
class TableRow:
    """One ``embeddings`` row as the cache reads it."""

    pk: int
    kind: str
    partition: str
    thread_id: str | None
    created_us: int
    vector: bytes


@dataclass
class MappedVectors:
    """One generation of the files, mapped, with the filter masks its searches asked for.

    ``version`` is the table version the mapping reflects. Rows ``[0, sorted_rows)`` are
    in cell order, so a cell is one contiguous block of the file; later rows (the tail,
    appended since) are scored wherever their cell is probed.
    """

    directory: Path
    header: CacheHeader
    vectors: np.ndarray
    meta: np.ndarray
    centroids: np.ndarray | None
    #: Rows whose embedding was deleted since the files were caught up (from the deletion log).
    excluded: np.ndarray | None = None
    _bounds: np.ndarray | None = None
    _masks: dict[tuple[tuple[str, ...], str | None], np.ndarray] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def without(self, rows: np.ndarray) -> MappedVectors:
        """The same mapping with these row positions left out of every search (files untouched)."""
        return MappedVectors(self.directory, self.header, self.vectors, self.meta, self.centroids, rows, self._bounds)

    def nearest(
        self,
        query: np.ndarray,
        *,
        kinds: Sequence[str],
        partition: str | None,
        thread_id: str | None,
        since_us: int | None,
        until_us: int | None,
        limit: int,
        exact: bool = False,
    ) -> list[tuple[int, float]]:
        """The ``limit`` pks whose vectors are nearest ``query`` (a unit vector), with cosines.

        ``exact`` scores every candidate (the ranking the benchmark compares the cells with).
        """
        size = self.header.rows
        if size == 0:
            return []
        meta = self.meta[:size]
        mask = self._base_mask(tuple(kinds), partition)
        if thread_id is not None:
            mask = mask & (meta["thread"] == text_hash(thread_id))
        if since_us is not None:
            mask = mask & (meta["created"] >= since_us)
        if until_us is not None:
            mask = mask & (meta["created"] <= until_us)
        candidates = int(np.count_nonzero(mask))
        if candidates == 0:
            return []
        if exact or self.centroids is None or candidates <= EXACT_ROWS:
            rows = np.flatnonzero(mask)
            scores = cosines(self.vectors[:size] if len(rows) == size else self.vectors[rows], query)
        else:
            rows, scores = self._probed(query, mask, limit)
        count = min(limit, len(rows))
        top = np.argpartition(-scores, count - 1)[:count] if count < len(rows) else np.arange(len(rows))
        top = top[np.argsort(-scores[top], kind="stable")]
        pks = meta["pk"][rows[top]]
        return [(int(pk), float(score)) for pk, score in zip(pks, scores[top], strict=True)]

    def _base_mask(self, kinds: tuple[str, ...], partition: str | None) -> np.ndarray:
        """Live rows of these kinds in this partition, kept for the mapping's next searches."""
        with self._lock:
            mask = self._masks.get((kinds, partition))
            if mask is None:
                meta = self.meta[: self.header.rows]
                mask = (meta["alive"] == 1) & np.isin(meta["kind"], [KIND_CODES[kind] for kind in kinds])
                if partition is not None:
                    mask &= meta["partition"] == text_hash(partition)
                if self.excluded is not None:
                    mask[self.excluded] = False
                if len(self._masks) >= 8:
                    self._masks.clear()
                self._masks[(kinds, partition)] = mask
            return mask

    def _probed(self, query: np.ndarray, mask: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """Candidate rows of the cells nearest the query, and their scores.

        A sorted cell is scored as one block of the mapped file (no copy); tail rows of
        the probed cells are gathered. Probes twice as many cells while they hold fewer
        than ``limit`` candidates, so a filter that keeps few rows of each cell still
        fills the page.
        """
        assert self.centroids is not None
        bounds = self._cell_bounds()
        sorted_rows = self.header.sorted_rows
        tail = np.arange(sorted_rows, self.header.rows)
        tail_cells = self.meta["cell"][sorted_rows : self.header.rows]
        ranked = np.argsort(-(self.centroids @ query))
        probes, done = PROBES, 0
        rows: list[np.ndarray] = []
        scores: list[np.ndarray] = []
        found = 0
        while True:
            for cell in ranked[done:probes]:
                start, end = int(bounds[cell]), int(bounds[cell + 1])
                keep = np.flatnonzero(mask[start:end])
                if len(keep):
                    block = cosines(self.vectors[start:end], query)
                    rows.append(keep + start)
                    scores.append(block[keep])
                    found += len(keep)
            picked = tail[np.isin(tail_cells, ranked[:probes]) & mask[sorted_rows:]]
            if found + len(picked) >= limit or probes >= len(ranked):
                rows.append(picked)
                scores.append(cosines(self.vectors[picked], query))
                return np.concatenate(rows), np.concatenate(scores)
            done, probes = probes, probes * 2

    def _cell_bounds(self) -> np.ndarray:
        """Where each cell's block starts in the sorted rows (the last entry is their end)."""
        with self._lock:
            if self._bounds is None:
                cells = self.meta["cell"][: self.header.sorted_rows]
                self._bounds = np.searchsorted(cells, np.arange(self.header.cells + 1))
            return self._bounds


def cache_directory(database: str) -> Path:
    """Where a database's vector files live: ``<database>.vectors`` beside it (as ``.archive``)."""
    path = Path(database).expanduser()
    return path.with_name(path.name + ".vectors")


def model_key(model: str) -> str:
    """A file-name-safe key for a model's files."""
    return hashlib.sha256(model.encode("utf-8")).hexdigest()[:16]


class VectorFiles:
    """The files of one model in one directory: read the header, map, append, mark dead, rebuild."""

    def __init__(self, directory: Path, model: str, dimensions: int) -> None:
        self.directory = directory
        self.model = model
        self.dimensions = dimensions
        self.key = model_key(model)

    # -- reading -------------------------------------------------------------------

    def header(self) -> CacheHeader | None:
        """The current header, or None if missing, unreadable, or for another layout, model or size."""
        try:
            header = CacheHeader.model_validate_json((self.directory / f"{self.key}.json").read_bytes())
        except (OSError, ValidationError):
            return None
        if (header.format, header.model, header.dimensions) != (FORMAT, self.model, self.dimensions):
            return None
        return header

    def map(self, header: CacheHeader) -> MappedVectors:
        """The files the header names, mapped read-only (nothing is read until searched)."""
        vectors_path, meta_path, cells_path = self._paths(header.generation)
        if header.rows == 0:
            empty = np.empty((0, self.dimensions), dtype=np.float32)
            return MappedVectors(self.directory, header, empty, np.empty(0, dtype=row_dtype()), None)
        vectors = np.memmap(vectors_path, dtype="<f4", mode="r", shape=(header.rows, self.dimensions))
        meta = np.memmap(meta_path, dtype=row_dtype(), mode="r", shape=(header.rows,))
        centroids = np.load(cells_path) if header.cells else None
        return MappedVectors(self.directory, header, vectors, meta, centroids)

    def last_live_pk(self, header: CacheHeader) -> int:
        """The highest pk of a live row in the files (0 if none)."""
        if not header.rows:
            return 0
        meta = self.map(header).meta
        live = meta["pk"][meta["alive"] == 1]
        return int(live.max()) if len(live) else 0

    def vector_of(self, header: CacheHeader, pk: int) -> bytes:
        """The stored bytes of the live row of ``pk`` (b"" if none): compared with the table's."""
        if not header.rows:
            return b""
        mapped = self.map(header)
        found = np.flatnonzero((mapped.meta["pk"] == pk) & (mapped.meta["alive"] == 1))
        return mapped.vectors[found[0]].tobytes() if len(found) else b""

    # -- writing (the caller holds `locked`) -----------------------------------------

    @contextlib.contextmanager
    def locked(self, *, wait: bool = True) -> Iterator[bool]:
        """An advisory lock on ``<key>.lock`` (none on Windows): one writer per model at a time.

        Yields whether the lock is held: with ``wait`` false, False at once when another
        writer has it (a store writing vectors leaves the files to that writer).
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / f"{self.key}.lock", "a+b") as handle:
            if sys.platform != "win32":
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    yield False
                    return
            yield True

    def append(self, header: CacheHeader, rows: Sequence[TableRow], version: int) -> CacheHeader:
        """Append rows (pk order, past ``header.max_pk``) and count them in a new header."""
        vectors_path, meta_path, _ = self._paths(header.generation)
        centroids = np.load(self._paths(header.generation)[2]) if header.cells else None
        block = self.block(rows, centroids)
        with open(vectors_path, "r+b") as vectors_file, open(meta_path, "r+b") as meta_file:
            # Cut off rows a crashed writer appended but never counted.
            vectors_file.truncate(header.rows * self.dimensions * 4)
            meta_file.truncate(header.rows * row_dtype().itemsize)
            vectors_file.seek(0, os.SEEK_END)
            meta_file.seek(0, os.SEEK_END)
            vectors_file.write(block[0].tobytes())
            meta_file.write(block[1].tobytes())
        updated = header.model_copy(
            update={
                "rows": header.rows + len(rows),
                "alive": header.alive + len(rows),
                "max_pk": rows[-1].pk if rows else header.max_pk,
                "version": version,
            }
        )
        self._write_header(updated)
        return updated

    def lay_out(self, header: CacheHeader) -> tuple[CacheHeader, int]:
        """Upkeep: rewrite the files when due, as a new generation, and switch the header to it.

        Due when a store first reaches `IVF_MIN_ROWS` (the cells are trained), when the
        rows appended since the last sort outgrow an eighth of the sorted ones (at least
        `TAIL_ROWS`), or when a `RECLAIM_SHARE`-th of the rows are dead. The rewrite
        drops dead rows and sorts the live ones by cell; readers keep the generation
        they mapped until their next search reads the new header. Returns the header
        and the rows rewritten (0 when nothing was due).
        """
        dead = header.rows - header.alive
        train = header.cells == 0 and header.alive >= IVF_MIN_ROWS
        resort = header.cells > 0 and header.rows - header.sorted_rows > max(TAIL_ROWS, header.sorted_rows // 8)
        if not (train or resort or (dead and dead * RECLAIM_SHARE >= header.rows)):
            return header, 0
        centroids = None
        if train:
            centroids = self._trained(header)
        elif header.cells:
            centroids = np.load(self._paths(header.generation)[2])
        updated = self._rewritten(header, centroids)
        self._write_header(updated)
        self._remove_other_generations(updated.generation)
        return updated, updated.rows

    def mark_dead(self, header: CacheHeader, dead_pks: np.ndarray) -> CacheHeader:
        """Mark the rows of ``dead_pks`` (deleted from the table) as dead, in place."""
        _, meta_path, _ = self._paths(header.generation)
        if header.rows == 0:
            return header
        meta = np.memmap(meta_path, dtype=row_dtype(), mode="r+", shape=(header.rows,))
        pks = meta["pk"][: header.rows]
        gone = np.isin(pks, dead_pks)
        alive = meta["alive"][: header.rows]
        alive[gone] = 0
        meta["alive"][: header.rows] = alive
        meta.flush()
        count = int(np.count_nonzero(alive))
        del meta
        return header.model_copy(update={"alive": count})

    def rebuild(self, chunks: Iterator[Sequence[TableRow]], version: int, deletions: int) -> CacheHeader:
        """Write every row as a new generation, file them into cells, then switch the header to it."""
        previous = self.header()
        generation = 0 if previous is None else previous.generation + 1
        vectors_path, meta_path, _ = self._paths(generation)
        header = CacheHeader(
            format=FORMAT, model=self.model, dimensions=self.dimensions, generation=generation,
            version=version, rows=0, alive=0, max_pk=0, cells=0, sorted_rows=0, deletions=deletions,
        )  # fmt: skip
        with open(vectors_path, "wb") as vectors_file, open(meta_path, "wb") as meta_file:
            for rows in chunks:
                vectors, meta = self.block(rows, None)
                vectors_file.write(vectors.tobytes())
                meta_file.write(meta.tobytes())
                header = header.model_copy(
                    update={"rows": header.rows + len(rows), "alive": header.alive + len(rows), "max_pk": rows[-1].pk}
                )
        if header.rows >= IVF_MIN_ROWS:
            header = self._rewritten(header, self._trained(header))
        self._write_header(header)
        self._remove_other_generations(header.generation)
        return header

    def block(self, rows: Sequence[TableRow], centroids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rows as a float32 matrix and their metadata records."""
        vectors = np.frombuffer(b"".join(row.vector for row in rows), dtype="<f4").reshape(len(rows), self.dimensions)
        meta = np.zeros(len(rows), dtype=row_dtype())
        hashes: dict[str | None, int] = {}
        meta["pk"] = [row.pk for row in rows]
        meta["created"] = [row.created_us for row in rows]
        meta["thread"] = [hashes.setdefault(row.thread_id, text_hash(row.thread_id)) for row in rows]
        meta["partition"] = [hashes.setdefault(row.partition, text_hash(row.partition)) for row in rows]
        meta["kind"] = [KIND_CODES[row.kind] for row in rows]
        meta["alive"] = 1
        if centroids is not None and len(rows):
            meta["cell"] = np.argmax(vectors @ centroids.T, axis=1)
        return vectors, meta

    def _trained(self, header: CacheHeader) -> np.ndarray:
        """`CELLS` unit centroids: spherical k-means on a sample of the rows."""
        vectors_path, _, _ = self._paths(header.generation)
        vectors = np.memmap(vectors_path, dtype="<f4", mode="r", shape=(header.rows, self.dimensions))
        rng = np.random.default_rng(header.rows)
        picked = rng.choice(header.rows, min(header.rows, CELLS * TRAIN_PER_CELL), replace=False)
        sample = np.asarray(vectors[np.sort(picked)])
        centroids = sample[rng.choice(len(sample), CELLS, replace=False)].copy()
        for _ in range(10):
            nearest = np.argmax(sample @ centroids.T, axis=1)
            sums = np.zeros_like(centroids)
            np.add.at(sums, nearest, sample)
            empty = np.linalg.norm(sums, axis=1) == 0
            sums[empty] = sample[rng.choice(len(sample), int(empty.sum()), replace=False)]
            centroids = sums / np.linalg.norm(sums, axis=1, keepdims=True)
        return centroids.astype(np.float32)

    def _rewritten(self, header: CacheHeader, centroids: np.ndarray | None) -> CacheHeader:
        """Write the live rows as the next generation, in cell order when there are cells.

        Rows are filed under their nearest centroid (rows filed already keep their cell),
        then copied in cell order, `ASSIGN_CHUNK` at a time; dead rows are left behind.
        """
        vectors_path, meta_path, _ = self._paths(header.generation)
        vectors = np.memmap(vectors_path, dtype="<f4", mode="r", shape=(header.rows, self.dimensions))
        meta = np.memmap(meta_path, dtype=row_dtype(), mode="r", shape=(header.rows,))
        cells = np.array(meta["cell"])
        if centroids is not None and not header.cells:
            for start in range(0, header.rows, ASSIGN_CHUNK):
                block = np.asarray(vectors[start : start + ASSIGN_CHUNK])
                cells[start : start + len(block)] = np.argmax(block @ centroids.T, axis=1)
        live = np.flatnonzero(np.asarray(meta["alive"]) == 1)
        order = live[np.argsort(cells[live], kind="stable")] if centroids is not None else live
        generation = header.generation + 1
        new_vectors, new_meta, new_cells = self._paths(generation)
        with open(new_vectors, "wb") as vectors_file, open(new_meta, "wb") as meta_file:
            for start in range(0, len(order), ASSIGN_CHUNK):
                picked = order[start : start + ASSIGN_CHUNK]
                vectors_file.write(np.asarray(vectors[picked]).tobytes())
                records = np.array(meta[picked])
                records["cell"] = cells[picked]
                meta_file.write(records.tobytes())
        if centroids is not None:
            np.save(new_cells, centroids)
        del vectors, meta
        rows = len(order)
        return header.model_copy(
            update={
                "generation": generation,
                "rows": rows,
                "alive": rows,
                "cells": 0 if centroids is None else len(centroids),
                "sorted_rows": rows if centroids is not None else 0,
            }
        )

    def _write_header(self, header: CacheHeader) -> None:
        """Write the header beside the files and rename it into place (atomic)."""
        target = self.directory / f"{self.key}.json"
        scratch = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        scratch.write_text(header.model_dump_json(), encoding="utf-8")
        os.replace(scratch, target)

    def _remove_other_generations(self, keep: int) -> None:
        """Delete older generations' files (a process still mapping them keeps reading them on POSIX)."""
        keep_names = {path.name for path in self._paths(keep)}
        for path in self.directory.glob(f"{self.key}-*"):
            if path.name not in keep_names:
                with contextlib.suppress(OSError):
                    path.unlink()

    def _paths(self, generation: int) -> tuple[Path, Path, Path]:
        stem = f"{self.key}-{generation}"
        return self.directory / f"{stem}.f32", self.directory / f"{stem}.rows", self.directory / f"{stem}.cells.npy"


@dataclass(frozen=True)
class SearchView:
    """What a search reads, as of one table version: the mapped files and, in memory, what they lack.

    A search never writes a file. Rows the table gained past the files' last pk (written
    while the files' lock was busy, by a process that crashed before catching the files
    up, or before the files were first laid out) are read from the table into ``tail``
    and scored exactly; rows deleted since the files were caught up (an archived run, a
    cleared fact, a replaced vector) are left out by position (``files.excluded``) or
    marked dead in the tail. Maintenance (``vector_upkeep``) folds both into the files.
    """

    version: int
    model: str
    dimensions: int
    #: The header the files were mapped with; None when there are no usable files.
    header: CacheHeader | None
    files: MappedVectors | None
    tail: MappedVectors
    #: The last pk read (into the files or the tail) and the last deletion applied.
    last_pk: int
    deletions: int

    def nearest(
        self,
        query: np.ndarray,
        *,
        kinds: Sequence[str],
        partition: str | None,
        thread_id: str | None,
        since_us: int | None,
        until_us: int | None,
        limit: int,
    ) -> list[tuple[int, float]]:
        """The ``limit`` nearest pks of the files and the tail together, best first."""
        ranked: list[tuple[int, float]] = []
        for part in (self.tail, self.files):
            if part is not None:
                ranked += part.nearest(
                    query, kinds=kinds, partition=partition, thread_id=thread_id,
                    since_us=since_us, until_us=until_us, limit=limit,
                )  # fmt: skip
        return sorted(ranked, key=lambda hit: -hit[1])[:limit]


def tail_vectors(directory: Path, model: str, dimensions: int, rows: Sequence[TableRow]) -> MappedVectors:
    """Table rows as an in-memory block a search scores exactly, like files without cells."""
    files = VectorFiles(directory, model, dimensions)
    vectors, meta = files.block(rows)
    header = CacheHeader(
        format=FORMAT, model=model, dimensions=dimensions, generation=0, version=0, rows=len(rows),
        alive=len(rows), max_pk=rows[-1].pk if rows else 0, cells=0, sorted_rows=0, deletions=0,
    )  # fmt: skip
    return MappedVectors(directory, header, vectors, meta, None)
