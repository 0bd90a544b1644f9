"""Vector checks shared by both stores.

Both backends accept the same vectors and refuse the same ones (wrong size, NaN, all
zeros) with the same sentence, and both store them at unit length so that every score
is a cosine similarity. (SQLite, which has no vector index, searches them from files
beside the database: ``sqlite/vector_file.py``.)
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import MAX_EMBED_PIECES

if TYPE_CHECKING:
    import numpy as np
else:

    class _Numpy:
        """numpy, imported on first use: a process that never touches vectors (a hook) never pays for it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(importlib.import_module("numpy"), name)

    np = _Numpy()

#: Node kinds as small integers in the SQLite vector files' kind column.
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


def node_pieces(items: Sequence[tuple[str, Sequence[float]]]) -> dict[str, list[Sequence[float]]]:
    """`set_embeddings`' items as each node's vectors, its pieces in the order given.

    Raises:
        InvalidInput: if a node is given more than ``MAX_EMBED_PIECES`` vectors.
    """
    nodes: dict[str, list[Sequence[float]]] = {}
    for node_id, vector in items:
        nodes.setdefault(node_id, []).append(vector)
    for node_id, vectors in nodes.items():
        if len(vectors) > MAX_EMBED_PIECES:
            raise InvalidInput(
                f"node {node_id!r} was given {len(vectors)} vectors; a node has at most {MAX_EMBED_PIECES}"
            )
    return nodes


def unit_pieces(items: Sequence[tuple[str, Sequence[float]]], dimensions: int) -> dict[str, np.ndarray]:
    """`set_embeddings`' items as each node's pieces, one unit vector a row, in the order given.

    Raises:
        InvalidInput: as `node_pieces` and `unit_vectors` do.
    """
    nodes = node_pieces(items)
    matrix = unit_vectors([vector for vectors in nodes.values() for vector in vectors], dimensions)
    pieces: dict[str, np.ndarray] = {}
    start = 0
    for node_id, vectors in nodes.items():
        pieces[node_id] = matrix[start : start + len(vectors)]
        start += len(vectors)
    return pieces


def microseconds(value: datetime) -> int:
    """Microseconds since the epoch, exactly (naive times are UTC, as stored ones are)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _MICROSECOND


def head_snippet(text: str, width: int = SNIPPET_CHARS) -> str:
    """The start of a node's text: a semantic hit matches meaning, not a word to centre on."""
    return text if len(text) <= width else text[:width] + "…"


@dataclass
class VectorSpace:
    """What `ensure_vector_index` settled for one store object: vector size and model.

    A store searches and lists as missing only the vectors of this model.
    """

    dimensions: int | None = None
    model: str | None = None

    def require(self) -> tuple[int, str]:
        """The settled size and model.

        Raises:
            InvalidInput: if `ensure_vector_index` was never called on this store.
        """
        if self.dimensions is None or self.model is None:
            raise InvalidInput("the store has no vector index yet: call ensure_vector_index(dimensions, model) first")
        return self.dimensions, self.model

    def settle(self, dimensions: int, model: str) -> None:
        """Adopt a size and a model."""
        self.dimensions, self.model = dimensions, model

    def check_model(self, model: str) -> None:
        """Raises InvalidInput unless ``model`` is the settled model (vectors must match searches)."""
        _, settled = self.require()
        if model != settled:
            raise InvalidInput(
                f"vectors of model {model!r} cannot be stored: the vector index is set up for {settled!r}"
            )
