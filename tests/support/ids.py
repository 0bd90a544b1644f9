"""Message ids as older releases derived them, for tests of stores those releases wrote."""

from __future__ import annotations

import hashlib


def old_message_id(partition: str, thread_id: str, source_id: str) -> str:
    """The message id as stores written before the JSON encoding derived it."""
    joined = "\x1f".join(("message", partition, thread_id, source_id))
    return "msg_" + hashlib.sha256(joined.encode("utf-8")).hexdigest()[:32]
