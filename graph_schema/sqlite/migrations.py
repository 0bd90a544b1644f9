"""Bringing a SQLite file written by an older Palimpsest up to today's schema.

``schema.sql`` creates what is missing (``CREATE ... IF NOT EXISTS``) but cannot change
a table that is already there, so a file written before a column existed would fail on
the first statement naming it. ``migrate`` runs first in ``SqliteStore.initialize()``,
inside one transaction, and is idempotent: on a new or current file it changes nothing.
"""

from __future__ import annotations

import sqlite3

from palimpsest.graph_schema.sqlite import queries as q


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[0] for row in conn.execute(q.TABLE_COLUMNS, {"table": table})}


def migrate(conn: sqlite3.Connection) -> None:
    """Add what older files lack; nothing when the tables are new or current."""
    threads = _columns(conn, "threads")
    if not threads:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if "secrets_redacted" not in _columns(conn, "threads"):
            conn.execute(q.ADD_SECRETS_REDACTED)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
