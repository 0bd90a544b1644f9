"""Windsurf (Cascade): ``mcp_config.json`` for the server, ``hooks.json`` for the hooks.

Windsurf reads MCP servers only from the user's ``~/.codeium/windsurf/mcp_config.json``,
so project scope wires the hooks alone (``.windsurf/hooks.json``) and says so. Cascade
hooks are flat handlers, ``{"command": ..., "show_output": false}``, per event: the
transcript after each response, and the prompt and the reply for when no transcript
comes.
"""

from __future__ import annotations

from palimpsest.server.agents.documents import Format
from palimpsest.server.agents.spec import Agent, ConfigFile, Entries, Places, Scope, hooks_file, servers_file

NAME = "windsurf"

#: The Cascade events ``palimpsest hook windsurf`` handles.
EVENTS = ("pre_user_prompt", "post_cascade_response", "post_cascade_response_with_transcript")


def files(scope: Scope, places: Places, entries: Entries) -> list[ConfigFile]:
    """``mcp_config.json`` and ``hooks.json`` in ``~/.codeium/windsurf``, or ``.windsurf/hooks.json``."""
    handler = {"command": entries.hook_command(NAME), "show_output": False}
    hooks = dict.fromkeys(EVENTS, handler)
    if scope is Scope.project:
        return [hooks_file(places.project / ".windsurf" / "hooks.json", NAME, hooks, grouped=False)]
    folder = places.home / ".codeium" / "windsurf"
    server = {"command": entries.executable, "args": entries.serve_args(NAME)}
    return [
        servers_file(folder / "mcp_config.json", Format.json, "mcpServers", server),
        hooks_file(folder / "hooks.json", NAME, hooks, grouped=False),
    ]


AGENT = Agent(
    name=NAME,
    title="Windsurf",
    config_dirs=lambda places: [places.home / ".codeium" / "windsurf"],
    files=files,
    notes={
        Scope.project: "Windsurf reads MCP servers only from ~/.codeium/windsurf/mcp_config.json: "
        "run `palimpsest install windsurf` for the server; project scope wires the hooks only"
    },
)
