"""The ``palimpsest`` command line: what a person (or a script) does by hand.

Each command is a thin verb over one domain function, on the store that settings name
(``--store`` overrides ``PALIMPSEST_STORE``). Results print as rich tables, or as JSON
on stdout with ``--json``. Any ``PalimpsestError`` ends the command with one line,
``error: ...``, on stderr and exit code 1; usage errors exit 2, as typer does.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, TaskID, TextColumn
from rich.progress import Progress as RichProgress
from rich.table import Table

from graph_schema.errors import PalimpsestError
from graph_schema.models import ExpandPage, MaintenanceCycle, StoreStats, Summary
from graph_schema.store import MemoryStore
from scheduler.embedders import make_embedder
from scheduler.embedding import backfill_embeddings
from server import output
from server.claude_code import PARTITION as CLAUDE_PARTITION
from server.claude_hook import ingest_hook, read_hook_input
from server.context import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET, AssembledContext, assemble_context
from server.grep import GrepResult, grep_memories
from server.ingest import FileIngest, IngestReport, expand_paths, ingest_files
from server.settings import Settings

T = TypeVar("T")

#: Files at least this big, all together, get a progress bar while ingesting.
PROGRESS_BYTES = 1024 * 1024
#: The partition CLI commands read and write when neither flag nor settings name one.
DEFAULT_PARTITION = "default"

app = typer.Typer(
    name="palimpsest",
    help="Palimpsest: a lossless memory server for coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store", metavar="URI", help="Store URI (sqlite:///PATH, bolt://HOST:PORT); overrides PALIMPSEST_STORE."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
PartitionOption = Annotated[
    str | None,
    typer.Option("--partition", metavar="NAME", help="Partition to use; else PALIMPSEST_PARTITION, else 'default'."),
]
AllPartitionsOption = Annotated[
    bool, typer.Option("--all-partitions", help="Look in every partition (crossing partitions on purpose).")
]


class IngestFormat(StrEnum):
    """Transcript formats ``ingest`` reads."""

    auto = "auto"
    claude = "claude"
    codex = "codex"
    jsonl = "jsonl"


class GrepMode(StrEnum):
    """Search modes ``grep`` offers."""

    text = "text"
    regex = "regex"
    semantic = "semantic"
    hybrid = "hybrid"


class Transport(StrEnum):
    """How ``serve`` talks to MCP clients."""

    stdio = "stdio"
    http = "http"


def _settings(store: str | None, partition: str | None = None) -> Settings:
    """Settings from the environment, with flags given on the command line on top."""
    overrides: dict[str, Any] = {}
    if store is not None:
        overrides["store"] = store
    if partition is not None:
        overrides["partition"] = partition
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise _fail(f"invalid configuration: {where}: {first['msg']}") from None


def _home(settings: Settings) -> str:
    """The partition a command works in: ``--partition``, else settings, else the default."""
    return settings.partition or DEFAULT_PARTITION


def _scope(settings: Settings, all_partitions: bool, flag: str | None) -> str | None:
    """The partition a command reads: ``None`` (every one) only when asked explicitly."""
    if all_partitions:
        if flag is not None:
            raise typer.BadParameter("give either --partition or --all-partitions, not both")
        return None
    return _home(settings)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def _run(work: Callable[[], Awaitable[T]]) -> T:
    """Run a command's coroutine; a domain error becomes one line on stderr and exit 1."""
    try:
        return asyncio.run(work())
    except PalimpsestError as exc:
        raise _fail(str(exc)) from None


async def _on_store(settings: Settings, use: Callable[[MemoryStore], Awaitable[T]]) -> T:
    """Open and initialize the configured store, use it, close it whatever happens."""
    store = settings.open_store()
    try:
        await store.initialize()
        return await use(store)
    finally:
        await store.close()


