"""Antigravity (the ``agy`` CLI and the IDE): ``mcp_config.json`` and ``hooks.json``.

User scope writes ``~/.gemini/config/`` (what ``agy mcp add`` writes, shared by the IDE
and the CLI), project scope the project's ``.agents/``. Antigravity's ``hooks.json``
maps a hook's name to its events, so Palimpsest's hooks are one entry named
``palimpsest``, holding ``{"type": "command", "command": ...}`` handlers; other hooks
are other names, untouched. (Gemini CLI's hook format in ``~/.gemini/settings.json``,
which ``palimpsest hook antigravity`` also reads, is not written: the same turn would
then be stored twice, once from each format.)
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

#: The loop's end: the hook reads the conversation's transcript from where it stopped last time,
#: so one event a turn stores everything (``PreInvocation`` would run before every model call).
EVENTS = ("Stop",)


def files(scope: Scope, places: Places, entries: Entries) -> list[ConfigFile]:
    """``mcp_config.json`` and ``hooks.json`` in ``~/.gemini/config``, or in the project's ``.agents/``."""
    folder = places.home / ".gemini" / "config" if scope is Scope.user else places.project / ".agents"
    server = {"command": entries.executable, "args": entries.serve_args(NAME)}
    hooks = dict.fromkeys(EVENTS, command_handler(entries.hook_command(NAME)))
    return [
        servers_file(folder / "mcp_config.json", Format.json, "mcpServers", server),
        hooks_file(folder / "hooks.json", NAME, hooks, grouped=False, container=SERVER_NAME),
    ]


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
