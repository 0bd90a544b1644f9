"""The errors every layer above the stores may catch.

Backends translate driver and sqlite3 exceptions into these, so nothing above
``graph_schema`` ever needs to know which database is underneath::

    PalimpsestError
    ├── NotFound(kind, id)   an id (thread, message, summary, fact) that does not exist
    ├── InvalidInput         an argument that can never succeed as given
    ├── Conflict             a write that would break an invariant (a child already
    │                        covered by another summary, a fact superseded twice)
    ├── StoreUnavailable     the database cannot be reached or answered with an outage
    ├── Archived             messages moved to an archive file (`palimpsest restore` it)
    └── InternalError        Palimpsest's own query failed: a bug, never the caller's
                             fault (logged with its detail; clients see only that)
"""

from __future__ import annotations


class PalimpsestError(Exception):
    """Base of every error Palimpsest raises on purpose; its message is one clear sentence."""


class NotFound(PalimpsestError):
    """An id that does not exist (in the partition it was looked up in)."""

    def __init__(self, kind: str, id: str) -> None:
        self.kind = kind
        self.id = id
        super().__init__(f"unknown {kind} id {id!r}")


class InvalidInput(PalimpsestError):
    """An argument that can never succeed as given; nothing was written."""


class Conflict(PalimpsestError):
    """A write refused because it would break an invariant; nothing was written."""


class StoreUnavailable(PalimpsestError):
    """The store cannot be reached right now; the same call may succeed later."""


class Archived(PalimpsestError):
    """Messages asked for were moved out of the live store into an archive file, not lost.

    Raised where a caller needs the originals (expanding a summary over them), naming
    the file, so the caller can ``palimpsest restore`` it.
    """

    def __init__(self, summary_id: str, first_seq: int, last_seq: int, path: str) -> None:
        self.path = path
        super().__init__(
            f"the messages of summary {summary_id} (seq {first_seq}-{last_seq}) are archived in {path}; "
            f"run `palimpsest restore {path}` to bring them back"
        )


class InternalError(PalimpsestError):
    """A fault in Palimpsest itself, such as a query of its own the database refused.

    Kept apart from `InvalidInput` so a bug is never reported as the caller's mistake:
    the backend logs the database's detail, and clients are told only that it happened.
    """
