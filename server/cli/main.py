"""The ``palimpsest`` command line: what a person (or a script) does by hand.

Each command is a thin verb over one domain function, on the store that settings name
(``--store`` overrides ``PALIMPSEST_STORE``). Results print as rich tables, or as JSON
on stdout with ``--json``. Any ``PalimpsestError`` ends the command with one line,
``error: ...``, on stderr and exit code 1; usage errors exit 2, as typer does.

This module holds the ``app`` (the ``palimpsest`` console script), the commands that
run or check the whole store (``serve``, ``stats``, ``doctor``, ``maintain``), and
registers, in the order ``palimpsest --help`` lists them, the commands of its sibling
modules: ``palimpsest.server.cli.feed`` (ingest, hook), ``palimpsest.server.cli.dag`` (compact, describe,
expand) and ``palimpsest.server.cli.search`` (grep, kg, recall, context). What they all share is
in ``palimpsest.server.cli.support``; how results look, in ``palimpsest.server.cli.output``.
"""

from __future__ import annotations

import asyncio
import json as output_json
import logging
import signal
import socket
import sys
from typing import Annotated

import typer

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.graph_schema.models import MaintenanceCycle, StoreStats
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.cli import dag as cli_dag
from palimpsest.server.cli import feed as cli_feed
from palimpsest.server.cli import portability as cli_portability
from palimpsest.server.cli import search as cli_search
from palimpsest.server.cli import serve as cli_serve
from palimpsest.server.cli import setup as cli_setup
from palimpsest.server.cli.support import (
    AllPartitionsOption,
    JsonOption,
    PartitionOption,
    StoreOption,
    fail,
    on_store,
    read_scope,
    run_command,
    settings_from_flags,
)
from palimpsest.server.settings import Settings

