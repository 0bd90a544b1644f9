"""Cursor: ``mcp.json`` for the server, ``hooks.json`` (``{"version": 1, "hooks": ...}``) for the hooks.

User scope writes ``~/.cursor/``, project scope the project's ``.cursor/``. Cursor hooks
are flat handlers, ``{"command": ...}``, per event: the session's start (memory handed
back), the prompt, the reply, the agent's thinking, every tool call with its result (or its
failure), and a subagent's summary. ``afterShellExecution`` and ``afterFileEdit`` are not
registered: ``postToolUse`` reports the same commands and edits, with the call's id.
"""

from __future__ import annotations

from palimpsest.server.agents.documents import Format
from palimpsest.server.agents.spec import Agent, ConfigFile, Entries, Places, Scope, hooks_file, servers_file

NAME = "cursor"

#: The events ``palimpsest hook cursor`` handles.
EVENTS = (
    "sessionStart",
    "beforeSubmitPrompt",
    "afterAgentThought",
    "afterAgentResponse",
    "postToolUse",
    "postToolUseFailure",
    "subagentStop",
)


def files(scope: Scope, places: Places, entries: Entries) -> list[ConfigFile]:
    """``mcp.json`` and ``hooks.json`` in ``~/.cursor``, or in the project's ``.cursor/``."""
    folder = (places.home if scope is Scope.user else places.project) / ".cursor"
    server = {"command": entries.executable, "args": entries.serve_args(NAME)}
    hooks = dict.fromkeys(EVENTS, {"command": entries.hook_command(NAME)})
    return [
        servers_file(folder / "mcp.json", Format.json, "mcpServers", server),
        hooks_file(folder / "hooks.json", NAME, hooks, grouped=False, top={"version": 1}),
    ]


AGENT = Agent(
    name=NAME,
    title="Cursor",
    config_dirs=lambda places: [places.home / ".cursor"],
    files=files,
)
