"""Per-tool call counts, errors and latency percentiles, kept in memory since the process started.

Why in the process and not in the store: they describe this server (how fast its tools
answer, how often they fail), not the memory, and several processes share one store.
``memory_stats`` and the viewer show them. Counts cover every call since start; the
percentiles are over each tool's last ``WINDOW`` calls, so memory stays bounded on a
server that runs for months.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

import mcp_types
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from pydantic import BaseModel, Field

#: Latencies kept per tool for the percentiles.
WINDOW = 10_000


class ToolMetric(BaseModel):
    """How one tool has answered since the server started."""

    tool: str
    calls: int = Field(description="Calls since start, failed ones included.")
    errors: int = Field(description="Calls that ended in an error.")
    p50_ms: float = Field(description=f"Median latency over the last {WINDOW} calls, in milliseconds.")
    p95_ms: float = Field(description=f"95th percentile latency over the last {WINDOW} calls, in milliseconds.")


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values (0 for none)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass
class _ToolCounters:
    calls: int = 0
    errors: int = 0
    seconds: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))


class ToolMetrics:
    """The counters of every tool of one server process."""

    def __init__(self) -> None:
        self._tools: dict[str, _ToolCounters] = {}

    def record(self, tool: str, seconds: float, *, failed: bool) -> None:
        """Count one finished call of ``tool`` that took ``seconds``."""
        counters = self._tools.setdefault(tool, _ToolCounters())
        counters.calls += 1
        counters.errors += int(failed)
        counters.seconds.append(seconds)

    def snapshot(self) -> list[ToolMetric]:
        """Every tool called so far, by name."""
        metrics = []
        for tool, counters in sorted(self._tools.items()):
            ordered = sorted(counters.seconds)
            metrics.append(
                ToolMetric(
                    tool=tool,
                    calls=counters.calls,
                    errors=counters.errors,
                    p50_ms=round(percentile(ordered, 0.50) * 1000, 3),
                    p95_ms=round(percentile(ordered, 0.95) * 1000, 3),
                )
            )
        return metrics


class CallMetrics(Middleware):
    """Times every tool call and counts its errors, as the client sees it (gate wait included)."""

    def __init__(self, metrics: ToolMetrics) -> None:
        self.metrics = metrics

    async def on_call_tool(
        self,
        context: MiddlewareContext[mcp_types.CallToolRequestParams],
        call_next: CallNext[mcp_types.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        """Run the call and record its latency and whether it failed."""
        started = time.perf_counter()
        failed = True
        try:
            result = await call_next(context)
            failed = False
            return result
        finally:
            self.metrics.record(context.message.name, time.perf_counter() - started, failed=failed)
