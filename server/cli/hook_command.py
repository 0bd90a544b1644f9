"""``palimpsest hook AGENT``: store the turn an agent just took, print what it takes back.

An agent starts this command after every turn, so its process start is paid all day.
typer (with the click it carries), pydantic-settings and the full settings class were a
sixth of that start-up, counted in instructions, and a hook needs none of them: its
three flags are read from the argument list by `parse_hook_call` (``argparse``, with the
``shutil`` and ``gettext`` it loads, was a fifth of the queued path's instructions) and its
settings come from `StoreSettings`. So the
console script (``palimpsest.server.cli.launch``) runs a plain hook call here directly,
and leaves anything else (``--help``, an unknown agent or flag) to the typer group in
``palimpsest.server.cli.feed``, which registers the same command with the same flags
and help and answers usage errors. A test keeps the two parsers' flags the same.

A payload whose event prints nothing is only checked and queued, durably, on the store's
spool (`palimpsest.server.feeds.spool`), for a detached drainer
(`palimpsest.server.cli.hook_drain`) to store: that path imports neither pydantic nor
asyncio nor the store, and returns in a few times a bare interpreter's start.

A ``Stop`` that finds the transcript without the turn's end (not written yet, or not
all) leaves a detached process behind to catch up (`palimpsest.server.cli.hook_follow_up`):
the hook itself returns at once, exit 0, printing nothing more.

This module imports at the top only what parsing needs; running the hook imports the rest.
"""

from __future__ import annotations

import os
import sys

from palimpsest.server.agents.registry import NAMES, entry_named
from palimpsest.server.cli.hook_call import FOLLOW_UP_SETTING, HookCall, start_follow_up

#: The hook command's flags, as the typer command in ``palimpsest.server.cli.feed`` declares them, each with
#: whether it takes a value. No ``--help`` and no abbreviations: those, like any flag not listed here, go to typer.
FLAGS = {"--partition": True, "--store": True, "--json": False}


def parse_hook_call(args: list[str]) -> HookCall | None:
    """``args`` (after ``hook``) as a hook call, or None when typer should answer them (help, a usage error).

    A flag's value comes after ``=`` or as the next argument, as typer reads it; a value
    that looks like a flag (``--store --json``) is a usage error, left to typer to name. The
    last of a repeated flag counts.
    """
    if not args or args[0] not in NAMES:
        return None
    values: dict[str, str] = {}
    as_json = False
    rest = iter(args[1:])
    for arg in rest:
        name, equals, value = arg.partition("=")
        takes = FLAGS.get(name)
        if takes is None or (equals and not takes):
            return None
        if not takes:
            as_json = True
            continue
        if not equals:
            value = next(rest, "-")
            if value.startswith("-"):
                return None
        values[name] = value
    return HookCall(agent=args[0], partition=values.get("--partition"), store=values.get("--store"), json=as_json)


def run_hook_call(call: HookCall) -> int:
    """Read the agent's payload on stdin, queue it or store what is new, print what the agent takes back.

    A payload whose event prints nothing is queued on the store's spool (checked as JSON
    first) and left to a drainer, unless ``PALIMPSEST_HOOK_QUEUE=off``, ``--json`` (which
    prints what was stored) or the spool cannot be written. An event that prints memory
    back drains the spool first, in this process, so the memory sees every queued turn.

    Returns:
        The exit code: 0, or 1 after one ``error: ...`` line on stderr (never 2, which
        an agent reads as "block"), whatever the input: stdin that is not UTF-8 or over
        ``STDIN_BYTES``, JSON nested deeper than Python parses, a transcript that is no
        regular file.
    """
    from palimpsest.graph_schema.errors import PalimpsestError
    from palimpsest.server.feeds import spool

    drain_first: str | None = None
    try:
        payload = read_stdin(spool.STDIN_BYTES)
        if spool.queue_enabled() and not call.json:
            values = spool.read_payload(payload)
            uri = spool.store_uri(call.store)
            if spool.prints_memory(call.agent, values):
                drain_first = uri
            elif queue_turn(call, payload, uri):
                return 0
    except PalimpsestError as exc:
        return _fail(str(exc))
    except MemoryError:
        return _fail("out of memory reading the hook's input or transcript; nothing was written")
    return store_turn(call, payload, drain_first)


def queue_turn(call: HookCall, payload: str, uri: str) -> bool:
    """Queue ``payload`` on the spool of the store at ``uri`` and see a drainer runs; whether it was queued.

    A spool that cannot be written (a read-only or full disk) is no error: the hook stores
    the turn itself then.
    """
    from palimpsest.server.feeds import spool

    queue = spool.spool_for(uri)
    try:
        spool.enqueue(queue, spool.entry(call.agent, call.partition, call.store, payload))
        if not spool.drainer_running(queue):
            spool.start_drainer(uri)
    except OSError:
        return False
    return True


def store_turn(call: HookCall, payload: str, drain_first: str | None) -> int:
    """Store what is new in this process (after draining the spool of ``drain_first``), print the reply."""
    import asyncio

    from pydantic import ValidationError

    from palimpsest.graph_schema.errors import PalimpsestError
    from palimpsest.graph_schema.store import MemoryStore
    from palimpsest.server.feeds.hooks import HookOutcome, run_hook
    from palimpsest.server.feeds.spool import read_payload, spool_for
    from palimpsest.server.store_settings import StoreSettings, invalid_configuration, on_store

    flags = {"store": call.store, "partition": call.partition}
    try:
        settings = StoreSettings.from_environment(**{name: value for name, value in flags.items() if value is not None})
    except ValidationError as exc:
        return _fail(invalid_configuration(exc))
    agent = entry_named(call.agent)

    async def work(opened: MemoryStore) -> HookOutcome:
        if drain_first is not None:
            from palimpsest.server.cli.hook_drain import drain

            try:
                await drain(opened, spool_for(drain_first), wait=True)
            except OSError:
                pass  # a spool that cannot be read holds nothing this hook could add
        partition = settings.partition or call.agent
        return await run_hook(opened, request, partition=partition, budget=settings.startup_budget)

    try:
        request = agent.request(read_payload(payload))
        outcome = asyncio.run(on_store(settings, work))
    except PalimpsestError as exc:
        return _fail(str(exc))
    except RecursionError:
        # A value nested just under the parser's limit can still be too deep to write back as JSON.
        return _fail("hook input nested too deep to store; nothing was written")
    except MemoryError:
        return _fail("out of memory reading the hook's input or transcript; nothing was written")
    if outcome.follow_up and os.environ.get(FOLLOW_UP_SETTING, "on").lower() != "off":
        start_follow_up(call, payload)
    if call.json:
        from palimpsest.server.cli import output

        output.print_json(outcome.report)
    elif outcome.reply is not None:
        print(outcome.reply, flush=True)
    return 0


def read_stdin(limit: int) -> str:
    """The hook's stdin as text, at most ``limit`` bytes of it.

    Read as bytes and decoded strictly: text decoding would turn invalid UTF-8 into
    surrogates that fail later, far from their cause.

    Raises:
        InvalidInput: if it is over ``limit`` bytes or not UTF-8.
    """
    from palimpsest.graph_schema.errors import InvalidInput

    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        raise InvalidInput(f"hook input on stdin is over {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"hook input on stdin is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 1
