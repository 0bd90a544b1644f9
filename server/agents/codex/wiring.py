"""Codex: the MCP server in ``config.toml`` (comments kept), hooks in ``hooks.json``.

User scope writes under ``$CODEX_HOME`` (default ``~/.codex``), project scope under the
project's ``.codex/``. The server is a ``[mcp_servers.palimpsest]`` table edited through
tomlkit, so the rest of ``config.toml`` keeps its bytes. Hooks go in ``hooks.json``
beside it (Codex reads both and runs every matching hook), as matcher groups like
Claude Code's, on the events ``palimpsest hook codex`` handles; its root holds only
``hooks``, since Codex refuses unknown root keys.
"""

from __future__ import annotations

from pathlib import Path

from palimpsest.server.agents.documents import Format
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

NAME = "codex"

#: The events the hook stores a turn on, or hands memory back at (SessionStart).
EVENTS = ("SessionStart", "Stop", "PreCompact")


def codex_home(places: Places) -> Path:
    """``$CODEX_HOME``, else ``~/.codex``."""
    configured = places.environ.get("CODEX_HOME")
    return Path(configured).expanduser() if configured else places.home / ".codex"


def files(scope: Scope, places: Places, entries: Entries) -> list[ConfigFile]:
    """``config.toml`` and ``hooks.json`` in ``$CODEX_HOME``, or in the project's ``.codex/``."""
    folder = codex_home(places) if scope is Scope.user else places.project / ".codex"
    server = {"command": entries.executable, "args": entries.serve_args(NAME)}
    group = {"hooks": [command_handler(entries.hook_command(NAME))]}
    return [
        servers_file(folder / "config.toml", Format.toml, "mcp_servers", server),
        hooks_file(folder / "hooks.json", NAME, dict.fromkeys(EVENTS, group), grouped=True),
    ]


AGENT = Agent(
    name=NAME,
    title="Codex",
    config_dirs=lambda places: [codex_home(places)],
    files=files,
)
