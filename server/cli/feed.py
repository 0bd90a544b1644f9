"""The commands that feed memory: ``ingest`` for transcript files, ``hook AGENT`` for each turn.

``ingest`` takes files after the fact (JSONL, Claude Code transcripts, Codex rollouts);
``hook`` is what an agent runs as it works, so memory keeps up without anyone running
``ingest``, and hands memory back when a session starts. The hook commands here give
``palimpsest hook`` its help and usage errors; a plain hook call, paid after every turn,
runs from ``palimpsest.server.cli.hook_command`` without typer. Each command imports
what it uses. ``palimpsest.server.cli.main`` registers them on the app.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import nullcontext
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.agents.registry import ENTRIES
from palimpsest.server.cli.hook_command import HookCall, run_hook_call
from palimpsest.server.cli.support import JsonOption, StoreOption, fail, on_store, run_command, settings_from_flags

if TYPE_CHECKING:
    from palimpsest.server.feeds.ingest import IngestReport

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
    embed: Annotated[
        bool,
        typer.Option(
            "--embed",
            help="Embed what was ingested now, in this process (loads the embedding model); "
            "else the server's backfill and `palimpsest maintain` embed it.",
        ),
    ] = False,
) -> None:
    """Append transcripts to the store; ingesting a file again adds nothing, a grown one only its new lines.

    Formats: jsonl (one object a line with thread_id, role and content; optional message_id, created_at,
    partition, project, tool_call_id, metadata), claude (Claude Code's ~/.claude/projects/*/*.jsonl) and
    codex (Codex's ~/.codex/sessions rollouts).

    A bad line stops its file with FILE:LINE, and nothing from that file is written.

    Example: palimpsest ingest ~/.codex/sessions --format codex
    """
    from palimpsest.scheduler.embedders import make_embedder
    from palimpsest.scheduler.embedding import backfill_embeddings
    from palimpsest.server.cli import output
    from palimpsest.server.feeds.ingest import expand_paths, ingest_files

    settings = settings_from_flags(store, partition)
    try:
        files = expand_paths(paths)
    except PalimpsestError as exc:
        raise fail(str(exc)) from None
    big = sum(path.stat().st_size for path in files) >= PROGRESS_BYTES
    show_bar = big and not json and sys.stderr.isatty()

    async def work(opened: MemoryStore) -> IngestReport:
        # Loading a model to embed a few lines would cost more than the ingest: unless asked,
        # embedding is left to the processes that do it anyway (the server, maintenance).
        embedder = make_embedder(settings.embedder, settings.llm) if embed else None
        with output.ingest_progress(show_bar) as progress:
            # The paths as given: a file found in a directory may be left out, a named one may not.
            report = await ingest_files(
                opened, paths, partition=settings.partition, format=format.value, progress=progress
            )
        if embedder is not None:
            written = sorted({name for item in report.files for name in item.partitions})
            embedded = 0
            # The built-in embedder is on by default: a large history takes minutes to embed, so it gets a bar.
            with output.maintenance_progress() if not json and sys.stderr.isatty() else nullcontext() as bar:
                bars = output.job_bars(bar) if bar is not None else None
                for name in written:
                    tick = partial(bars, f"embedding {name}") if bars is not None else None
                    embedded += await backfill_embeddings(opened, embedder, partition=name, progress=tick)
            typer.echo(f"embedded {embedded} nodes for semantic search ({embedder.name})", err=True)
        return report

    report = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(report)
    else:
        output.stdout_console().print(output.ingest_table(report))
    if report.not_transcripts and not json:
        typer.echo(f"left out {len(report.not_transcripts)} files that hold no transcript", err=True)


# -- hooks: agents feeding memory as they work ---------------------------------------------

hook_app = typer.Typer(
    name="hook",
    help="Commands an agent runs as its hooks, to store every turn as it happens and get memory back at "
    "session start.\n\nExample: palimpsest hook claude",
    no_args_is_help=True,
    add_completion=False,
)


def _hook_command(agent: str, hook_help: str) -> Callable[..., None]:
    """The ``palimpsest hook AGENT`` command: the same options for every agent."""

    def command(
        partition: Annotated[
            str | None,
            typer.Option(
                "--partition",
                metavar="NAME",
                help="Partition to write to; else PALIMPSEST_PARTITION, else the agent's name.",
            ),
        ] = None,
        store: StoreOption = None,
        json: Annotated[
            bool, typer.Option("--json", help="Print what was stored as JSON instead of what the agent reads.")
        ] = False,
    ) -> None:
        code = run_hook_call(HookCall(agent=agent, partition=partition, store=store, json=json))
        if code:
            raise typer.Exit(code)

    command.__doc__ = (
        f"{hook_help}\n\nPrints nothing else on success; on failure one line on stderr and exit code 1 "
        f"(never 2, which would block the agent).\n\nExample: palimpsest hook {agent} --partition {agent}"
    )
    return command


for _entry in ENTRIES:
    hook_app.command(_entry.name)(_hook_command(_entry.name, _entry.hook_help))
