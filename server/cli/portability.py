"""The commands that move a memory: ``export``, ``import``, ``migrate``, ``archive`` and ``restore``.

Thin over ``palimpsest.scheduler.portability``: each opens the store(s), runs one domain
function with a progress bar on stderr (when stderr is a terminal and ``--json`` is
not given), and prints a table or JSON. ``palimpsest.server.cli.main`` registers them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.cli.support import JsonOption, StoreOption, fail, on_store, run_command, settings_from_flags

# The CLI module is imported by every command, the agents' hooks included, which run
# after every turn: rich and the portability engine load only when these commands run.
if TYPE_CHECKING:
    from rich.table import Table

    from palimpsest.scheduler.portability.archive import ArchiveReport, RestoreReport
    from palimpsest.scheduler.portability.export import TransferReport
    from palimpsest.scheduler.portability.migrate import MigrateReport


@contextmanager
def message_bar(enabled: bool, label: str) -> Iterator[tuple[Callable[[int], None], Callable[[int], None]] | None]:
    """A bar of messages on stderr: ``(start(total), advance(n))``, or None when not ``enabled``."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from palimpsest.server.cli import output

    progress = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("messages"),
        TimeRemainingColumn(),
        console=output.stderr_console(),
        transient=True,
    )
    task = progress.add_task(label, total=None)
    with progress:
        yield (
            lambda total: progress.update(task, total=total),
            lambda count: progress.advance(task, count),
        )


def _transfer_table(report: TransferReport, title: str) -> Table:
    from rich.table import Table

    table = Table(title=title)
    table.add_column("records")
    table.add_column("in the archive", justify="right")
    if report.written:
        table.add_column("written", justify="right")
    for kind, count in (
        ("threads", report.threads),
        ("messages", report.messages),
        ("summaries", report.summaries),
        ("facts", report.facts),
        ("vectors", report.vectors),
    ):
        row = [kind, f"{count:,}"]
        if report.written:
            row.append(f"{report.written.get(kind, 0):,}" if kind != "threads" else "")
        table.add_row(*row)
    return table


