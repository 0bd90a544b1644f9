"""What ``palimpsest hook cursor`` reads: Cursor's agent hook payloads.

Cursor runs hooks (``~/.cursor/hooks.json``, ``.cursor/hooks.json``) with
``{"hook_event_name", "conversation_id", "generation_id", "workspace_roots", ...}`` on
stdin; thread = ``conversation_id`` (``stop`` carries no ``session_id``, so it is not
used). What is stored comes from the payloads themselves:

- ``beforeSubmitPrompt``: ``prompt`` → a user message, id ``<generation_id>:prompt:<hash of the text>``;
- ``afterAgentResponse``: ``text`` → an assistant message;
- ``afterAgentThought``: ``text`` → an assistant message with metadata ``kind: thinking``.

The transcript some builds name on ``stop`` (``transcript_path``) holds the same turns
without ids or tool calls, so reading it as well would store each turn twice; it is
not read. On ``sessionStart`` the project's earlier sessions come back as
``{"additional_context": ...}``; ``stop`` and the others print nothing.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from palimpsest.graph_schema.models import Role
from palimpsest.server.feeds.hooks import HookRequest, hook_message, text_field

AGENT = "cursor"
SOURCE = "cursor"
#: Payload events carrying a message: the field holding it, its role, kind and id suffix.
MESSAGES = {
    "beforeSubmitPrompt": ("prompt", Role.user, "text", "prompt"),
    "afterAgentResponse": ("text", Role.assistant, "text", "response"),
    "afterAgentThought": ("text", Role.assistant, "thinking", "thought"),
}


def _reply(text: str) -> str:
    return json.dumps({"additional_context": text}, ensure_ascii=False)


def cursor_request(payload: dict[str, Any]) -> HookRequest:
    """Cursor's payload as a `HookRequest`.

    Raises:
        InvalidInput: without ``conversation_id`` (or ``session_id``).
    """
    thread = text_field(payload, "conversation_id", "session_id", required=True)
    assert thread is not None
    event = text_field(payload, "hook_event_name") or ""
    roots = payload.get("workspace_roots")
    cwd = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else text_field(payload, "cwd")
    request = HookRequest(agent=AGENT, event=event, thread_id=thread, cwd=cwd)
    if event in MESSAGES:
        key, role, kind, suffix = MESSAGES[event]
        text = text_field(payload, key)
        if text:
            generation = text_field(payload, "generation_id") or hashlib.sha256(text.encode()).hexdigest()[:32]
            digest = hashlib.sha256(text.encode()).hexdigest()[:12]
            message_id = f"{generation}:{suffix}:{digest}"
            model = text_field(payload, "model")
            request.inline.append(hook_message(role, text, message_id, kind, SOURCE, model=model))
    if event == "sessionStart":
        request.memory = "project"
        request.reply = _reply
    return request
