"""Foreground first: tool calls go ahead of background maintenance in one process.

Compaction and evolution share the event loop, the store connection and the CPU with
the MCP tools. A grep must not wait behind a compaction pass, so every tool call holds
the `ForegroundGate` while it runs, and background work awaits `ForegroundGate.wait_idle`
between batches (between summaries): it goes on only once no call is in flight and
none has ended within a short quiet window (an agent's calls come in bursts, a few
milliseconds apart). A cap bounds each wait so that a server under constant load
still digests its memory, one batch per cap.

The gate is in-process on purpose: across processes the store's leases decide who
runs a job, and each process only has to be polite to its own clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

#: How long after the last tool call ends background work waits before resuming.
QUIET_SECONDS = 0.05
#: The longest background work yields at one pause, so it never starves.
MAX_WAIT_SECONDS = 2.0


class ForegroundGate:
    """Counts tool calls in flight; background work waits for none, within a cap.

    Args:
        quiet_seconds: How long no call must have been in flight before background
            work resumes.
        max_wait_seconds: The longest one `wait_idle` waits before letting background
            work do one more batch anyway.
    """

    def __init__(self, *, quiet_seconds: float = QUIET_SECONDS, max_wait_seconds: float = MAX_WAIT_SECONDS) -> None:
        self.quiet_seconds = quiet_seconds
        self.max_wait_seconds = max_wait_seconds
        self._active = 0
        self._last_left = float("-inf")
        self._changed = asyncio.Event()

    @property
    def active(self) -> int:
        """Tool calls in flight right now."""
        return self._active

    @asynccontextmanager
    async def foreground(self) -> AsyncIterator[None]:
        """Hold the gate for the duration of one tool call."""
        self._active += 1
        self._changed.set()
        try:
            yield
        finally:
            self._active -= 1
            self._last_left = asyncio.get_running_loop().time()
            self._changed.set()

    async def wait_idle(self) -> bool:
        """Wait until no tool call is in flight and the quiet window has passed.

        Why a cap: under a steady stream of calls the gate would never open, and memory
        would never be digested; after ``max_wait_seconds`` one batch goes through.

        Returns:
            True when the foreground went idle, False when the wait hit the cap.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_wait_seconds
        while True:
            now = loop.time()
            if self._active == 0:
                quiet_left = self._last_left + self.quiet_seconds - now
                if quiet_left <= 0:
                    # Let calls that are ready to run go first even when none is in flight.
                    await asyncio.sleep(0)
                    return True
            else:
                quiet_left = float("inf")
            left = deadline - now
            if left <= 0:
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=min(quiet_left, left))
            except TimeoutError:
                pass
