"""Reading, merging and writing the agents' JSON and TOML files, everyone else's entries untouched.

Agents keep their MCP servers and hooks in files the user (and other tools) also edit,
so Palimpsest changes only its own entries: the server named ``palimpsest`` and the hook
handlers whose command is ``<...>/palimpsest hook AGENT``. Adding them again when they
are already there changes nothing; removing them also removes a container (``hooks``,
``mcpServers``, an event's list) only when Palimpsest's entries were all it held and the
file did not have it before. TOML goes through ``tomlkit``, which keeps comments and
layout, so Codex's ``config.toml`` reads the same after Palimpsest has been and gone.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable

from palimpsest.graph_schema.errors import InvalidInput

#: The name Palimpsest's MCP server is registered under in every agent.
SERVER_NAME = "palimpsest"

#: Names the executable of a hook command may have to count as Palimpsest's own.
EXECUTABLE_NAMES = frozenset({"palimpsest", "palimpsest.exe"})

JsonObject = dict[str, Any]
Document = Any  # a JSON object (dict) or a tomlkit document
OwnCommand = Callable[[object], bool]


class Format(StrEnum):
    """The syntax of an agent's config file."""

    json = "json"
    toml = "toml"


def parse(text: str | None, fmt: Format, path: Path) -> Document:
    """The document a file holds; a missing or blank file is an empty one.

    Raises:
        InvalidInput: the file is not valid JSON or TOML, or its JSON is not an object.
    """
    if fmt is Format.toml:
        try:
            return tomlkit.parse(text or "")
        except TOMLKitError as exc:
            raise InvalidInput(f"{path} is not valid TOML ({exc}); fix it first, nothing was changed") from None
    if text is None or not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{path} is not valid JSON (line {exc.lineno}: {exc.msg}); fix it first, nothing was changed"
        ) from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"{path} does not hold a JSON object; fix it first, nothing was changed")
    return doc


def render(doc: Document, fmt: Format, previous: str | None) -> str:
    """The text of ``doc``, indented like ``previous`` when it was JSON (two spaces otherwise)."""
    if fmt is Format.toml:
        text = tomlkit.dumps(doc)
        if text.endswith("\n\n") and not (previous or "").endswith("\n\n"):
            text = text.rstrip("\n") + "\n"  # the blank line that ends Palimpsest's own table
        return text
    indent: str | int = 2
    if previous:
        first = re.search(r"^\{\s*\n([ \t]+)\S", previous)
        if first:
            indent = first.group(1)
    return json.dumps(doc, indent=indent, ensure_ascii=False) + "\n"


def copy_of(doc: Document, fmt: Format) -> Document:
    """A deep copy to change, so the document read stays as it was for comparison."""
    return tomlkit.parse(tomlkit.dumps(doc)) if fmt is Format.toml else copy.deepcopy(doc)


def same(left: Document, right: Document, fmt: Format) -> bool:
    """Whether two documents hold the same data (TOML: the same text, comments included)."""
    if fmt is Format.toml:
        return bool(tomlkit.dumps(left) == tomlkit.dumps(right))
    return bool(left == right)


def is_empty(doc: Document, fmt: Format) -> bool:
    """Whether nothing is left in the document, not even a comment."""
    if fmt is Format.toml:
        return not tomlkit.dumps(doc).strip()
    return not doc


def holds(doc: Document | None, *keys: str) -> bool:
    """Whether ``doc`` has the nested key path ``keys`` (``None``, a missing file, has none)."""
    node: Any = doc
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def is_palimpsest_hook(agent: str) -> OwnCommand:
    """A test for "this hook command is Palimpsest's for ``agent``": ``<.../palimpsest> hook AGENT ...``.

    Matching on the executable's name and the first two arguments, not the whole line,
    finds the entry again after the installation moved or ``--store`` changed.
    """

    def ours(command: object) -> bool:
        if not isinstance(command, str):
            return False
        try:
            words = shlex.split(command)
        except ValueError:
            return False
        return len(words) >= 3 and Path(words[0]).name in EXECUTABLE_NAMES and words[1:3] == ["hook", agent]

    return ours


def table(doc: Document, key: str, path: Path) -> Any:
    """``doc[key]``, created empty when missing.

    Raises:
        InvalidInput: ``doc[key]`` exists but is not an object (a table in TOML).
    """
    if key not in doc:
        doc[key] = tomlkit.table(is_super_table=True) if isinstance(doc, tomlkit.TOMLDocument) else {}
    node = doc[key]
    if not isinstance(node, dict):
        raise InvalidInput(f"{path}: {key!r} is not an object; fix it first, nothing was changed")
    return node


