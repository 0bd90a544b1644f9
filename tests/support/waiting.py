"""Waiting in tests for something that happens elsewhere: a server starting, background work.

A test never judges speed by the clock (a loaded machine makes any bound flaky); it only
waits for an event, and a deadline guards the wait so a test that would hang fails with
a sentence saying what never happened. These two helpers are that deadline, in one place.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_until(attempt: Callable[[], T | None], seconds: float, what: str, every: float = 0.2) -> T:
    """Call ``attempt`` every ``every`` seconds until it returns something, and return that.

    An exception from ``attempt`` (a dead server, say) ends the wait at once.
    """
    deadline = time.monotonic() + seconds
    while (result := attempt()) is None:
        if time.monotonic() > deadline:
            pytest.fail(f"after {seconds} s: {what}")
        time.sleep(every)
    return result


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float, what: str, every: float = 0.05) -> None:
    """Await ``check`` every ``every`` seconds until it holds."""
    try:
        async with asyncio.timeout(seconds):
            while not await check():
                await asyncio.sleep(every)
    except TimeoutError:
        pytest.fail(f"after {seconds} s: {what}")
