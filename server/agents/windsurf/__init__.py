"""Windsurf (Cascade): its wiring (``wiring``) and its hook, which reads Cascade's step transcripts (``hook``).

Kept cheap to import (constants only): a hook runs on every turn of the agent, and its
parsing and help read this package; ``hook`` itself is loaded only to run the hook.
"""

from __future__ import annotations

#: What ``palimpsest hook windsurf --help`` says the hook does.
HOOK_HELP = (
    "A Windsurf Cascade hook (post_cascade_response_with_transcript, or pre_user_prompt and "
    "post_cascade_response): stores every step of the turn and rewrites .windsurf/rules/palimpsest.md "
    "after each response."
)
