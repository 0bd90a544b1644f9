"""Vector checks shared by both stores, and the in-process vector matrix of the SQLite store.

Both backends accept the same vectors and refuse the same ones (wrong size, NaN, all
zeros) with the same sentence, and both store them at unit length so that every score
is a cosine similarity. SQLite has no vector index, so `VectorMatrix` keeps one
partition's vectors in memory as a float32 matrix: a search is one matrix-vector
product and a partial sort, a few milliseconds for 100k vectors. It grows in place as
new vectors arrive, so the background embedding of every append never forces a reload.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from palimpsest.graph_schema.errors import InvalidInput

if TYPE_CHECKING:
    import numpy as np
else:

    class _Numpy:
        """numpy, imported on first use: a process that never touches vectors (a hook) never pays for it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(importlib.import_module("numpy"), name)

    np = _Numpy()

#: Node kinds as small integers in the matrix's kind column.
KIND_CODES: dict[str, int] = {"message": 0, "summary": 1, "fact": 2}
#: Characters of a node's text shown as a semantic hit's snippet.
SNIPPET_CHARS = 240
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def check_index_args(dimensions: int, model: str) -> None:
    """Raises InvalidInput for a vector size below 1 or an empty model name."""
    if dimensions < 1:
        raise InvalidInput(f"vector dimensions must be at least 1, got {dimensions}")
    if not model.strip():
        raise InvalidInput("the embedding model name must not be empty")


def unit_vectors(vectors: Sequence[Sequence[float]], dimensions: int) -> np.ndarray:
    """The vectors as a float32 matrix of unit rows.

    Raises:
        InvalidInput: naming the first vector that is not of ``dimensions`` numbers,
            holds a NaN or an infinity, or is all zeros (it has no direction).
    """
    for index, vector in enumerate(vectors):
        if len(vector) != dimensions:
            raise InvalidInput(f"vector {index} has {len(vector)} numbers; the vector index holds {dimensions}")
    if not vectors:
        return np.empty((0, dimensions), dtype=np.float32)
    try:
        matrix = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput("a vector must be a list of numbers") from None
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        raise InvalidInput(f"vector {int(np.argmin(finite))} holds a number that is not finite")
    norms = np.linalg.norm(matrix, axis=1)
    if not (norms > 0).all():
        raise InvalidInput(f"vector {int(np.argmin(norms > 0))} is all zeros: it has no direction")
    return (matrix / norms[:, None]).astype(np.float32)


def microseconds(value: datetime) -> int:
    """Microseconds since the epoch, exactly (naive times are UTC, as stored ones are)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _MICROSECOND


def head_snippet(text: str, width: int = SNIPPET_CHARS) -> str:
    """The start of a node's text: a semantic hit matches meaning, not a word to centre on."""
    return text if len(text) <= width else text[:width] + "…"


@dataclass(frozen=True)
class MatrixRow:
    """One stored vector as the SQLite store reads it back."""

    pk: int
    node_id: str
    kind: str
    thread_id: str | None
    created_us: int
    vector: bytes


