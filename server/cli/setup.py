"""The commands that connect agents: ``install``, ``uninstall`` and ``status``.

Setting up an agent by hand means editing two files per agent in shapes that differ
from agent to agent; these commands do it in one step, and undo it exactly
(``palimpsest.server.agents`` holds the files and the undo). ``status`` answers the
question that follows: is each agent wired, and is memory actually arriving?
``palimpsest.server.cli.main`` registers them on the app.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.server.agents.registry import NAMES
from palimpsest.server.cli.support import JsonOption, fail, on_store, settings_from_flags

if TYPE_CHECKING:  # imported where used: ``palimpsest hook`` loads this module and must start fast
    from rich.table import Table

    from palimpsest.graph_schema.store import MemoryStore
    from palimpsest.server.agents.spec import Agent, Scope
    from palimpsest.server.agents.status import AgentStatus, Status
    from palimpsest.server.agents.wiring import Change


#: The agents ``install`` knows (`palimpsest.server.agents.registry.NAMES`), as the command line's choices.
#: (typer takes choices from an Enum; mypy cannot list members built from a tuple.)
AgentName = StrEnum("AgentName", [(name, name) for name in NAMES])  # type: ignore[misc]


class ScopeName(StrEnum):
    """``--scope``: ``palimpsest.server.agents.spec.Scope`` by name."""

    user = "user"
    project = "project"


ScopeOption = Annotated[
    ScopeName, typer.Option("--scope", help="user: every project (files under ~); project: this project's files.")
]
ProjectOption = Annotated[
    Path | None,
    typer.Option("--project", metavar="DIR", help="The project for --scope project; default the working directory."),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print the diff of every file; write nothing.")]


def _changes_json(agent: Agent, scope: Scope, changes: list[Change], dry_run: bool, notes: bool) -> dict[str, Any]:
    return {
        "agent": agent.name,
        "scope": scope.value,
        "note": agent.notes.get(scope) if notes else None,
        "files": [
            {"path": str(change.path), "action": change.action.value, **({"diff": change.diff()} if dry_run else {})}
            for change in changes
        ],
    }


def _changes_table(results: list[tuple[Agent, Scope, list[Change]]], dry_run: bool) -> Table:
    from rich.table import Table

    table = Table(title="would change (dry run: nothing written)" if dry_run else None)
    for column in ("agent", "scope", "file", "action"):
        table.add_column(column)
    for agent, scope, changes in results:
        for change in changes:
            table.add_row(agent.name, scope.value, str(change.path), change.action.value)
    return table


def _report(results: list[tuple[Agent, Scope, list[Change]]], dry_run: bool, json: bool, *, notes: bool) -> None:
    """The changes as a table (or JSON); ``notes``: add each agent's after-install note (not after uninstall)."""
    from palimpsest.server.cli.output import print_json, stdout_console

    if json:
        print_json({"dry_run": dry_run, "agents": [_changes_json(a, s, c, dry_run, notes) for a, s, c in results]})
        return
    console = stdout_console()
    if dry_run:
        for _, _, changes in results:
            for change in changes:
                if change.changes:
                    typer.echo(change.diff(), nl=False)  # raw: a diff must not be wrapped or styled
    console.print(_changes_table(results, dry_run))
    for agent, scope, _ in results:
        if notes and agent.notes.get(scope):
            typer.echo(f"note: {agent.notes[scope]}")


