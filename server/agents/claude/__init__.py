"""Claude Code: its wiring (``wiring``), its hook (``hook``) and its session transcripts (``transcript``).

Kept cheap to import (constants only): a hook runs on every turn of the agent, and its
parsing and help read this package; ``hook`` itself is loaded only to run the hook.
"""

from __future__ import annotations

#: What ``palimpsest hook claude --help`` says the hook does.
HOOK_HELP = (
    "A Claude Code hook (SessionStart, Stop, PreCompact, SessionEnd): stores the session's new lines and its "
    "subagents'; on SessionStart prints the memory as hookSpecificOutput.additionalContext."
)
