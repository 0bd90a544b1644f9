"""The hook spool's drainer: storing, in order, the turns hooks queued (`palimpsest.server.feeds.spool`).

Why a separate process: a queued hook returns as soon as its payload is on disk, without
importing the store; something with the full imports must then store it. The hook starts
this module detached (its own session, nothing on stdout or stderr) when no drainer holds
the spool's drain lock, and it stores every queued payload, the ones queued while it runs
included, then exits. The same `drain` runs in-process where memory must see every turn
first (a ``SessionStart`` hook, before it answers), and in ``palimpsest serve``'s maintenance
ticks and ``palimpsest maintain``, which catch a spool whose drainer could not start.

Each payload runs as its hook would have (`palimpsest.server.feeds.hooks.run_hook`), with
the environment values and working directory kept with it, and leaves the queue only once
stored. Nobody reads this process's output, so what goes wrong with a payload (bad input,
an invalid setting) is logged beside the spool, where ``palimpsest status`` shows it, and
the payload dropped: it can never succeed, and must not block the ones after it. A store
that cannot be reached stops the drain instead, the payload kept for the next one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from palimpsest.graph_schema.errors import PalimpsestError, StoreUnavailable
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.agents.registry import entry_named
from palimpsest.server.cli.hook_call import FOLLOW_UP_SETTING, HookCall, start_follow_up
from palimpsest.server.feeds.hooks import run_hook
from palimpsest.server.feeds.spool import (
    DrainLock,
    Spool,
    appending,
    drainer_running,
    first_line,
    kept,
    log_error,
    pending,
    read_payload,
    remove_first,
    spool_for,
    start_drainer,
)
from palimpsest.server.store_settings import StoreSettings, invalid_configuration, on_store

if TYPE_CHECKING:
    from palimpsest.scheduler.maintenance import EvolutionStep, Pause


@contextmanager
def hook_environment(values: dict[str, str], cwd: str | None) -> Iterator[None]:
    """The kept environment and working directory of a queued hook, for the length of its run."""
    saved = dict(os.environ)
    here = os.getcwd()
    for name in [name for name in os.environ if kept(name) and name not in values]:
        del os.environ[name]
    os.environ.update(values)
    if cwd and os.path.isdir(cwd):
        os.chdir(cwd)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        os.chdir(here)


async def store_queued(store: MemoryStore, value: dict[str, Any]) -> None:
    """Run one queued hook call on ``store``, as the hook would have.

    Raises:
        PalimpsestError: bad input; ``StoreUnavailable`` when the store cannot be reached.
        ValidationError: a kept setting holds a value its field refuses.
    """
    call = HookCall(agent=str(value["agent"]), partition=value.get("partition"), store=value.get("store"))
    payload = str(value["payload"])
    with hook_environment(value.get("env") or {}, value.get("cwd")):
        flags = {"store": call.store, "partition": call.partition}
        settings = StoreSettings.from_environment(**{name: flag for name, flag in flags.items() if flag is not None})
        request = entry_named(call.agent).request(read_payload(payload))
        request.memory = request.reply = None
        partition = settings.partition or call.agent
        outcome = await run_hook(store, request, partition=partition, budget=settings.startup_budget)
        if outcome.follow_up and os.environ.get(FOLLOW_UP_SETTING, "on").lower() != "off":
            start_follow_up(call, payload)


def _problem(line: bytes, exc: BaseException) -> str:
    """One log line for a payload that could not be stored."""
    try:
        agent = json.loads(line).get("agent", "?")
    except (ValueError, AttributeError):
        agent = "?"
    if isinstance(exc, ValidationError):
        reason = invalid_configuration(exc)
    elif isinstance(exc, PalimpsestError):
        reason = str(exc)
    elif isinstance(exc, RecursionError):
        reason = "hook input nested too deep to store"
    else:
        reason = f"{type(exc).__name__}: {exc}"
    return f"queued {agent} hook dropped: {reason}"


async def drain(store: MemoryStore, spool: Spool, *, wait: bool) -> int:
    """Store every queued payload, oldest first, and return how many left the queue.

    Args:
        wait: wait for a drainer already at work (a ``SessionStart`` must see every turn);
            else return 0 at once when one is.
    """
    lock = DrainLock(spool)
    if not (await asyncio.to_thread(lock.take, wait=True) if wait else lock.take(wait=False)):
        lock.release()
        return 0
    done = 0
    try:
        while True:
            with appending(spool):
                line = first_line(spool)
                if line is None:
                    # Let go while no hook can append: one that appends after this finds
                    # the drain lock free and starts the next drainer.
                    lock.release()
                    return done
            try:
                await store_queued(store, json.loads(line))
            except StoreUnavailable as exc:
                log_error(spool, f"queued hook kept, store unreachable: {exc}")
                return done
            except Exception as exc:  # noqa: BLE001 - anything a payload raises is logged, never blocks the queue
                log_error(spool, _problem(line, exc))
            remove_first(spool, line)
            done += 1
    finally:
        lock.release()


def spool_step(store: MemoryStore, uri: str, *, in_process: bool = True) -> EvolutionStep:
    """An evolution step draining the spool of the store at ``uri``, first in the tick, so the rest sees every turn.

    Why: a drainer that could not start (no process left, a crash before its first
    payload) leaves turns queued until a hook starts the next; the server's ticks and
    ``palimpsest maintain`` store them anyway. ``maintain`` drains in its own process
    (``in_process``); a server starts the detached drainer instead, since draining sets
    each payload's environment and working directory for the time it runs, which the
    server's other coroutines must not see.
    """
    from palimpsest.scheduler.maintenance import EvolutionStep

    async def run(pause: Pause) -> int:
        spool = spool_for(uri)
        if in_process:
            return await drain(store, spool, wait=False)
        waiting = pending(spool)
        if waiting and not drainer_running(spool):
            start_drainer(uri)
        return waiting

    return EvolutionStep("hook_spool", run)


def main(args: list[str]) -> int:
    """Drain the spool of the store at ``args[0]``: 0 when drained, 1 otherwise (nobody reads it)."""
    if len(args) != 1:
        return 1
    uri = args[0]
    spool = spool_for(uri)
    try:
        settings = StoreSettings.from_environment(store=uri)
        asyncio.run(on_store(settings, lambda store: drain(store, spool, wait=False)))
    except ValidationError as exc:
        log_error(spool, f"drainer could not start: {invalid_configuration(exc)}")
        return 1
    except PalimpsestError as exc:
        log_error(spool, f"drainer could not open the store: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
