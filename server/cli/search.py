"""The commands that find things in memory: ``grep``, ``recall``, ``kg`` and ``context``.

``grep`` searches messages and summaries, ``recall`` ranks facts, summaries and
messages together, ``kg`` manages the fact layer recall draws on, and ``context``
fits all of it into the token budget an agent reads. ``palimpsest.server.cli.main`` registers them on
the app.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.cli.support import (
    AllPartitionsOption,
    JsonOption,
    PartitionOption,
    StoreOption,
    home_partition,
    on_store,
    read_scope,
    run_command,
    settings_from_flags,
)
from palimpsest.server.retrieval.context import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET

if TYPE_CHECKING:
    from palimpsest.server.retrieval.context import AssembledContext
    from palimpsest.server.retrieval.grep import GrepResult


class GrepMode(StrEnum):
    """Search modes ``grep`` offers."""

    text = "text"
    regex = "regex"
    semantic = "semantic"
    hybrid = "hybrid"


class KgActionChoice(StrEnum):
    """What ``kg`` does."""

    status = "status"
    on = "on"
    off = "off"
    stats = "stats"
    clear = "clear"


def grep(
    query: Annotated[str, typer.Argument(help="Words to look for.")],
    mode: Annotated[
        GrepMode | None,
        typer.Option(
            "--mode",
            help="unset: hybrid once vectors exist, else text; text: words, ranked; regex: a pattern, in "
            "thread order; semantic: nearest in meaning; hybrid: words and meaning fused, the best ranking "
            "(these two refuse with PALIMPSEST_EMBEDDER=none).",
        ),
    ] = None,
    thread: Annotated[str | None, typer.Option("--thread", metavar="ID", help="Search one thread only.")] = None,
    partition: PartitionOption = None,
    all_partitions: AllPartitionsOption = False,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Most hits to show.")] = 20,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Search messages and summaries, with the summaries that cover each hit (grep_memories).

    Example: palimpsest grep "refresh token" --thread 3f2c9a1e-session --limit 5
    """
    from palimpsest.scheduler.embedders import make_embedder
    from palimpsest.server.cli import output
    from palimpsest.server.retrieval.grep import grep_memories

    settings = settings_from_flags(store, partition)
    scope = read_scope(settings, all_partitions, partition)

    async def work(opened: MemoryStore) -> GrepResult:
        embedder = (
            make_embedder(settings.embedder, settings.llm)
            if mode in (None, GrepMode.semantic, GrepMode.hybrid)
            else None
        )
        return await grep_memories(
            opened,
            query,
            partition=scope,
            mode=None if mode is None else mode.value,
            thread_id=thread,
            limit=limit,
            embedder=embedder,
        )

    result = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(result)
        return
    output.stdout_console().print(output.hits_table(result.hits))
    if mode is None:
        typer.echo(f"mode: {result.mode}", err=True)
    if result.truncated:
        typer.echo("note: the regex scan stopped at its cap; narrow it with --thread", err=True)


def kg(
    action: Annotated[
        KgActionChoice,
        typer.Argument(help="status, on / off (per thread; on extracts the history now), stats (by topic), clear."),
    ],
    thread: Annotated[
        str | None, typer.Option("--thread", metavar="ID", help="The thread; on and off need one.")
    ] = None,
    partition: PartitionOption = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Manage the fact layer: technical facts extracted from assistant messages (off by default).

    Example: palimpsest kg on --thread 3f2c9a1e-session
    """
    from palimpsest.scheduler.facts import KgAction, KgResult, kg_command
    from palimpsest.server.cli import output

    settings = settings_from_flags(store, partition)
    target = home_partition(settings)
    chosen: KgAction = action.value

    async def work(opened: MemoryStore) -> KgResult:
        return await kg_command(opened, target, chosen, thread)

    result = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(result)
    else:
        output.stdout_console().print(output.kg_view(result))


def recall(
    query: Annotated[str, typer.Argument(help="What to recall, in words.")],
    project: Annotated[
        str | None, typer.Option("--project", metavar="NAME", help="Only this project's facts and threads.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=100, help="Most items, all kinds together.")] = 10,
    include_superseded: Annotated[
        bool, typer.Option("--include-superseded", help="Also show superseded facts, after the current ones.")
    ] = False,
    partition: PartitionOption = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Recall facts, summaries and messages about a query across every thread, ranked together.

    Example: palimpsest recall "how do we authenticate API calls" --project api
    """
    from palimpsest.server import retrieval
    from palimpsest.server.cli import output
    from palimpsest.server.retrieval.recall import RecallResult

    settings = settings_from_flags(store, partition)
    target = home_partition(settings)

    async def work(opened: MemoryStore) -> RecallResult:
        from palimpsest.scheduler.embedders import make_embedder

        return await retrieval.recall.recall(
            opened,
            query,
            partition=target,
            project=project,
            limit=limit,
            include_superseded=include_superseded,
            embedder=make_embedder(settings.embedder, settings.llm),
        )

    result = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(result)
    else:
        output.stdout_console().print(output.recall_table(result))
        typer.echo(f"mode: {result.mode}", err=True)


def context(
    thread_id: Annotated[str, typer.Argument(help="The thread whose context to assemble.")],
    budget: Annotated[
        int,
        typer.Option(
            "--budget", metavar="TOKENS", min=MIN_BUDGET, max=MAX_BUDGET, help="Most tokens the text may take."
        ),
    ] = DEFAULT_BUDGET,
    query: Annotated[
        str | None, typer.Option("--query", metavar="TEXT", help="What you work on: adds a recall section.")
    ] = None,
    partition: PartitionOption = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Assemble a thread's context within a token budget: summaries, facts, recall, recent messages.

    Prints a table of the sections, then the text an agent would read (assemble_context).

    Example: palimpsest context 3f2c9a1e-session --budget 8000 --query "refresh token rotation"
    """
    from palimpsest.server.cli import output
    from palimpsest.server.retrieval.context import assemble_context

    settings = settings_from_flags(store, partition)
    target = home_partition(settings)

    async def work(opened: MemoryStore) -> AssembledContext:
        return await assemble_context(opened, thread_id, partition=target, budget_tokens=budget, query=query)

    result = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(result)
        return
    output.stdout_console().print(output.context_table(result))
    sys.stdout.write(result.text)
    sys.stdout.flush()
