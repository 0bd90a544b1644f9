"""Claude Code: MCP servers in ``~/.claude.json`` or ``.mcp.json``, hooks in ``settings.json``.

User scope registers the server at the top level of ``~/.claude.json`` (what
``claude mcp add --scope user`` writes) and the hooks in ``~/.claude/settings.json``;
project scope uses the project's ``.mcp.json`` and ``.claude/settings.json``. Hooks
are matcher groups (``{"hooks": [{"type": "command", "command": ...}]}``) on the events
``palimpsest hook claude`` handles; without a matcher a group fires on every source
(startup, resume, clear, compact).
"""

from __future__ import annotations

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

NAME = "claude"

#: The events the hook stores a turn on, or hands memory back at (SessionStart).
EVENTS = ("SessionStart", "Stop", "PreCompact", "SessionEnd")


def files(scope: Scope, places: Places, entries: Entries) -> list[ConfigFile]:
    """``~/.claude.json`` and ``~/.claude/settings.json``, or ``.mcp.json`` and ``.claude/settings.json``."""
    server = {"type": "stdio", "command": entries.executable, "args": entries.serve_args(NAME)}
    group = {"hooks": [command_handler(entries.hook_command(NAME))]}
    if scope is Scope.user:
        servers, settings = places.home / ".claude.json", places.home / ".claude" / "settings.json"
    else:
        servers, settings = places.project / ".mcp.json", places.project / ".claude" / "settings.json"
    return [
        servers_file(servers, Format.json, "mcpServers", server),
        hooks_file(settings, NAME, dict.fromkeys(EVENTS, group), grouped=True),
    ]


AGENT = Agent(
    name=NAME,
    title="Claude Code",
    config_dirs=lambda places: [places.home / ".claude"],
    files=files,
)