@app.command()
def ingest(
    paths: Annotated[
        list[Path],
        typer.Argument(
            exists=True,
            readable=True,
            help="Transcript files, ingested in order; a directory stands for every *.jsonl under it, sorted.",
        ),
    ],
    format: Annotated[
        IngestFormat, typer.Option("--format", help="File format; auto judges each file by its content.")
    ] = IngestFormat.auto,
    partition: Annotated[
        str | None,
        typer.Option(
            "--partition",
            metavar="NAME",
            help="Partition to write to; else PALIMPSEST_PARTITION, else the format's own: "
            "claude, codex, or 'default' for jsonl.",
        ),
    ] = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Append transcripts to the store; ingesting a file again adds nothing, a grown one only its new lines.

    Formats: jsonl (one object a line with thread_id, role and content; optional message_id, created_at,
    partition, project, tool_call_id, metadata), claude (Claude Code's ~/.claude/projects/*/*.jsonl) and
    codex (Codex's ~/.codex/sessions rollouts).

    A bad line stops its file with FILE:LINE, and nothing from that file is written.

    Example: palimpsest ingest ~/.codex/sessions --format codex
    """
    settings = _settings(store, partition)
    try:
        files = expand_paths(paths)
    except PalimpsestError as exc:
        raise _fail(str(exc)) from None
    big = sum(path.stat().st_size for path in files) >= PROGRESS_BYTES
    show_bar = big and not json and sys.stderr.isatty()

    async def work(opened: MemoryStore) -> IngestReport:
        embedder = make_embedder(settings.embedder, settings.llm)
        with output.ingest_progress(show_bar) as progress:
            report = await ingest_files(
                opened, files, partition=settings.partition, format=format.value, progress=progress
            )
        if embedder is not None:
            written = sorted({name for item in report.files for name in item.partitions})
            embedded = sum([await backfill_embeddings(opened, embedder, partition=name) for name in written])
            typer.echo(f"embedded {embedded} nodes for semantic search ({embedder.name})", err=True)
        return report

    report = _run(lambda: _on_store(settings, work))
    if json:
        output.print_json(report)
    else:
        output.stdout_console().print(output.ingest_table(report))


# -- hooks: agents feeding memory as they work ---------------------------------------------

hook_app = typer.Typer(
    name="hook",
    help="Commands an agent runs as its hooks, to store every turn as it happens.\n\nExample: palimpsest hook claude",
    no_args_is_help=True,
)
app.add_typer(hook_app)


@hook_app.command("claude")
def hook_claude(
    partition: Annotated[
        str | None,
        typer.Option(
            "--partition", metavar="NAME", help="Partition to write to; else PALIMPSEST_PARTITION, else claude."
        ),
    ] = None,
    store: StoreOption = None,
    json: Annotated[
        bool, typer.Option("--json", help="Print what was ingested as JSON (a hook prints nothing).")
    ] = False,
) -> None:
    """A Claude Code hook: reads the hook's JSON on stdin and ingests the session's new lines.

    Register it on Stop, PreCompact and SessionEnd in .claude/settings.json (see the README).

    Prints nothing on success; on failure one line on stderr and exit code 1 (never 2, which would block Claude Code).

    Example: palimpsest hook claude --partition claude
    """
    settings = _settings(store, partition)
    try:
        hook = read_hook_input(sys.stdin.read())
    except PalimpsestError as exc:
        raise _fail(str(exc)) from None

    async def work(opened: MemoryStore) -> FileIngest:
        return await ingest_hook(opened, hook, partition=settings.partition or CLAUDE_PARTITION)

    result = _run(lambda: _on_store(settings, work))
    if json:
        output.print_json(result)


@app.command()
def stats(
    partition: PartitionOption = None,
    all_partitions: AllPartitionsOption = False,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Count threads, messages, summaries by level and facts (what memory_stats returns).

    Example: palimpsest stats --partition claude-code
    """
    settings = _settings(store, partition)
    scope = _scope(settings, all_partitions, partition)

    async def work(opened: MemoryStore) -> StoreStats:
        return await opened.stats(scope)

    result = _run(lambda: _on_store(settings, work))
    if json:
        output.print_json(result)
    else:
        output.stdout_console().print(output.stats_table(result))


@app.command()
def compact(
    thread_id: Annotated[str, typer.Argument(help="The thread to compact.")],
    force: Annotated[
        bool, typer.Option("--force", help="Fold every message outside the fresh tail, below the threshold too.")
    ] = False,
    partition: PartitionOption = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Compact one thread now: summarize its old messages, then escalate full levels.

    Example: palimpsest compact 3f2c9a1e-session --force
    """
    from scheduler.compaction import CompactionResult, compact_thread
    from scheduler.summarizers import make_summarizer

    settings = _settings(store, partition)
    target = _home(settings)

    async def work(opened: MemoryStore) -> CompactionResult:
        summarizer = make_summarizer(settings.llm)
        return await compact_thread(opened, target, thread_id, settings.compaction, summarizer, force=force)

    result = _run(lambda: _on_store(settings, work))
    if json:
        output.print_json(result)
        return
    console = output.stdout_console()
    if result.status == "compacted":
        console.print(
            f"compacted {thread_id}: {result.summaries_created} summaries " f"({result.escalations} escalations)",
            markup=False,
        )
        for summary_id in result.summary_ids:
            console.print(f"  {summary_id}", markup=False)
    elif result.status == "busy":
        console.print(f"{thread_id} is being compacted by another process; nothing done", markup=False)
    else:
        console.print(f"{thread_id}: nothing to compact", markup=False)


@app.command()
def describe(
    summary_id: Annotated[str, typer.Argument(help="A summary id (sum_...).")],
    partition: PartitionOption = None,
    all_partitions: AllPartitionsOption = False,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Show a summary: its place in the DAG, ranges, tokens, digest and text.

    Example: palimpsest describe sum_4be1c0d2a9f34e7b8c61d05f2a93e7c4
    """
    settings = _settings(store, partition)
    scope = _scope(settings, all_partitions, partition)

    async def work(opened: MemoryStore) -> Summary:
        return await opened.get_summary(scope, summary_id)

    result = _run(lambda: _on_store(settings, work))
    if json:
        from server.tools import PREVIEW_CHARS, SummaryDescription

        preview = result.text if len(result.text) <= PREVIEW_CHARS else result.text[:PREVIEW_CHARS] + "…"
        output.print_json(SummaryDescription(**result.model_dump(exclude={"text"}), preview=preview))
    else:
        output.stdout_console().print(output.summary_panel(result))


@app.command()
def expand(
    summary_id: Annotated[str, typer.Argument(help="A summary id (sum_...).")],
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
    """Print what a summary covers, in order: the original messages, byte for byte.

    Example: palimpsest expand sum_4be1c0d2a9f34e7b8c61d05f2a93e7c4 --limit 50
    """
    settings = _settings(store, partition)
    scope = _scope(settings, all_partitions, partition)

    async def work(opened: MemoryStore) -> ExpandPage:
        return await opened.expand(scope, summary_id, depth=depth, limit=limit, cursor=cursor)

    page = _run(lambda: _on_store(settings, work))
    if json:
        output.print_json(page)
    else:
        output.print_expansion(output.stdout_console(), page)


@app.command()
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
    from graph_schema.doctor import Breach, check_store

    settings = _settings(store)

    async def work(opened: MemoryStore) -> tuple[list[Breach], int]:
        found = await check_store(opened, partition=partition, thread_id=thread)
        checked = 1 if thread is not None else (await opened.stats(partition)).threads
        return found, checked

    breaches, threads = _run(lambda: _on_store(settings, work))
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


@app.command()
def grep(
    query: Annotated[str, typer.Argument(help="Words to look for.")],
    mode: Annotated[
        GrepMode,
        typer.Option(
            "--mode",
            help="text: words, ranked; regex: a pattern, in thread order; "
            "semantic: nearest in meaning (needs PALIMPSEST_EMBEDDER); "
            "hybrid: words and meaning fused, the best ranking (needs PALIMPSEST_EMBEDDER).",
        ),
    ] = GrepMode.text,
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
    settings = _settings(store, partition)
    scope = _scope(settings, all_partitions, partition)

    async def work(opened: MemoryStore) -> GrepResult:
        embedder = make_embedder(settings.embedder, settings.llm) if mode in (GrepMode.semantic, GrepMode.hybrid) else None
        return await grep_memories(
            opened, query, partition=scope, mode=mode.value, thread_id=thread, limit=limit, embedder=embedder
        )

    result = _run(lambda: _on_store(settings, work))
    if json:
        output.print_json(result)
        return
    output.stdout_console().print(output.hits_table(result.hits))
    if result.truncated:
        typer.echo("note: the regex scan stopped at its cap; narrow it with --thread", err=True)


@app.command()
def serve(
    transport: Annotated[
        Transport, typer.Option("--transport", help="stdio for an IDE, http for a network.")
    ] = Transport.stdio,
    host: Annotated[str, typer.Option("--host", help="Address the http transport listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port of the http transport.")] = 8765,
    partition: Annotated[
        str | None,
        typer.Option("--partition", metavar="NAME", help="Partition to write to; else from the MCP client's name."),
    ] = None,
    store: StoreOption = None,
    json: Annotated[bool, typer.Option("--json", help="Accepted as by every command; serve prints no result.")] = False,
) -> None:
    """Run the MCP server (stdio for one IDE, http to share one process).

    Example: palimpsest serve --transport http --port 8765 --store bolt://127.0.0.1:7687
    """
    from server.app import run_server

    settings = _settings(store, partition)
    try:
        run_server(settings, transport=transport.value, host=host, port=port)
    except PalimpsestError as exc:
        raise _fail(str(exc)) from None


# -- maintenance: the background loop by hand ------------------------------------------


def job_bars(bars: RichProgress) -> Callable[[str, int, int], None]:
    """The ticks' progress callback: one bar per job (threads for compaction, steps for evolution)."""
    tasks: dict[str, TaskID] = {}

    def advance(job: str, done: int, total: int) -> None:
        if job not in tasks:
            tasks[job] = bars.add_task(job, total=total)
        bars.update(tasks[job], completed=done, total=total)

    return advance


def _cycles_table(cycles: dict[str, MaintenanceCycle | None]) -> Table:
    """One row per job: what its tick did, or that another process holds its lease."""
    table = Table(title="maintenance")
    for name in ("job", "ran", "threads", "summaries", "facts", "errors"):
        table.add_column(name, justify="left" if name in ("job", "ran") else "right")
    for job, cycle in cycles.items():
        if cycle is None:
            table.add_row(job, "skipped: another process holds its lease", "", "", "", "")
            continue
        seconds = (cycle.finished_at - cycle.started_at).total_seconds()
        table.add_row(
            job,
            f"{seconds:.1f}s",
            str(cycle.threads),
            str(cycle.summaries),
            str(cycle.facts),
            str(len(cycle.errors)),
        )
    return table


async def _maintain_until_signalled(opened: MemoryStore, settings: Settings) -> None:
    """Run the maintenance jobs now and on their intervals until SIGINT or SIGTERM."""
    from scheduler.maintenance import Maintenance, evolution_steps
    from scheduler.summarizers import make_summarizer

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await Maintenance(
            opened,
            settings.maintenance,
            make_summarizer(settings.llm),
            steps=evolution_steps(opened, make_embedder(settings.embedder, settings.llm)),
        ).run_until(stop)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


@app.command()
def maintain(
    once: Annotated[bool, typer.Option("--once", help="Run every tick now, then exit.")] = False,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Run background maintenance by hand: compaction with escalation, then evolution.

    With --once, each job runs one tick now, with a progress bar, and the command exits (1 if a tick had errors).

    Without it, the jobs run now, then every PALIMPSEST_COMPACTION_INTERVAL and KG_EVOLUTION_INTERVAL seconds until Ctrl+C.

    Leases in the store keep it from running a job another process is running.

    Example: palimpsest maintain --once --store sqlite:///memory.db
    """
    from scheduler.maintenance import Maintenance, evolution_steps
    from scheduler.summarizers import make_summarizer

    settings = _settings(store)
    if not once:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
        _run(lambda: _on_store(settings, lambda opened: _maintain_until_signalled(opened, settings)))
        return
    show_bar = not json and sys.stderr.isatty()

    async def work(opened: MemoryStore) -> dict[str, MaintenanceCycle | None]:
        maintenance = Maintenance(
            opened,
            settings.maintenance,
            make_summarizer(settings.llm),
            steps=evolution_steps(opened, make_embedder(settings.embedder, settings.llm)),
        )
        if not show_bar:
            return await maintenance.run_once()
        bar = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:>4,.0f} / {task.total:,.0f}"),
            console=output.stderr_console(),
            transient=True,
        )
        with bar:
            return await maintenance.run_once(job_bars(bar))

    cycles = _run(lambda: _on_store(settings, work))
    if json:
        output.print_json({job: cycle.model_dump(mode="json") if cycle else None for job, cycle in cycles.items()})
    else:
        output.stdout_console().print(_cycles_table(cycles))
    errors = [f"{job}: {error}" for job, cycle in cycles.items() if cycle is not None for error in cycle.errors]
    for error in errors:
        typer.echo(f"error: {error}", err=True)
    if errors:
        raise typer.Exit(1)


# -- the fact layer and recall ------------------------------------------------------------


class KgActionChoice(StrEnum):
    """What ``kg`` does."""

    status = "status"
    on = "on"
    off = "off"
    stats = "stats"
    clear = "clear"


@app.command()
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
    from scheduler.facts import KgAction, KgResult, kg_command

    settings = _settings(store, partition)
    target = _home(settings)
    chosen = cast(KgAction, action.value)

    async def work(opened: MemoryStore) -> KgResult:
        return await kg_command(opened, target, chosen, thread)

    result = _run(lambda: _on_store(settings, work))
    if json:
        output.print_json(result)
    else:
        output.stdout_console().print(output.kg_view(result))


@app.command()
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
    from server.recall import RecallResult
    from server.recall import recall as recall_memories

    settings = _settings(store, partition)
    target = _home(settings)

    async def work(opened: MemoryStore) -> RecallResult:
        return await recall_memories(
            opened, query, partition=target, project=project, limit=limit, include_superseded=include_superseded
        )

    result = _run(lambda: _on_store(settings, work))
    if json:
        output.print_json(result)
    else:
        output.stdout_console().print(output.recall_table(result))


# -- context assembly ----------------------------------------------------------------------


def _context_table(result: AssembledContext) -> Table:
    """One row per section (what it shows and its tokens), one per section that left something out."""
    table = Table(title=f"context of {result.thread_id}")
    for name in ("section", "items", "tokens", "left out"):
        table.add_column(name, justify="left" if name == "section" else "right")
    left_out = {pruned.name: pruned.count for pruned in result.pruned}
    for section in result.sections:
        table.add_row(section.name, str(len(section.ids)), str(section.tokens), str(left_out.pop(section.name, 0)))
    for name, count in left_out.items():
        table.add_row(name, "0", "0", str(count))
    table.add_section()
    spent = f"{result.total_tokens} / {result.budget_tokens}"
    table.add_row("total", "", spent, str(sum(pruned.count for pruned in result.pruned)))
    return table


@app.command()
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
    settings = _settings(store, partition)
    target = _home(settings)

    async def work(opened: MemoryStore) -> AssembledContext:
        return await assemble_context(opened, thread_id, partition=target, budget_tokens=budget, query=query)

    result = _run(lambda: _on_store(settings, work))
    if json:
        output.print_json(result)
        return
    output.stdout_console().print(_context_table(result))
    sys.stdout.write(result.text)
    sys.stdout.flush()
