"""What every ``palimpsest`` command shares: its common options and how it reaches the store.

The commands live in several modules (``palimpsest.server.cli.main`` and the ``server.cli_*`` modules),
one concern each; this one keeps them alike. Every command reads settings the same way
(flags on top of ``PALIMPSEST_*``), picks its partition the same way (crossing
partitions only when asked), and ends the same way on a domain error: one line,
``error: ...``, on stderr and exit code 1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.server.settings import Settings
from palimpsest.server.store_settings import invalid_configuration
from palimpsest.server.store_settings import on_store as on_store

T = TypeVar("T")

#: The partition CLI commands read and write when neither flag nor settings name one.
DEFAULT_PARTITION = "default"

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


def settings_from_flags(store: str | None, partition: str | None = None) -> Settings:
    """Settings from the environment, with the flags given on the command line on top.

    A flag left out (``None``) leaves the environment's value, so ``--store`` and
    ``--partition`` override ``PALIMPSEST_STORE`` and ``PALIMPSEST_PARTITION`` only
    when given.

    Raises:
        typer.Exit: exit code 1 after one line naming the first invalid setting.
    """
    overrides: dict[str, Any] = {}
    if store is not None:
        overrides["store"] = store
    if partition is not None:
        overrides["partition"] = partition
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise fail(invalid_configuration(exc)) from None


def home_partition(settings: Settings) -> str:
    """The partition a command works in: ``--partition``, else settings, else the default.

    Commands that write, or read one partition only, need a name even when nothing
    names one, so that a person's first ``ingest`` and ``stats`` meet in the same place.
    """
    return settings.partition or DEFAULT_PARTITION


def read_scope(settings: Settings, all_partitions: bool, flag: str | None) -> str | None:
    """The partition a command reads: ``None`` (every one) only when asked explicitly.

    Partitions keep agents apart, so crossing them takes ``--all-partitions``; giving
    it together with ``--partition`` is a usage error rather than a silent choice.

    Raises:
        typer.BadParameter: both ``--partition`` and ``--all-partitions`` were given.
    """
    if all_partitions:
        if flag is not None:
            raise typer.BadParameter("give either --partition or --all-partitions, not both")
        return None
    return home_partition(settings)


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr and return the exit (code 1) for the caller to raise.

    Returned rather than raised so call sites read ``raise fail(...) from None``, and
    type checkers see that the command ends there.
    """
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def run_command(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a command's coroutine; a domain error becomes one line on stderr and exit 1.

    Raises:
        typer.Exit: exit code 1 when ``work`` raised a ``PalimpsestError``.
    """
    try:
        return asyncio.run(work())
    except PalimpsestError as exc:
        raise fail(str(exc)) from None
