"""A hook's follow-up: catching up on a transcript the agent finishes writing after its ``Stop``.

Why: an agent may run its ``Stop`` hook before the turn's end is in its transcript
(``agy`` writes the file seconds after ``Stop``; any agent may flush its last line a
moment late), and no later hook comes if the user stops there. The hook must not keep
the agent waiting, so when `palimpsest.server.feeds.hooks.run_hook` finds the turn's end
missing it says so (``HookOutcome.follow_up``), and the hook command starts this module
as a detached process (`palimpsest.server.cli.hook_call.start_follow_up`: its own
session, no terminal, nothing inherited on stdout or stderr) with the agent's payload
on stdin, then returns.

The follow-up builds the same request from the payload again and again (a file that
did not exist may exist now), reads what is new through the read positions (so it
stores nothing twice, whatever the hook or the next hook call stores meanwhile), and
stops once the thread ends with the assistant's answer or the request's ``follow_up_s``
has passed: after 0.5, 1.5, 3.5, 7.5 s and so on, then at the end. Nobody reads what it
prints or its exit status: an error ends it, and the next hook call of the conversation
reads the transcript again anyway.
"""

from __future__ import annotations

import asyncio
import sys

from palimpsest.server.agents.registry import entry_named
from palimpsest.server.cli.hook_command import HookCall, parse_hook_call

#: Seconds before the first look; each later wait is twice the one before.
FIRST_WAIT_S = 0.5


def waits(window_s: float) -> list[float]:
    """Seconds to sleep before each look, summing to ``window_s``: 0.5, 1, 2, 4, ... and what is left."""
    delays: list[float] = []
    delay, total = FIRST_WAIT_S, 0.0
    while total + delay < window_s:
        delays.append(delay)
        total += delay
        delay *= 2
    if window_s > total:
        delays.append(window_s - total)
    return delays


async def follow_up(call: HookCall, payload: str) -> bool:
    """Look for the turn's end until it is stored or the window closes; whether it was caught up."""
    from palimpsest.graph_schema.store import MemoryStore
    from palimpsest.server.feeds.hooks import answered, run_hook
    from palimpsest.server.feeds.spool import read_payload
    from palimpsest.server.store_settings import StoreSettings, on_store

    flags = {"store": call.store, "partition": call.partition}
    settings = StoreSettings.from_environment(**{name: value for name, value in flags.items() if value is not None})
    build = entry_named(call.agent).request
    values = read_payload(payload)
    partition = settings.partition or call.agent
    window = build(values).follow_up_s

    async def work(store: MemoryStore) -> bool:
        for delay in waits(window):
            await asyncio.sleep(delay)
            request = build(values)
            request.memory = request.reply = request.rules_file = None
            await run_hook(store, request, partition=partition, budget=0)
            if await answered(store, request, partition):
                return True
        return False

    return await on_store(settings, work)


def main(args: list[str]) -> int:
    """Run the follow-up the hook command started: 0 once caught up, 1 otherwise (nobody reads it)."""
    call = parse_hook_call(args)
    if call is None:
        return 1
    return 0 if asyncio.run(follow_up(call, sys.stdin.read())) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
