"""Windsurf (Cascade): ``mcp_config.json`` for the server, ``hooks.json`` for the hooks.

Windsurf reads MCP servers only from the user's ``~/.codeium/windsurf/mcp_config.json``,
so project scope wires the hooks alone (``.windsurf/hooks.json``) and says so. Cascade
hooks are flat handlers, ``{"command": ..., "show_output": false}``, per event.

One event is registered: ``post_cascade_response_with_transcript``, whose transcript
holds the whole turn (tool calls included). ``palimpsest hook windsurf`` also reads
``pre_user_prompt`` + ``post_cascade_response`` (the prompt and the reply alone), for a
Windsurf that writes no transcript; registering both ways would store each turn twice,
since their messages cannot be matched, so that way is left to the by-hand setup in docs/agents.md.
"""

from __future__ import annotations

from palimpsest.server.agents.documents import Format
from palimpsest.server.agents.spec import Agent, ConfigFile, Entries, Places, Scope, hooks_file, servers_file

NAME = "windsurf"

#: The Cascade event whose payload names the conversation's transcript.
EVENTS = ("post_cascade_response_with_transcript",)


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
