"""Moving read positions out of message metadata: what both stores' migration shares.

Before read positions had their own place (a ``read_positions`` table, a ``ReadPosition``
node), a hook kept them in the metadata key ``hook_cursor`` of the last message it
appended: ``{"/abs/path/transcript.jsonl": [byte offset, line number], ...}``. That was
bookkeeping mixed into the user's data, and a local path carried into every export.
Each store, on open, hands this module the messages that still hold the key (in seq
order within each thread) and gets back the positions to record and each message's
metadata without the key; it writes both in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from palimpsest.graph_schema.models import ReadPosition

#: The metadata key older hooks left their read positions in.
LEGACY_KEY = "hook_cursor"


@dataclass
class MovedPositions:
    """What one migration writes: each thread's positions, and each touched message's new metadata."""

    positions: dict[tuple[str, str], list[ReadPosition]] = field(default_factory=dict)
    #: Message id → its metadata as JSON text, ``hook_cursor`` removed.
    metadata: dict[str, str] = field(default_factory=dict)


def _position(path: Any, value: Any) -> ReadPosition | None:
    """An old ``[offset, line]`` pair as a position; None for anything else (it is dropped)."""
    if not isinstance(path, str) or not path or not isinstance(value, list) or len(value) != 2:
        return None
    offset, line = value
    if not all(isinstance(item, int) and not isinstance(item, bool) for item in value) or offset < 0 or line < 1:
        return None
    return ReadPosition(path=path, offset=offset, line=line)


def move_positions(rows: Iterable[tuple[str, str, str, str]]) -> MovedPositions:
    """Positions from ``(message id, partition, thread id, metadata JSON)`` rows, seq order per thread.

    A later message's position for a file replaces an earlier one's (each hook run left
    every file it had read, so the newest is the whole story).
    """
    moved = MovedPositions()
    newest: dict[tuple[str, str], dict[str, ReadPosition]] = {}
    for message_id, partition, thread_id, text in rows:
        metadata = json.loads(text) if text else {}
        if not isinstance(metadata, dict) or LEGACY_KEY not in metadata:
            continue
        cursor = metadata.pop(LEGACY_KEY)
        if isinstance(cursor, dict):
            files = newest.setdefault((partition, thread_id), {})
            for path, value in cursor.items():
                position = _position(path, value)
                if position is not None:
                    files[path] = position
        moved.metadata[message_id] = json.dumps(metadata)
    moved.positions = {key: [files[path] for path in sorted(files)] for key, files in newest.items() if files}
    return moved
