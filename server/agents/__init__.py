"""Wiring Palimpsest into each coding agent's own configuration files.

``palimpsest install AGENT`` registers the MCP server and the agent's hooks; ``uninstall``
takes them out again, leaving every file as it was. One module per agent says which
files it reads and what Palimpsest's entries look like there (``claude``, ``codex``,
``windsurf``, ``antigravity``, ``cursor``); ``documents`` merges entries into JSON and
TOML without touching anyone else's; ``wiring`` plans and applies the changes, with a
backup and a manifest under the data directory so uninstall can restore exact bytes.
"""
