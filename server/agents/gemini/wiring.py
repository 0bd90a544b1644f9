"""Gemini CLI: one ``settings.json`` holding both the MCP servers and the hooks.

User scope writes ``~/.gemini/settings.json``, project scope the project's
``.gemini/settings.json`` (Gemini CLI reads no other file for either: ``~/.gemini/config/``
is Antigravity's). The server goes under ``mcpServers``; the hooks are matcher groups
(``{"hooks": [{"type": "command", "command": ..., "name": ...}]}``) like Claude Code's, on the
events ``palimpsest hook gemini`` handles. Gemini CLI starts MCP servers only in folders
the user trusts, which is the user's call, so install says so rather than trusting any.
"""

from __future__ import annotations

from pathlib import Path

from palimpsest.server.agents.documents import SERVER_NAME, Document, Format
from palimpsest.server.agents.spec import (
    Agent,
    ConfigFile,
    Entries,
    Places,
    Scope,
    command_handler,
    hooks_file,
    servers_file,
)

NAME = "gemini"

#: SessionStart hands memory back; the others store what the chat recording holds by then.
EVENTS = ("SessionStart", "AfterAgent", "PreCompress", "SessionEnd")

TRUST_NOTE = (
    "Gemini CLI starts MCP servers only in trusted folders: trust the folder when Gemini asks "
    "(or with /permissions), then `gemini mcp list` shows palimpsest."
)


def _one_file(*parts: ConfigFile) -> ConfigFile:
    """Several sets of entries that live in one file, written as one change to it."""

    def wire(doc: Document) -> None:
        for part in parts:
            part.wire(doc)

    def unwire(doc: Document, original: Document | None) -> None:
        for part in parts:
            part.unwire(doc, original)

    return ConfigFile(
        path=parts[0].path,
        fmt=parts[0].fmt,
        wire=wire,
        unwire=unwire,
        wired=lambda doc: all(part.wired(doc) for part in parts),
    )


def files(scope: Scope, places: Places, entries: Entries) -> list[ConfigFile]:
    """``~/.gemini/settings.json``, or the project's ``.gemini/settings.json``."""
    folder = (places.home if scope is Scope.user else places.project) / ".gemini"
    settings = folder / "settings.json"
    server = {"command": entries.executable, "args": entries.serve_args(NAME)}
    group = {"hooks": [{**command_handler(entries.hook_command(NAME)), "name": SERVER_NAME}]}
    return [
        _one_file(
            servers_file(settings, Format.json, "mcpServers", server),
            hooks_file(settings, NAME, dict.fromkeys(EVENTS, group), grouped=True),
        )
    ]


def _config_dirs(places: Places) -> list[Path]:
    """``~/.gemini`` once Gemini CLI has used it (its settings or its chats; Antigravity shares the folder)."""
    folder = places.home / ".gemini"
    used = (folder / "settings.json").is_file() or (folder / "tmp").is_dir()
    return [folder] if used else []


AGENT = Agent(
    name=NAME,
    title="Gemini CLI",
    config_dirs=_config_dirs,
    files=files,
    notes={Scope.user: TRUST_NOTE, Scope.project: TRUST_NOTE},
)
