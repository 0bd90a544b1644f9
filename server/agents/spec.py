"""What wiring an agent means: the files it reads, and what Palimpsest adds to each.

Every agent module describes itself as an ``Agent``: how to tell it is on the machine,
and, per scope, the ``ConfigFile``s to change, each with three functions (wire,
unwire, is wired) over the parsed document. The two builders here cover the shapes the
agents share: a table of MCP servers, and a table of hook lists per event.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.server.agents import documents
from palimpsest.server.agents.documents import Document, Format, JsonObject


class Scope(StrEnum):
    """Where an agent is wired: for the user everywhere, or for one project."""

    user = "user"
    project = "project"


@dataclass(frozen=True)
class Places:
    """Where to look: the home directory, the project directory and the environment."""

    home: Path
    project: Path
    environ: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def here(cls, project: Path | None = None) -> Places:
        """This process's home, the given project (else the working directory), its environment."""
        return cls(home=Path.home(), project=(project or Path.cwd()).resolve(), environ=dict(os.environ))


@dataclass(frozen=True)
class Entries:
    """What Palimpsest registers: this installation's executable, and a store if one was named."""

    executable: str
    store: str | None = None

    def serve_args(self, agent: str) -> list[str]:
        """The MCP server's arguments: ``serve --partition AGENT`` (and ``--store URI``)."""
        return ["serve", "--partition", agent, *self._store_args()]

    def hook_command(self, agent: str) -> str:
        """The hook's command line: ``<abs palimpsest> hook AGENT`` (and ``--store URI``), shell-quoted."""
        return shlex.join([self.executable, "hook", agent, *self._store_args()])

    def _store_args(self) -> list[str]:
        return ["--store", self.store] if self.store else []


def palimpsest_executable() -> str:
    """The absolute path of this installation's ``palimpsest`` command.

    The console script beside the running interpreter (the virtual environment's
    ``bin/``) is the one installed with this code; ``PATH`` is the fallback.

    Raises:
        InvalidInput: no ``palimpsest`` command can be found.
    """
    beside = Path(sys.executable).parent / ("palimpsest.exe" if os.name == "nt" else "palimpsest")
    if beside.is_file():
        return str(beside.absolute())
    found = shutil.which("palimpsest")
    if found:
        return str(Path(found).absolute())
    raise InvalidInput("cannot find the palimpsest command beside this Python or on PATH; install the package first")


@dataclass(frozen=True)
class ConfigFile:
    """One file an agent reads, and how Palimpsest's entries go in and out of it."""

    path: Path
    fmt: Format
    wire: Callable[[Document], None]
    unwire: Callable[[Document, Document | None], None]
    wired: Callable[[Document], bool]


@dataclass(frozen=True)
class Agent:
    """An agent Palimpsest can wire: its name (also its partition), how to find it, its files."""

    name: str
    title: str
    config_dirs: Callable[[Places], list[Path]]
    files: Callable[[Scope, Places, Entries], list[ConfigFile]]
    notes: Mapping[Scope, str] = field(default_factory=dict)

    def found(self, places: Places) -> Path | None:
        """The agent's config directory on this machine, or ``None`` when it is not installed."""
        return next((path for path in self.config_dirs(places) if path.is_dir()), None)


def servers_file(path: Path, fmt: Format, key: str, entry: JsonObject) -> ConfigFile:
    """A file whose ``key`` table maps server names to servers (``mcpServers``, ``mcp_servers``)."""
    return ConfigFile(
        path=path,
        fmt=fmt,
        wire=lambda doc: documents.put_server(doc, key, entry, path),
        unwire=lambda doc, original: documents.drop_server(doc, key, original),
        wired=lambda doc: documents.has_server(doc, key),
    )


def hooks_file(
    path: Path,
    agent: str,
    entries: Mapping[str, JsonObject],
    *,
    grouped: bool,
    container: str = "hooks",
    top: JsonObject | None = None,
) -> ConfigFile:
    """A JSON file whose ``container`` object maps event names to lists of hook entries.

    ``entries`` is Palimpsest's entry per event; ``top`` holds keys the file needs at its
    top level when Palimpsest creates it (Cursor's ``"version": 1``), added only when missing.
    """
    ours = documents.is_palimpsest_hook(agent)

    def wire(doc: Document) -> None:
        for key, value in (top or {}).items():
            doc.setdefault(key, value)
        events = documents.table(doc, container, path)
        for event in documents.events_with_ours(events, grouped=grouped, ours=ours):
            if event not in entries:  # registered by an older version on an event no longer used
                documents.drop_hook(events, event, grouped=grouped, ours=ours, had_event=False)
        for event, entry in entries.items():
            documents.put_hook(events, event, entry, grouped=grouped, ours=ours, path=path)

    def unwire(doc: Document, original: Document | None) -> None:
        events = doc.get(container)
        if not isinstance(events, dict):
            return
        for event in documents.events_with_ours(events, grouped=grouped, ours=ours):
            had = documents.holds(original, container, event)
            documents.drop_hook(events, event, grouped=grouped, ours=ours, had_event=had)
        if not events and not documents.holds(original, container):
            del doc[container]
            for key in top or {}:
                if key in doc and not documents.holds(original, key):
                    del doc[key]

    def wired(doc: Document) -> bool:
        return all(documents.has_hook(doc.get(container), event, grouped=grouped, ours=ours) for event in entries)

    return ConfigFile(path=path, fmt=Format.json, wire=wire, unwire=unwire, wired=wired)


def command_handler(command: str) -> JsonObject:
    """A Claude-style handler: ``{"type": "command", "command": ...}``."""
    return {"type": "command", "command": command}
