"""Antigravity (``agy``): its wiring (``wiring``) and its hook, which reads agy's step transcripts (``hook``).

Kept cheap to import (constants only): a hook runs on every turn of the agent, and its
parsing and help read this package; ``hook`` itself is loaded only to run the hook.
"""

from __future__ import annotations

#: What ``palimpsest hook antigravity --help`` says the hook does.
HOOK_HELP = (
    "An Antigravity (agy) hook (Stop, PreInvocation): stores every step of the conversation's transcript "
    "(transcriptPath), one agy may still be writing included."
)
