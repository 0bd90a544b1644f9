"""Foreground first: tool calls go ahead of background maintenance in one process.

Compaction and evolution share the event loop, the store connection and the CPU with
the MCP tools. A grep must not wait behind a compaction pass, so every tool call holds
the `ForegroundGate` while it runs, and background work awaits `ForegroundGate.wait_idle`
between batches (between summaries): it goes on only once no call is in flight and
none has ended within a short quiet window (an agent's calls come in bursts, a few
milliseconds apart). Under constant load the gate would never open, so background
work is guaranteed a share of the time (``PALIMPSEST_BACKGROUND_SHARE``, a quarter by
default): after a slice of work that took ``w`` seconds, a background task waits at
most ``w * (1 - share) / share`` for the foreground to go quiet (and never more than
a cap), then does its next slice anyway. A slice is one summary or one batch, so a tool
call waits behind one slice at most, and the backlog of a busy server still shrinks.
Work that has fallen far behind may ask for a larger share at its wait (compaction of
a thread at twice its trigger asks for twice the share: `palimpsest.scheduler.maintenance`),
so under sustained appends a backlog stays bounded instead of growing with the load.

The gate is in-process on purpose: across processes the store's leases decide who
runs a job, and each process only has to be polite to its own clients.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

#: How long after the last tool call ends background work waits before resuming.
QUIET_SECONDS = 0.05
#: The longest background work yields at one pause, so it never starves.
MAX_WAIT_SECONDS = 2.0
#: The share of a busy process's time background work is guaranteed.
BACKGROUND_SHARE = 0.25


class ForegroundGate:
    """Counts tool calls in flight; background work waits for none, within its share.

    Args:
        quiet_seconds: How long no call must have been in flight before background
            work resumes.
        max_wait_seconds: The longest one `wait_idle` waits before letting background
            work do one more batch anyway.
        background_share: The share of the time background work may take while calls
            keep coming (see the module).
    """

    def __init__(
        self,
        *,
        quiet_seconds: float = QUIET_SECONDS,
        max_wait_seconds: float = MAX_WAIT_SECONDS,
        background_share: float = BACKGROUND_SHARE,
    ) -> None:
        if not 0 < background_share <= 1:
            raise ValueError(f"background_share must be in (0, 1], got {background_share}")
        self.quiet_seconds = quiet_seconds
        self.max_wait_seconds = max_wait_seconds
        self.background_share = background_share
        self._active = 0
        self._last_left = float("-inf")
        self._changed = asyncio.Event()
        self._stopping = False
        # When each background task last went back to work (left `wait_idle`): the time
        # since then is the slice it just did.
        self._resumed: weakref.WeakKeyDictionary[asyncio.Task[object], float] = weakref.WeakKeyDictionary()
        # The last slice any background task did: what a task that has done none yet
        # (a tick just starting) is held to.
        self._last_slice: float | None = None

    @property
    def active(self) -> int:
        """Tool calls in flight right now."""
        return self._active

    def stop_waiting(self) -> None:
        """End every wait now and from now on, because the process is stopping.

        Background work must reach its pause point (and stop there) at once, not after
        waiting for tool calls to go quiet.
        """
        self._stopping = True
        self._changed.set()

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

    async def wait_idle(self, share: float | None = None) -> bool:
        """Wait until no tool call is in flight and the quiet window has passed.

        Why a bound: under a steady stream of calls the gate would never open, and
        memory would never be digested; once the calling task's share is due (or after
        ``max_wait_seconds``) one more slice goes through.

        Args:
            share: The share this wait is owed in place of ``background_share`` (work
                that has fallen behind asks for more), in (0, 1].

        Returns:
            True when the foreground went idle, False when the wait hit its bound.
        """
        if share is not None and not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share}")
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        start = loop.time()
        deadline = start + self._longest_wait(task, start, share or self.background_share)
        try:
            while True:
                now = loop.time()
                if self._stopping:
                    return False
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
        finally:
            if task is not None:
                self._resumed[task] = loop.time()

    def _longest_wait(self, task: asyncio.Task[object] | None, now: float, share: float) -> float:
        """How long this wait may last: the share owed for the task's last slice, capped.

        A task with no slice yet (a tick starting) owes what the last slice of any
        background task did, so a tick that starts every few seconds is not held a
        whole cap each time; before any slice, the cap.
        """
        resumed = self._resumed.get(task) if task is not None else None
        if resumed is not None:
            self._last_slice = now - resumed
        if self._last_slice is None:
            return self.max_wait_seconds
        owed = self._last_slice * (1 - share) / share
        return min(owed, self.max_wait_seconds)
