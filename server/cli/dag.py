"""The commands on the summary DAG: ``compact`` folds a thread, ``describe`` and ``expand`` open it.

Together they are the lossless round trip by hand: compact a thread into summaries,
look at one, and expand it back to the messages it covers, byte for byte.
``palimpsest.server.cli.main`` registers them on the app.
"""

from __future__ import annotations

from typing import Annotated

import typer

from palimpsest.graph_schema.models import ExpandPage, Summary
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
from palimpsest.server.retrieval.context import expand_node


def compact(
    thread_id: Annotated[str, typer.Argument(help="The thread to compact.")],
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Fold every message outside the fresh tail, below the threshold too, except a tool call whose "
            "result is still in the tail: a pair is never split, so it waits for the tail to move on (said on stderr).",
        ),
    ] = False,
    partition: PartitionOption = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Compact one thread now: summarize its old messages, then escalate full levels.

    Example: palimpsest compact 3f2c9a1e-session --force
    """
    from palimpsest.scheduler.compaction import CompactionResult, compact_thread
    from palimpsest.scheduler.summarizers import make_summarizer
    from palimpsest.server.cli import output

    settings = settings_from_flags(store, partition)
    target = home_partition(settings)

    async def work(opened: MemoryStore) -> tuple[CompactionResult, int]:
        summarizer = make_summarizer(settings.llm)
        result = await compact_thread(opened, target, thread_id, settings.compaction, summarizer, force=force)
        uncovered = await opened.count_uncovered(target, thread_id) if force and result.status != "busy" else 0
        return result, max(0, uncovered - settings.keep_recent)

    result, waiting = run_command(lambda: on_store(settings, work))
    if waiting:
        typer.echo(
            f"note: {waiting} {'message' if waiting == 1 else 'messages'} outside the fresh tail stay uncompacted: "
            "tool calls whose results are in the tail wait with them, since a pair is never split",
            err=True,
        )
    if json:
        output.print_json(result)
        return
    console = output.stdout_console()
    if result.status == "compacted":
        console.print(
            f"compacted {thread_id}: {result.summaries_created} summaries ({result.escalations} escalations)",
            markup=False,
        )
        for summary_id in result.summary_ids:
            console.print(f"  {summary_id}", markup=False)
    elif result.status == "busy":
        console.print(f"{thread_id} is being compacted by another process; nothing done", markup=False)
    else:
        console.print(f"{thread_id}: nothing to compact", markup=False)


def describe(
    summary_id: Annotated[str, typer.Argument(help="A summary id (sum_...), or a message id (msg_...).")],
    partition: PartitionOption = None,
    all_partitions: AllPartitionsOption = False,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Show a summary: its place in the DAG, ranges, tokens, digest and text.

    Example: palimpsest describe sum_4be1c0d2a9f34e7b8c61d05f2a93e7c4
    """
    from palimpsest.server.cli import output

    settings = settings_from_flags(store, partition)
    scope = read_scope(settings, all_partitions, partition)

    async def work(opened: MemoryStore) -> Summary:
        return await opened.get_summary(scope, summary_id)

    result = run_command(lambda: on_store(settings, work))
    if json:
        from palimpsest.server.mcp.tools import PREVIEW_CHARS, SummaryDescription

        preview = result.text if len(result.text) <= PREVIEW_CHARS else result.text[:PREVIEW_CHARS] + "…"
        output.print_json(SummaryDescription(**result.model_dump(exclude={"text"}), preview=preview))
    else:
        output.stdout_console().print(output.summary_panel(result))


def expand(
    summary_id: Annotated[str, typer.Argument(help="A summary id (sum_...), or a message id (msg_...).")],
    depth: Annotated[
        int | None, typer.Option("--depth", min=1, help="Levels down: 1 = direct children; none = the messages.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10000, help="Items per page.")] = 200,
    cursor: Annotated[
        str | None, typer.Option("--cursor", metavar="C", help="The next_cursor of the previous page.")
    ] = None,
    partition: PartitionOption = None,
    all_partitions: AllPartitionsOption = False,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Print what a summary covers, in order: the original messages, byte for byte (a message id: that message).

    Example: palimpsest expand sum_4be1c0d2a9f34e7b8c61d05f2a93e7c4 --limit 50
    """
    from palimpsest.server.cli import output

    settings = settings_from_flags(store, partition)
    scope = read_scope(settings, all_partitions, partition)

    async def work(opened: MemoryStore) -> ExpandPage:
        return await expand_node(opened, scope, summary_id, depth=depth, limit=limit, cursor=cursor)

    page = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(page)
    else:
        output.print_expansion(output.stdout_console(), page)
