"""Antigravity (the ``agy`` CLI and the IDE): ``mcp_config.json`` and ``hooks.json``.

User scope writes ``~/.gemini/config/`` (what ``agy mcp add`` writes, shared by the IDE
and the CLI), and, where the Antigravity IDE keeps its agent data
(``~/.gemini/antigravity/``), the IDE's own ``mcp_config.json`` there too; project scope
writes the project's ``.agents/``. Antigravity's ``hooks.json`` maps a hook's name to
its events, so Palimpsest's hooks are one entry named ``palimpsest``, holding
``{"type": "command", "command": ...}`` handlers; other hooks are other names, untouched.
"""

from __future__ import annotations

from palimpsest.server.agents.documents import SERVER_NAME, Format
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

NAME = "antigravity"

#: ``Stop`` ends each turn; ``agy`` writes the transcript after it, often seconds later, so
#: ``PreInvocation`` (before each model call, the next turn's first included) reads what a
#: ``Stop`` found missing. A call that finds the transcript unchanged since the last read
#: reads nothing.
EVENTS = ("Stop", "PreInvocation")


def files(scope: Scope, places: Places, entries: Entries) -> list[ConfigFile]:
    """``mcp_config.json`` and ``hooks.json`` in ``~/.gemini/config`` or the project's ``.agents/``.

    User scope also wires the IDE's ``~/.gemini/antigravity/mcp_config.json`` when that folder exists.
    """
    folder = places.home / ".gemini" / "config" if scope is Scope.user else places.project / ".agents"
    server = {"command": entries.executable, "args": entries.serve_args(NAME)}
    hooks = dict.fromkeys(EVENTS, command_handler(entries.hook_command(NAME)))
    wired = [
        servers_file(folder / "mcp_config.json", Format.json, "mcpServers", server),
        hooks_file(folder / "hooks.json", NAME, hooks, grouped=False, container=SERVER_NAME),
    ]
    ide = places.home / ".gemini" / "antigravity"
    if scope is Scope.user and ide.is_dir():
        wired.append(servers_file(ide / "mcp_config.json", Format.json, "mcpServers", server))
    return wired


AGENT = Agent(
    name=NAME,
    title="Antigravity",
    config_dirs=lambda places: [
        places.home / ".gemini" / "antigravity",
        places.home / ".gemini" / "antigravity-cli",
        places.home / ".gemini" / "config",
    ],
    files=files,
)
