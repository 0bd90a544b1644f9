"""Maintenance bookkeeping on Neo4j: leases and cycle records.

A lease is a node locked before it is read, so of several schedulers (processes or
machines) sharing one store exactly one runs a maintenance cycle at a time; each cycle
leaves a record node the ``started_at`` index lists newest first.
"""

from __future__ import annotations

import json
from datetime import datetime

from neo4j import AsyncManagedTransaction

from palimpsest.graph_schema.models import MaintenanceCycle
from palimpsest.graph_schema.neo4j import queries as q
from palimpsest.graph_schema.neo4j.base import Neo4jBase, native, plain_props
from palimpsest.graph_schema.prepare import check_limit, lease_times


class Neo4jMaintenance(Neo4jBase):
    """Leases and cycle records, apart because they serve the scheduler, not the memory itself."""

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float, *, now: datetime | None = None) -> bool:
        """Lock the lease node, then take it if free, expired or ours (see `MemoryStore`)."""
        moment, expires_at = lease_times(name, holder, ttl_seconds, now)

        async def work(tx: AsyncManagedTransaction) -> bool:
            (lease,) = await self._run(tx, q.LEASE_LOCK, name=name, holder=holder, expires_at=expires_at)
            if lease["holder"] != holder and native(lease["expires_at"]) > moment:
                return False
            await self._run(tx, q.LEASE_TAKE, name=name, holder=holder, expires_at=expires_at)
            return True

        return await self._transaction(work, write=True)

    async def release_lease(self, name: str, holder: str) -> None:
        """Expire the lease node, only when ``holder`` holds it (see `MemoryStore`)."""
        await self._query(q.LEASE_RELEASE, write=True, name=name, holder=holder)

    async def record_cycle(self, cycle: MaintenanceCycle) -> None:
        """Create the cycle's node once; an id already recorded is left as it was."""
        props = cycle.model_dump(exclude={"steps"}) | {"steps": json.dumps(cycle.steps)}
        await self._query(q.RECORD_CYCLE, write=True, props=props)

    async def recent_cycles(self, limit: int) -> list[MaintenanceCycle]:
        """The latest cycles by start time, from the ``started_at`` index (see `MemoryStore`)."""
        check_limit(limit)
        cycles: list[MaintenanceCycle] = []
        for row in await self._query(q.RECENT_CYCLES, limit=limit):
            props = plain_props(row["props"])
            props["steps"] = json.loads(props.get("steps") or "{}")
            props["errors"] = list(props.get("errors") or [])
            cycles.append(MaintenanceCycle.model_validate(props))
        return cycles