# -- MCP servers: one named entry in a table ------------------------------------------------


def put_server(doc: Document, key: str, entry: JsonObject, path: Path) -> None:
    """Register ``entry`` as the ``palimpsest`` server under ``doc[key]``; nothing changes if it is there."""
    servers = table(doc, key, path)
    current = servers.get(SERVER_NAME)
    if isinstance(current, dict) and _plain(current) == entry:
        return
    if isinstance(servers, InlineTable):  # mcp_servers = { other = {...} } stays inline
        inline = tomlkit.inline_table()
        inline.update(entry)
        servers[SERVER_NAME] = inline
    elif isinstance(doc, tomlkit.TOMLDocument):
        server = tomlkit.table()
        for name, value in entry.items():
            server[name] = value
        server.add(tomlkit.nl())  # a blank line before whatever table follows
        servers[SERVER_NAME] = server
    else:
        servers[SERVER_NAME] = copy.deepcopy(entry)


def drop_server(doc: Document, key: str, original: Document | None) -> None:
    """Remove the ``palimpsest`` server from ``doc[key]``, and the table if the original lacked it."""
    servers = doc.get(key)
    if not isinstance(servers, dict) or SERVER_NAME not in servers:
        return
    del servers[SERVER_NAME]
    if not servers and not holds(original, key):
        del doc[key]


def has_server(doc: Document, key: str) -> bool:
    """Whether a ``palimpsest`` server is registered under ``doc[key]``."""
    return holds(doc, key, SERVER_NAME)


# -- hooks: lists of handlers per event ------------------------------------------------------


def _plain(value: Any) -> Any:
    """A tomlkit value as plain Python data, for comparison."""
    return value.unwrap() if hasattr(value, "unwrap") else value


def _commands(entry: object, grouped: bool) -> list[object]:
    """The commands of one event entry: a handler's own, or a matcher group's handlers'."""
    if not isinstance(entry, dict):
        return []
    if grouped:
        handlers = entry.get("hooks")
        return (
            [handler.get("command") for handler in handlers if isinstance(handler, dict)]
            if isinstance(handlers, list)
            else []
        )
    return [entry.get("command")]


def _without_ours(entries: list[Any], grouped: bool, ours: OwnCommand) -> list[Any]:
    """``entries`` less Palimpsest's handlers; a matcher group left with no handler goes too."""
    kept: list[Any] = []
    for entry in entries:
        commands = _commands(entry, grouped)
        if not any(ours(command) for command in commands):
            kept.append(entry)
        elif grouped:
            handlers = [h for h in entry["hooks"] if not (isinstance(h, dict) and ours(h.get("command")))]
            if handlers:
                kept.append({**entry, "hooks": handlers})
    return kept


def put_hook(events: JsonObject, event: str, entry: JsonObject, *, grouped: bool, ours: OwnCommand, path: Path) -> None:
    """Make ``entry`` Palimpsest's one entry for ``event``; nothing changes if it already is.

    ``grouped`` lists hold matcher groups (``{"hooks": [handler, ...]}``, Claude Code and
    Codex); the others hold handlers directly (Windsurf, Cursor, Antigravity).

    Raises:
        InvalidInput: the event's value is not a list.
    """
    entries = events.setdefault(event, [])
    if not isinstance(entries, list):
        raise InvalidInput(f"{path}: hooks for {event!r} are not a list; fix it first, nothing was changed")
    mine = [item for item in entries if any(ours(command) for command in _commands(item, grouped))]
    if mine == [entry]:
        return
    events[event] = [*_without_ours(entries, grouped, ours), copy.deepcopy(entry)]


def drop_hook(events: JsonObject, event: str, *, grouped: bool, ours: OwnCommand, had_event: bool) -> None:
    """Remove Palimpsest's handlers for ``event``, and the event if only they held it and it was new."""
    entries = events.get(event)
    if not isinstance(entries, list):
        return
    kept = _without_ours(entries, grouped, ours)
    if kept or had_event:
        events[event] = kept
    else:
        del events[event]


def events_with_ours(events: JsonObject, *, grouped: bool, ours: OwnCommand) -> list[str]:
    """Every event holding one of Palimpsest's handlers, including events it no longer registers."""
    return [
        event
        for event, entries in events.items()
        if isinstance(entries, list) and any(ours(c) for item in entries for c in _commands(item, grouped))
    ]


def has_hook(events: object, event: str, *, grouped: bool, ours: OwnCommand) -> bool:
    """Whether one of Palimpsest's handlers is registered for ``event``."""
    if not isinstance(events, dict) or not isinstance(events.get(event), list):
        return False
    return any(ours(command) for item in events[event] for command in _commands(item, grouped))