app = typer.Typer(
    name="palimpsest",
    help="Palimpsest: a lossless memory server for coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


def stats(
    partition: PartitionOption = None,
    all_partitions: AllPartitionsOption = False,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Count threads, messages, summaries by level and facts (what memory_stats returns).

    Without --partition or --all-partitions it counts the home partition and lists every
    partition in the store, with its threads (--json: under "partitions").

    Example: palimpsest stats --partition claude-code
    """
    from palimpsest.server.cli import output

    settings = settings_from_flags(store, partition)
    scope = read_scope(settings, all_partitions, partition)
    listed = partition is None and not all_partitions

    async def work(opened: MemoryStore) -> tuple[StoreStats, dict[str, int] | None]:
        return await opened.stats(scope), (await opened.partitions() if listed else None)

    result, partitions = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(result if partitions is None else result.model_dump(mode="json") | {"partitions": partitions})
        return
    console = output.stdout_console()
    console.print(output.stats_table(result))
    if partitions is not None:
        console.print(output.partitions_line(partitions))


def doctor(
    partition: Annotated[
        str | None, typer.Option("--partition", metavar="NAME", help="Check one partition only; default all.")
    ] = None,
    thread: Annotated[str | None, typer.Option("--thread", metavar="ID", help="Check one thread only.")] = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Verify every invariant of the lossless contract; exit 1 naming each breach.

    Example: palimpsest doctor --store sqlite:///memory.db
    """
    from palimpsest.graph_schema.doctor import Breach, check_store
    from palimpsest.scheduler.portability.archive import read_archived_messages
    from palimpsest.server.cli import output

    settings = settings_from_flags(store)

    async def work(opened: MemoryStore) -> tuple[list[Breach], int]:
        found = await check_store(opened, partition=partition, thread_id=thread, read_archived=read_archived_messages)
        checked = 1 if thread is not None else (await opened.stats(partition)).threads
        return found, checked

    breaches, threads = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(
            {
                "ok": not breaches,
                "threads": threads,
                "breaches": [breach.model_dump(mode="json") for breach in breaches],
            }
        )
    elif breaches:
        output.stdout_console().print(output.breaches_table(breaches))
    else:
        noun = "thread" if threads == 1 else "threads"
        output.stdout_console().print(f"all 7 invariants hold across {threads} {noun}", markup=False)
    if breaches:
        for breach in breaches:
            where = f"{breach.thread_id}/{breach.node_id}" if breach.node_id else breach.thread_id
            typer.echo(f"breach of invariant {breach.invariant} in {where}: {breach.message}", err=True)
        raise typer.Exit(1)


def ui(
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Loopback port to listen on; 0 picks a free one.")
    ] = 0,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Open the web viewer on loopback: print its address, then serve it until Ctrl+C.

    The viewer is read-only: this process serves no MCP (no /mcp) and runs no background maintenance.

    Example: palimpsest ui --store sqlite:///memory.db
    """
    from palimpsest.server.mcp.app import run_server

    settings = settings_from_flags(store).model_copy(update={"scheduler": False})
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # As uvicorn does for the sockets it binds: a restart on the same --port must not
    # wait for the last run's connections to leave TIME_WAIT.
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind(("127.0.0.1", port))
    except OSError as exc:
        listening.close()
        raise fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
    address = f"http://127.0.0.1:{listening.getsockname()[1]}/ui"
    # Before serving, and flushed: a script reading the address must get it now.
    print(output_json.dumps({"url": address}) if json else address, flush=True)
    try:
        run_server(settings, transport="http", port=listening.getsockname()[1], listening=listening, serves_mcp=False)
    except PalimpsestError as exc:
        raise fail(str(exc)) from None
    finally:
        listening.close()


# -- maintenance: the background loop by hand ------------------------------------------


async def _maintain_until_signalled(opened: MemoryStore, settings: Settings) -> None:
    """Run the maintenance jobs now and on their intervals until SIGINT or SIGTERM."""
    from palimpsest.scheduler.embedders import make_embedder
    from palimpsest.scheduler.maintenance import Maintenance, evolution_steps
    from palimpsest.scheduler.summarizers import make_summarizer
    from palimpsest.server.cli.hook_drain import spool_step

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await Maintenance(
            opened,
            settings.maintenance,
            make_summarizer(settings.llm),
            steps=[
                spool_step(opened, settings.store),
                *evolution_steps(
                    opened,
                    make_embedder(settings.embedder, settings.llm),
                    settings.store_budget,
                    facts=settings.facts,
                    llm=settings.llm,
                ),
            ],
        ).run_until(stop)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def maintain(
    once: Annotated[bool, typer.Option("--once", help="Run every tick now, then exit.")] = False,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Run background maintenance by hand: compaction with escalation, then evolution.

    With --once, each job runs one tick now, with a progress bar, and the command exits (1 if a tick had errors).

    Without it, the jobs run now, then every PALIMPSEST_COMPACTION_INTERVAL and KG_EVOLUTION_INTERVAL
    seconds until Ctrl+C.

    Leases in the store keep it off the threads and steps other processes are working on.

    Example: palimpsest maintain --once --store sqlite:///memory.db
    """
    from palimpsest.scheduler.embedders import make_embedder
    from palimpsest.scheduler.maintenance import Maintenance, Progress, evolution_steps
    from palimpsest.scheduler.summarizers import make_summarizer
    from palimpsest.server.cli import output
    from palimpsest.server.cli.hook_drain import spool_step

    settings = settings_from_flags(store)
    if not once:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
        run_command(lambda: on_store(settings, lambda opened: _maintain_until_signalled(opened, settings)))
        return
    show_bar = not json and sys.stderr.isatty()

    async def work(opened: MemoryStore) -> dict[str, MaintenanceCycle | None]:
        def maintenance(progress: Progress | None) -> Maintenance:
            steps = [
                spool_step(opened, settings.store),
                *evolution_steps(
                    opened,
                    make_embedder(settings.embedder, settings.llm),
                    settings.store_budget,
                    facts=settings.facts,
                    progress=progress,
                    llm=settings.llm,
                ),
            ]
            return Maintenance(opened, settings.maintenance, make_summarizer(settings.llm), steps=steps)

        if not show_bar:
            return await maintenance(None).run_once()
        with output.maintenance_progress() as bar:
            # The embedding backfill gets its own bar: on a store embedded for the first
            # time it is the long part (nodes embedded of those missing).
            bars = output.job_bars(bar)
            return await maintenance(bars).run_once(bars)

    cycles = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json({job: cycle.model_dump(mode="json") if cycle else None for job, cycle in cycles.items()})
    else:
        output.stdout_console().print(output.cycles_table(cycles))
    errors = [f"{job}: {error}" for job, cycle in cycles.items() if cycle is not None for error in cycle.errors]
    for error in errors:
        typer.echo(f"error: {error}", err=True)
    if errors:
        raise typer.Exit(1)


# In the order ``palimpsest --help`` lists them (groups, like ``hook``, come after the commands).
app.command()(cli_feed.ingest)
app.add_typer(cli_feed.hook_app)
app.command()(cli_setup.install)
app.command()(cli_setup.uninstall)
app.command()(cli_setup.status)
app.command()(stats)
app.command()(cli_dag.compact)
app.command()(cli_dag.describe)
app.command()(cli_dag.expand)
app.command()(doctor)
app.command()(cli_search.grep)
app.command()(cli_serve.serve)
app.command()(ui)
app.command()(maintain)
app.command()(cli_search.kg)
app.command()(cli_search.recall)
app.command()(cli_search.context)
app.command()(cli_portability.export)
app.command(name="import")(cli_portability.import_)
app.command()(cli_portability.migrate)
app.command()(cli_portability.archive)
app.command()(cli_portability.restore)
