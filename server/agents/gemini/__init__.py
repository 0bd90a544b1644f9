"""Gemini CLI: its wiring (``wiring``), its hook (``hook``) and its chat recordings (``transcript``).

Kept cheap to import (constants only): a hook runs on every turn of the agent, and its
parsing and help read this package; ``hook`` itself is loaded only to run the hook.
"""

from __future__ import annotations

#: What ``palimpsest hook gemini --help`` says the hook does.
HOOK_HELP = (
    "A Gemini CLI hook (SessionStart, AfterAgent, PreCompress, SessionEnd): stores the chat recording's new "
    "messages, tool calls and thoughts; on SessionStart prints the memory as hookSpecificOutput.additionalContext."
)
