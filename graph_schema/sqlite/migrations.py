"""Bringing a SQLite file written by an older Palimpsest up to today's schema.

``schema.sql`` creates what is missing (``CREATE ... IF NOT EXISTS``) but cannot change
a table that is already there, so a file written before a change would fail on the
first statement that relies on it. ``migrate`` runs first in
``SqliteStore.initialize()`` and is idempotent: on a new or current file it changes
nothing. The changes so far:

- ``threads.secrets_redacted``, the count of credentials redaction replaced
  (``graph_schema/redact.py``): one added column.
- Threads keyed by (partition, id) instead of id alone (invariant 7 of
  docs/architecture.md): the tables naming a thread are rebuilt in one transaction,
  foreign keys off meanwhile, as SQLite's documented way to change a key requires.
- Read positions in their own table instead of message metadata ``hook_cursor``
  (`palimpsest.graph_schema.sqlite.positions`): moved over when the table is first made.
- ``messages.search_text``, a tool message's derived text (``scheduler/search_text.py``):
  one added column, NULL on every old row until the ``search_text`` maintenance step
  writes it; the content-only insert trigger is dropped and ``messages_fts`` rebuilt
  with the second column first (``fts.upgrade_indexes``), as the rekey below copies
  rows through the new trigger.
- The index ``embeddings_by_partition`` dropped: no query uses it (vector searches
  read the files beside the database; the table is read by model and pk), and every
  vector written paid for it.
- ``embeddings`` keyed by (node_id, piece) instead of node_id, with ``pieces``, so a
  long text has a vector per window: rebuilt in one transaction, pks and vectors kept
  (the vector files beside the database stay valid) and the AUTOINCREMENT counter too
  (a pk is never reused). Its rows become piece 0, complete (``pieces`` 1) where the
  node's text fits one piece; a longer text's (its head's only) has ``pieces`` NULL, and
  the embedding backfill embeds that node again in pieces.
"""

from __future__ import annotations

import sqlite3

from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import transaction
from palimpsest.graph_schema.sqlite.fts import upgrade_indexes
from palimpsest.graph_schema.sqlite.positions import move_legacy_positions


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[0] for row in conn.execute(q.TABLE_COLUMNS, {"table": table})}


def migrate(conn: sqlite3.Connection, schema: str) -> None:
    """Add what older files lack; nothing when the tables are new or current."""
    if not _columns(conn, "threads"):
        return
    conn.execute(q.DROP_UNUSED_INDEXES)
    if "secrets_redacted" not in _columns(conn, "threads"):
        conn.execute(q.ADD_SECRETS_REDACTED)
    if (columns := _columns(conn, "messages")) and "search_text" not in columns:
        with transaction(conn, "IMMEDIATE"):
            conn.execute(q.ADD_SEARCH_TEXT)
            conn.execute(q.DROP_CONTENT_ONLY_TRIGGER)
        upgrade_indexes(conn, schema)
    positions_missing = not _columns(conn, "read_positions")
    if {row[0] for row in conn.execute(q.THREAD_KEY)} != {"partition", "id"}:
        _rekey(conn, schema)
    if positions_missing:
        move_legacy_positions(conn, schema)
    if _columns(conn, "embeddings") and "piece" not in _columns(conn, "embeddings"):
        _rebuild_embeddings(conn, schema)


def _rebuild_embeddings(conn: sqlite3.Connection, schema: str) -> None:
    """Move ``embeddings`` into a table of today's shape under its name, in one transaction."""
    try:
        conn.executescript(
            f"BEGIN IMMEDIATE;\n{q.MIGRATION_EMBEDDINGS_ASIDE}\n{schema}\n{q.MIGRATION_EMBEDDINGS_COPY}\nCOMMIT;"
        )
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _rekey(conn: sqlite3.Connection, schema: str) -> None:
    """Rebuild the tables naming a thread under the (partition, id) key."""
    if not _columns(conn, "fact_layer"):
        conn.executescript(schema)  # a file older than the fact layer: create its table first
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        conn.executescript(f"BEGIN IMMEDIATE;\n{q.MIGRATION_SET_ASIDE}\n{schema}\n{q.MIGRATION_COPY}\nCOMMIT;")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        conn.execute("PRAGMA foreign_keys = ON")