def export(
    path: Annotated[Path, typer.Argument(help="The archive file to write (gzip JSON Lines), e.g. memory.jsonl.gz.")],
    partition: Annotated[
        str | None, typer.Option("--partition", metavar="NAME", help="Export one partition only; default every one.")
    ] = None,
    thread: Annotated[str | None, typer.Option("--thread", metavar="ID", help="Export one thread only.")] = None,
    with_vectors: Annotated[
        bool, typer.Option("--with-vectors", help="Also export every exported node's embedding vector.")
    ] = False,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Write the memory (threads, messages, summaries, facts) to one self-checking archive file.

    The file is gzip-compressed JSON Lines: a header with the format version, the store kind, counts and each
    thread's digest, then one checksummed record a line, then a trailer; `palimpsest import` restores it exactly.

    Example: palimpsest export memory.jsonl.gz --partition claude --with-vectors
    """
    from palimpsest.scheduler.portability.export import export_memory
    from palimpsest.server.cli import output

    settings = settings_from_flags(store)

    async def work(opened: MemoryStore) -> TransferReport:
        with message_bar(not json and sys.stderr.isatty(), "exporting") as bar:
            if bar is not None:
                bar[0]((await opened.stats(partition)).messages if thread is None else 0)
            return await export_memory(
                opened,
                path,
                partition=partition,
                thread_id=thread,
                with_vectors=with_vectors,
                advance=None if bar is None else bar[1],
            )

    report = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(report)
    else:
        output.stdout_console().print(_transfer_table(report, f"exported to {path}"))


def import_(
    path: Annotated[Path, typer.Argument(help="An archive written by `palimpsest export`.")],
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Restore an export archive: same ids, seqs, timestamps and digests; only what is missing is written.

    The whole archive is checked first (every record's checksum, the trailer, the header's counts and digests, each id
    derived again from its record, the lossless invariants), then against the store (a thread it does not continue, a
    known id with other content, a summary over what the store covers already); anything wrong is refused naming the
    record, and nothing is written. Records the store holds exactly are skipped: importing again writes nothing.

    Example: palimpsest import memory.jsonl.gz --store sqlite:///restored.db
    """
    from palimpsest.scheduler.portability.export import import_archive
    from palimpsest.server.cli import output

    settings = settings_from_flags(store)

    async def work(opened: MemoryStore) -> TransferReport:
        with message_bar(not json and sys.stderr.isatty(), "importing") as bar:
            return await import_archive(opened, path, advance=None if bar is None else bar[1])

    report = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(report)
    else:
        output.stdout_console().print(_transfer_table(report, f"imported from {path}"))


def migrate(
    to: Annotated[
        str, typer.Option("--to", metavar="URI", help="The store to copy into (sqlite:///PATH, bolt://...).")
    ],
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Copy everything from the store (--store) to another, in batches; exit 1 naming each difference after.

    Safe to run again after an interruption: what the target holds is skipped, nothing is duplicated. At the end the
    stores' counts and every thread's digest are compared.

    Example: palimpsest migrate --store sqlite:///memory.db --to bolt://127.0.0.1:7687
    """
    from rich.table import Table

    from palimpsest.scheduler.portability.migrate import migrate_memory
    from palimpsest.server.cli import output

    settings = settings_from_flags(store)
    if to == settings.store:
        raise fail("--to names the store being migrated from; give another store")
    target_settings = settings.model_copy(update={"store": to})

    async def work(source: MemoryStore) -> MigrateReport:
        async def into(target: MemoryStore) -> MigrateReport:
            with message_bar(not json and sys.stderr.isatty(), "migrating") as bar:
                return await migrate_memory(
                    source, target, start=None if bar is None else bar[0], advance=None if bar is None else bar[1]
                )

        return await on_store(target_settings, into)

    report = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(report)
    else:
        table = Table(title=f"migrated {report.source} -> {report.target}: {report.threads:,} threads")
        table.add_column("records")
        table.add_column("written", justify="right")
        for kind, count in report.written.items():
            table.add_row(kind, f"{count:,}")
        output.stdout_console().print(table)
    for mismatch in report.mismatches:
        typer.echo(f"mismatch: {mismatch}", err=True)
    if report.mismatches:
        raise typer.Exit(1)
    if not json:
        output.stdout_console().print("every count and every thread's digest are equal", markup=False)


def archive(
    older_than: Annotated[
        str, typer.Option("--older-than", metavar="DURATION", help="Threads idle this long: 90m, 12h, 30d, 2w.")
    ],
    partition: Annotated[
        str | None, typer.Option("--partition", metavar="NAME", help="Archive one partition only; default every one.")
    ] = None,
    folder: Annotated[
        Path | None,
        typer.Option(
            "--dir", metavar="PATH", help="Where archive files go; default FILE.archive/ beside a SQLite store."
        ),
    ] = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Move the raw messages of old, compacted threads to archive files beside the store, losslessly.

    Summaries, facts and summary vectors stay live; each file (the export format) is read back and checked before
    anything leaves the store. Expanding an archived summary names its file; `palimpsest restore FILE` brings the
    messages back byte for byte, and `palimpsest doctor` checks every file against its recorded digest.

    Example: palimpsest archive --older-than 30d --partition claude
    """
    from rich.table import Table

    from palimpsest.scheduler.config import default_archive_dir
    from palimpsest.scheduler.portability.archive import archive_threads, parse_duration
    from palimpsest.server.cli import output

    settings = settings_from_flags(store)
    target = folder or default_archive_dir(settings.store)
    if target is None:
        raise fail("this store has no file to put archives beside: give --dir PATH")
    try:
        age = parse_duration(older_than)
    except PalimpsestError as exc:
        raise fail(str(exc)) from None

    async def work(opened: MemoryStore) -> ArchiveReport:
        return await archive_threads(opened, target, older_than=age, partition=partition)

    report = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(report)
        return
    table = Table(title=f"archived {report.messages:,} messages of {report.threads:,} threads into {target}")
    table.add_column("threads left live")
    table.add_column("count", justify="right")
    for reason, count in sorted(report.skipped.items()):
        table.add_row(reason, f"{count:,}")
    output.stdout_console().print(table)


def restore(
    path: Annotated[Path, typer.Argument(help="An archive file written by `palimpsest archive`.")],
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Bring archived messages back from their archive file into the live store, byte for byte.

    The file is checked whole, and each thread in it against the digest the store recorded when it was archived; an
    altered file is refused and nothing changes.

    Example: palimpsest restore memory.db.archive/claude--session-1-0123456789ab.seq0-989.jsonl.gz
    """
    from palimpsest.scheduler.portability.archive import restore_archive
    from palimpsest.server.cli import output

    settings = settings_from_flags(store)

    async def work(opened: MemoryStore) -> RestoreReport:
        return await restore_archive(opened, path)

    report = run_command(lambda: on_store(settings, work))
    if json:
        output.print_json(report)
    else:
        output.stdout_console().print(
            f"restored {report.messages:,} messages of {report.threads:,} threads from {path}", markup=False
        )
