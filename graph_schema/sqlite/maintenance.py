"""Maintenance records on SQLite: the scheduler's leases and the cycle history.

It exists so what the background scheduler needs from the store (one holder at a time
across processes, and a record of each cycle for ``doctor`` and status) lives apart from
the memory itself.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

from palimpsest.graph_schema.models import MaintenanceCycle
from palimpsest.graph_schema.prepare import lease_times
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import SqliteBase, page_limit, stored_time, transaction


class SqliteMaintenance(SqliteBase):
    """Leases and cycle records, apart because they serve the scheduler, not the memory itself."""

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float, *, now: datetime | None = None) -> bool:
        """One upsert under ``BEGIN IMMEDIATE``: free, expired or our own lease is (re)taken."""
        moment, expires_at = lease_times(name, holder, ttl_seconds, now)
        params = {"name": name, "holder": holder, "now": stored_time(moment), "expires_at": stored_time(expires_at)}

        def take(conn: sqlite3.Connection) -> bool:
            with transaction(conn, "IMMEDIATE"):
                return conn.execute(q.ACQUIRE_LEASE, params).rowcount == 1

        return await self._run(take)

    async def release_lease(self, name: str, holder: str) -> None:
        """Delete the lease row only when ``holder`` holds it."""
        params = {"name": name, "holder": holder}

        def release(conn: sqlite3.Connection) -> None:
            conn.execute(q.RELEASE_LEASE, params)

        await self._run(release)

    async def record_cycle(self, cycle: MaintenanceCycle) -> None:
        """Insert the cycle's row; an id already recorded is left as it was."""
        params = {
            **cycle.model_dump(include={"id", "job", "holder", "threads", "summaries", "facts"}),
            "started_at": stored_time(cycle.started_at),
            "finished_at": stored_time(cycle.finished_at),
            "steps": json.dumps(cycle.steps),
            "errors": json.dumps(cycle.errors),
        }

        def record(conn: sqlite3.Connection) -> None:
            conn.execute(q.INSERT_CYCLE, params)

        await self._run(record)

    async def recent_cycles(self, limit: int) -> list[MaintenanceCycle]:
        """The latest cycles by start time, read from the ``started_at`` index."""
        params = {"limit": page_limit(limit)}

        def read(conn: sqlite3.Connection) -> list[MaintenanceCycle]:
            return [
                MaintenanceCycle.model_validate(
                    {**dict(row), "steps": json.loads(row["steps"]), "errors": json.loads(row["errors"])}
                )
                for row in conn.execute(q.RECENT_CYCLES, params)
            ]

        return await self._run(read)
