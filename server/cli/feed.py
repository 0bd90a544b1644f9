"""The commands that feed memory: ``ingest`` for transcript files, ``hook claude`` for each turn.

Both write; neither reads back. ``ingest`` takes files after the fact (JSONL, Claude Code
transcripts, Codex rollouts), ``hook`` is what an agent runs as it works, so memory
keeps up without anyone running ``ingest``. ``palimpsest.server.cli.main`` registers them on the app.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import make_embedder
from palimpsest.scheduler.embedding import backfill_embeddings
from palimpsest.server.cli import output
from palimpsest.server.cli.support import JsonOption, StoreOption, fail, on_store, run_command, settings_from_flags
from palimpsest.server.feeds.claude_code import PARTITION as CLAUDE_PARTITION
from palimpsest.server.feeds.claude_hook import ingest_hook, read_hook_input
from palimpsest.server.feeds.ingest import FileIngest, IngestReport, expand_paths, ingest_files

#: Files at least this big, all together, get a progress bar while ingesting.
PROGRESS_BYTES = 1024 * 1024


class IngestFormat(StrEnum):
    """Transcript formats ``ingest`` reads."""

    auto = "auto"
    claude = "claude"
    codex = "codex"
    jsonl = "jsonl"


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
    settings = settings_from_flags(store, partition)
    try:
        files = expand_paths(paths)
    except PalimpsestError as exc:
        raise fail(str(exc)) from None
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

    report = run_command(lambda: on_store(settings, work))
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
    settings = settings_from_flags(store, partition)
    try:
        hook = read_hook_input(sys.stdin.read())
    except PalimpsestError as exc:
        raise fail(str(exc)) from None

    async def work(opened: MemoryStore) -> FileIngest:
        return await ingest_hook(opened, hook, partition=settings.partition or CLAUDE_PARTITION)

    result = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(result)
