"""Each coding agent Palimpsest serves: one folder per agent, and the shared wiring machinery.

An agent's folder (``claude``, ``codex``, ``windsurf``, ``antigravity``, ``cursor``,
``gemini``) holds all that is particular to it: its hook (``hook``: what the agent's hook
payload and transcript become), its transcript format where it has one (``transcript``)
and its wiring (``wiring``: which config files it reads and what Palimpsest's entries
look like there). ``registry`` is the one list of agents, which the hook command,
``install``/``uninstall``/``status`` and ingest's format detection all go through.
Shared by all: ``spec`` (what wiring an agent means), ``documents`` (merging entries
into JSON and TOML without touching anyone else's), ``wiring`` (planning and applying
the changes, with a backup and a manifest under the data directory so uninstall can
restore exact bytes) and ``status`` (what is wired and whether memory arrives).

This ``__init__`` and each agent's stay empty of imports: ``palimpsest hook`` passes
through them on every turn.
"""