@dataclass
class VectorMatrix:
    """The vectors of one (partition, model) in memory, growing in place as rows arrive.

    ``version`` is the store's write counter when the matrix was last brought up to
    date; ``max_pk`` and ``size`` tell an append (load the new rows) from a replacement
    or a deletion (load everything again).
    """

    dimensions: int
    version: int = -1
    max_pk: int = 0
    size: int = 0
    ids: list[str] = field(default_factory=list)
    thread_codes: dict[str | None, int] = field(default_factory=dict)
    _kinds: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int8))
    _threads: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int32))
    _created: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    _matrix: np.ndarray | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` more, so a load in chunks copies the buffers once at most."""
        with self._lock:
            self._fit(self.size + rows)

    def extend(self, rows: Sequence[MatrixRow]) -> None:
        """Append rows (in pk order), growing the buffers by a quarter when they are full."""
        if not rows:
            return
        with self._lock:
            end = self.size + len(rows)
            matrix = self._fit(end)
            block = np.frombuffer(b"".join(row.vector for row in rows), dtype="<f4")
            matrix[self.size : end] = block.reshape(len(rows), self.dimensions)
            self._kinds[self.size : end] = [KIND_CODES[row.kind] for row in rows]
            self._threads[self.size : end] = [
                self.thread_codes.setdefault(row.thread_id, len(self.thread_codes)) for row in rows
            ]
            self._created[self.size : end] = [row.created_us for row in rows]
            self.ids.extend(row.node_id for row in rows)
            self.max_pk = rows[-1].pk
            self.size = end

    def _fit(self, end: int) -> np.ndarray:
        """Grow the buffers to hold ``end`` rows, if they cannot yet (the lock is held); the matrix."""
        if self._matrix is not None and end <= len(self._matrix):
            return self._matrix
        # A quarter of headroom: the next appends (one per tool call) fit without a copy.
        capacity = max(end + end // 4, 1024)
        self._matrix = _grown(self._matrix, (capacity, self.dimensions), np.float32, self.size)
        self._kinds = _grown(self._kinds, (capacity,), np.int8, self.size)
        self._threads = _grown(self._threads, (capacity,), np.int32, self.size)
        self._created = _grown(self._created, (capacity,), np.int64, self.size)
        return self._matrix

    def nearest(
        self,
        query: np.ndarray,
        *,
        kinds: Sequence[str],
        thread_id: str | None,
        since_us: int | None,
        until_us: int | None,
        limit: int,
    ) -> list[tuple[str, float]]:
        """The ``limit`` ids whose vectors are nearest ``query`` (a unit vector), with cosines."""
        with self._lock:
            size = self.size
            if size == 0 or self._matrix is None:
                return []
            matrix, kind_col = self._matrix[:size], self._kinds[:size]
            thread_col, created_col = self._threads[:size], self._created[:size]
            thread_code = self.thread_codes.get(thread_id) if thread_id is not None else None
        if thread_id is not None and thread_code is None:
            return []
        mask = np.isin(kind_col, [KIND_CODES[kind] for kind in kinds])
        if thread_code is not None:
            mask &= thread_col == thread_code
        if since_us is not None:
            mask &= created_col >= since_us
        if until_us is not None:
            mask &= created_col <= until_us
        candidates = int(mask.sum())
        if candidates == 0:
            return []
        scores = matrix @ query
        scores = np.where(mask, scores, -np.inf)
        count = min(limit, candidates)
        top = np.argpartition(-scores, count - 1)[:count] if count < size else np.arange(size)
        top = top[np.argsort(-scores[top], kind="stable")][:count]
        return [(self.ids[index], float(scores[index])) for index in top]


def _grown(old: np.ndarray | None, shape: tuple[int, ...], dtype: type, keep: int) -> np.ndarray:
    """A bigger buffer holding the first ``keep`` rows of ``old``."""
    new: np.ndarray = np.empty(shape, dtype=dtype)
    if old is not None and keep:
        new[:keep] = old[:keep]
    return new


@dataclass
class VectorSpace:
    """What `ensure_vector_index` settled for one store object: vector size and model.

    A store searches and lists as missing only the vectors of this model; the SQLite
    store also keeps here its in-memory matrix of each partition it searched.
    """

    dimensions: int | None = None
    model: str | None = None
    matrices: dict[str | None, VectorMatrix] = field(default_factory=dict)

    def require(self) -> tuple[int, str]:
        """The settled size and model.

        Raises:
            InvalidInput: if `ensure_vector_index` was never called on this store.
        """
        if self.dimensions is None or self.model is None:
            raise InvalidInput("the store has no vector index yet: call ensure_vector_index(dimensions, model) first")
        return self.dimensions, self.model

    def settle(self, dimensions: int, model: str) -> None:
        """Adopt a size and a model; matrices of another model are dropped."""
        if (dimensions, model) != (self.dimensions, self.model):
            self.matrices.clear()
        self.dimensions, self.model = dimensions, model

    def check_model(self, model: str) -> None:
        """Raises InvalidInput unless ``model`` is the settled model (vectors must match searches)."""
        _, settled = self.require()
        if model != settled:
            raise InvalidInput(
                f"vectors of model {model!r} cannot be stored: the vector index is set up for {settled!r}"
            )