def install(
    agent: Annotated[AgentName | None, typer.Argument(help="The agent to wire; leave out with --detect.")] = None,
    detect_agents: Annotated[
        bool, typer.Option("--detect", help="Wire every agent whose config directory is on this machine.")
    ] = False,
    scope: ScopeOption = ScopeName.user,
    project: ProjectOption = None,
    dry_run: DryRunOption = False,
    store: Annotated[
        str | None,
        typer.Option("--store", metavar="URI", help="Store URI the server and hooks are told to use; default none."),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Register the MCP server and the hooks in an agent's own files, merged with what is there.

    The server is this installation's palimpsest (serve --partition AGENT); the hooks run palimpsest hook AGENT.

    Each file is backed up before its first change; running it again changes nothing; uninstall restores it.

    Example: palimpsest install claude --scope project --dry-run
    """
    from palimpsest.server.agents.registry import agent_named, detect
    from palimpsest.server.agents.spec import Entries, Places, Scope, palimpsest_executable
    from palimpsest.server.agents.wiring import Wiring
    from palimpsest.server.cli.output import stdout_console

    if (agent is None) == (not detect_agents):
        raise typer.BadParameter("name one AGENT or give --detect")
    places = Places.here(project)
    where = Scope(scope.value)
    wiring = Wiring(places)
    try:
        entries = Entries(executable=palimpsest_executable(), store=store)
        agents = detect(places) if agent is None else [agent_named(agent.value)]
        if dry_run:
            planned = [(item, where, wiring.plan_install(item, where, entries)) for item in agents]
        else:
            with wiring.locked():
                planned = [(item, where, wiring.plan_install(item, where, entries)) for item in agents]
                for item, item_scope, changes in planned:
                    wiring.install(item, item_scope, changes)
    except PalimpsestError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"cannot write {exc.filename}: {exc.strerror}; nothing was changed") from None
    if detect_agents and not planned and not json:
        stdout_console().print("no agent found (looked for: " + ", ".join(NAMES) + ")", markup=False)
        return
    _report(planned, dry_run, json, notes=True)


def uninstall(
    agent: Annotated[AgentName, typer.Argument(help="The agent to unwire.")],
    scope: ScopeOption = ScopeName.user,
    project: ProjectOption = None,
    dry_run: DryRunOption = False,
    json: JsonOption = False,
) -> None:
    """Take out what `install` wrote: each file restored byte for byte, or removed if install created it.

    A file edited since install keeps the edits: only Palimpsest's entries are taken out of it.

    Example: palimpsest uninstall codex --scope user
    """
    from palimpsest.server.agents.registry import agent_named
    from palimpsest.server.agents.spec import Entries, Places, Scope
    from palimpsest.server.agents.wiring import Wiring
    from palimpsest.server.cli.output import stdout_console

    places = Places.here(project)
    wiring = Wiring(places)
    chosen = agent_named(agent.value)
    where = Scope(scope.value)
    try:
        entries = Entries(executable="palimpsest")
        if dry_run:
            changes = wiring.plan_uninstall(chosen, where, entries)
        else:
            with wiring.locked():
                changes = wiring.plan_uninstall(chosen, where, entries)
                wiring.uninstall(chosen, where, changes)
    except PalimpsestError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"cannot write {exc.filename}: {exc.strerror}") from None
    if not changes and not json:
        stdout_console().print(
            f"palimpsest install {chosen.name} --scope {scope.value} left nothing to undo", markup=False
        )
        return
    _report([(chosen, where, changes)], dry_run, json, notes=False)


def _wired_text(item: AgentStatus) -> str:
    """``user``, ``project``, both, ``no``, or ``not found`` (no config directory, nothing wired)."""
    from palimpsest.server.agents.status import Wired

    scopes = [
        name if wired is Wired.yes else f"{name} ({wired.value})"
        for name, wired in (("user", item.user), ("project", item.project))
        if wired is not Wired.no
    ]
    if scopes:
        return ", ".join(scopes)
    return "no" if item.config_dir else "not found"


def _status_table(result: Status) -> Table:
    from rich.table import Table

    store = result.store
    size = f"{store.size_bytes:,} bytes" if store.size_bytes is not None else "size unknown"
    if not store.exists:
        size = "no file yet"
    counts = f"{store.threads} threads, {store.messages} messages, {store.backlog} waiting for compaction"
    if store.archived_messages:
        counts += f", {store.archived_messages} archived in {store.archived_runs} files"
    table = Table(title=f"store {store.kind} {store.uri} ({size}; {'could not be read' if store.error else counts})")
    for column in ("agent", "wired", "messages", "last capture (UTC)", "backlog"):
        right = column in {"messages", "backlog"}
        table.add_column(column, justify="right" if right else "left", no_wrap=column != "wired")
    for item in result.agents:
        capture = item.last_capture.strftime("%Y-%m-%d %H:%M") if item.last_capture else "never"
        table.add_row(item.agent, _wired_text(item), str(item.messages), capture, str(item.backlog))
    notes = [f"{store.hooks_queued} hook turns queued"] if store.hooks_queued else []
    if store.hook_error:
        notes.append(f"last hook error: {store.hook_error}")
    if notes:
        table.caption = "; ".join(notes)
    return table


def status(
    project: Annotated[
        Path | None, typer.Option("--project", metavar="DIR", help="The project whose files count as project scope.")
    ] = None,
    store: Annotated[
        str | None, typer.Option("--store", metavar="URI", help="Store URI; overrides PALIMPSEST_STORE.")
    ] = None,
    json: JsonOption = False,
) -> None:
    """Show, per agent, whether it is wired (user, project), its last capture and backlog, and the store.

    A store that cannot be read is reported (exit code 1) after the wiring, which needs no store.

    Example: palimpsest status --json
    """
    from palimpsest.server.agents import registry
    from palimpsest.server.agents import status as agent_status
    from palimpsest.server.agents.spec import Places, Scope
    from palimpsest.server.cli.output import print_json, stdout_console
    from palimpsest.server.feeds.spool import last_error, pending, spool_for

    settings = settings_from_flags(store)
    places = Places.here(project)
    agents = []
    for agent in registry.agents().values():
        found = agent.found(places)
        agents.append(
            agent_status.AgentStatus(
                agent=agent.name,
                title=agent.title,
                config_dir=str(found) if found else None,
                user=agent_status.wired(agent, Scope.user, places),
                project=agent_status.wired(agent, Scope.project, places),
            )
        )
    path = agent_status.sqlite_path(settings.store)
    exists = path is None or path.exists()
    result = agent_status.Status(
        project=str(places.project),
        store=agent_status.StoreStatus(
            kind="sqlite" if settings.store.startswith("sqlite") else "neo4j",
            uri=agent_status.display_uri(settings.store),
            exists=exists,
            size_bytes=agent_status.sqlite_size(path) if path is not None and exists else None,
        ),
        agents=agents,
    )
    queue = spool_for(settings.store)
    result.store.hooks_queued, result.store.hook_error = pending(queue), last_error(queue)
    if exists:

        async def work(opened: MemoryStore) -> None:
            result.store.kind = opened.kind
            await agent_status.fill_from_store(result, opened, settings.compaction)

        try:
            asyncio.run(on_store(settings, work))
        except PalimpsestError as exc:
            result.store.error = str(exc)
    if json:
        print_json(result)
    else:
        stdout_console().print(_status_table(result))
    if result.store.error:
        raise fail(result.store.error)
