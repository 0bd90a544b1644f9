"""Cursor: its wiring (``wiring``) and its hook, which stores what the hook payloads carry (``hook``).

Kept cheap to import (constants only): a hook runs on every turn of the agent, and its
parsing and help read this package; ``hook`` itself is loaded only to run the hook.
"""

from __future__ import annotations

#: What ``palimpsest hook cursor --help`` says the hook does.
HOOK_HELP = (
    "A Cursor hook (sessionStart, beforeSubmitPrompt, afterAgentThought, afterAgentResponse, postToolUse, "
    "postToolUseFailure, subagentStop): stores the prompt, thoughts, reply and every tool call with its result; "
    "on sessionStart prints the memory as additional_context."
)
