"""Codex: its wiring (``wiring``), its hook (``hook``) and its rollouts (``transcript``).

Kept cheap to import (constants only): a hook runs on every turn of the agent, and its
parsing and help read this package; ``hook`` itself is loaded only to run the hook.
"""

from __future__ import annotations

#: What ``palimpsest hook codex --help`` says the hook does.
HOOK_HELP = (
    "A Codex hook (SessionStart, Stop, PreCompact): stores the rollout's new lines (found under "
    "$CODEX_HOME/sessions when transcript_path is null); on SessionStart prints the memory."
)
