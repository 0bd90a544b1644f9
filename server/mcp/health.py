"""``/health``: whether this server can do its work now, for a load balancer or a container engine.

Healthy means the store is open (it opens in the background as the server starts: until
then the answer is 503, ``not open``) and answers (within ``PROBE_SECONDS``, so a store that hangs reads as
gone rather than stalling the probe), and the maintenance scheduler runs when settings
ask for it. Every request probes afresh: nothing is cached, so the answer turns
unhealthy on the first request after the store goes away and healthy again on the
first after it returns. The body says why, and never carries a partition's content,
so it needs no token.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.graph_schema.models import MaintenanceCycle, UtcDatetime

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from palimpsest.server.mcp.starting import RuntimeHolder
    from palimpsest.server.mcp.tools import Runtime

#: Seconds the store has to answer the probe before it counts as unreachable.
PROBE_SECONDS = 1.5


@dataclass
class LiveServer:
    """What the lifespans opened, for the HTTP routes that run outside an MCP call.

    The store lifespan sets ``holder`` as it starts and fills ``runtime`` once the store
    is open (in the background), the maintenance lifespan ``scheduler`` after that; both
    are cleared again on the way out, so a route never uses a closed store.
    """

    runtime: Runtime | None = None
    scheduler: AsyncIOScheduler | None = None
    scheduler_wanted: bool = True
    holder: RuntimeHolder[Runtime] | None = None

    async def settled(self) -> None:
        """Wait until the store opened or failed to (no wait before the lifespan started)."""
        if self.holder is not None:
            await self.holder.settled()


class LastCycle(BaseModel):
    """The newest maintenance cycle of any process on the store, without partition detail."""

    job: str
    finished_at: UtcDatetime
    errors: int


class Health(BaseModel):
    """The body of ``/health``."""

    status: Literal["healthy", "unhealthy"]
    store: Literal["reachable", "unreachable", "not open"]
    store_kind: str | None = None
    store_error: str | None = Field(None, description="Why the store did not answer, in one sentence.")
    scheduler: Literal["running", "stopped", "off"]
    last_cycle: LastCycle | None = None
    checked_at: UtcDatetime


async def check_health(live: LiveServer, *, now: datetime) -> Health:
    """Probe the store and the scheduler once."""
    scheduler: Literal["running", "stopped", "off"] = "off"
    if live.scheduler_wanted:
        scheduler = "running" if live.scheduler is not None and live.scheduler.running else "stopped"
    runtime = live.runtime
    if runtime is None:
        failed = live.holder.error if live.holder is not None else None
        return Health(status="unhealthy", store="not open", store_error=failed, scheduler=scheduler, checked_at=now)
    last: list[MaintenanceCycle] = []
    error: str | None = None
    try:
        last = await asyncio.wait_for(runtime.store.recent_cycles(1), PROBE_SECONDS)
    except TimeoutError:
        error = f"no answer within {PROBE_SECONDS} s"
    except PalimpsestError as exc:
        error = str(exc)
    healthy = error is None and scheduler != "stopped"
    return Health(
        status="healthy" if healthy else "unhealthy",
        store="reachable" if error is None else "unreachable",
        store_kind=runtime.store.kind,
        store_error=error,
        scheduler=scheduler,
        last_cycle=LastCycle(job=last[0].job, finished_at=last[0].finished_at, errors=len(last[0].errors))
        if last
        else None,
        checked_at=now,
    )


def register_health(server: FastMCP, live: LiveServer) -> None:
    """Add ``GET /health`` to a server's HTTP app: 200 when healthy, 503 when not, JSON either way."""

    @server.custom_route("/health", methods=["GET"], include_in_schema=False)
    async def health(request: Request) -> Response:
        report = await check_health(live, now=datetime.now(UTC))
        return JSONResponse(report.model_dump(mode="json"), status_code=200 if report.status == "healthy" else 503)
