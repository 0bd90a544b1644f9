"""What ``palimpsest hook cursor`` reads: Cursor's agent hook payloads, every content-bearing one.

Cursor runs hooks (``~/.cursor/hooks.json``, ``.cursor/hooks.json``) with
``{"hook_event_name", "conversation_id", "generation_id", "workspace_roots", ...}`` on
stdin; thread = ``conversation_id`` (a subagent's events name their parent's in
``parent_conversation_id``). What is stored comes from the payloads themselves:

- ``beforeSubmitPrompt``: ``prompt`` → a user message, id ``<generation_id>:prompt:<hash of the text>``;
- ``afterAgentResponse``: ``text`` → an assistant message;
- ``afterAgentThought``: ``text`` → an assistant message with metadata ``kind: thinking``;
- ``postToolUse``: ``tool_name`` and ``tool_input`` → a ``tool_use`` message ``Name {json input}``
  whose ``tool_call_id`` and id are Cursor's ``tool_use_id``; ``tool_output`` → a ``tool``
  message answering it (id ``<tool_use_id>:result``);
- ``postToolUseFailure``: the same call, and ``error_message`` as its result, marked ``is_error``;
- ``subagentStop``: the subagent's ``summary`` → an assistant message (kind ``subagent``), the
  rest of the payload (task, status, files it changed) kept in its metadata.

One identity per step: Cursor reports a shell command both through ``postToolUse`` and
``afterShellExecution``, and an edit through ``postToolUse`` and ``afterFileEdit``. Only
``postToolUse`` carries the call's id, its input and its output for every tool, so it is
the one registered; an ``afterShellExecution`` or ``afterFileEdit`` payload that carries a
``tool_use_id`` is stored under that same identity (so it never adds a second copy), one
without it adds nothing. Cursor's own transcript (``transcript_path``) is not read either:
its lines carry no ids and no times (a tool call there has no id to pair its result with),
while the payloads carry both. A payload sent twice adds nothing: every id is fixed by it.

Never stored: the user's account fields (``user_email``) and the envelope every payload
repeats. On ``sessionStart`` the project's earlier sessions come back as
``{"additional_context": ...}``; every other event prints nothing.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import NewMessage, Role
from palimpsest.server.feeds.hooks import HookRequest, hook_message, text_field

AGENT = "cursor"
SOURCE = "cursor"
#: Payload events carrying a message: the field holding it, its role, kind and id suffix.
MESSAGES = {
    "beforeSubmitPrompt": ("prompt", Role.user, "text", "prompt"),
    "afterAgentResponse": ("text", Role.assistant, "text", "response"),
    "afterAgentThought": ("text", Role.assistant, "thinking", "thought"),
}
#: Events reporting a tool call Cursor also reports through ``postToolUse``.
TOOL_ECHOES = frozenset({"afterShellExecution", "afterFileEdit"})
#: Fields every payload repeats, or that describe the user's account: never stored.
ENVELOPE = frozenset(
    {
        "hook_event_name",
        "conversation_id",
        "generation_id",
        "session_id",
        "workspace_roots",
        "cursor_version",
        "user_email",
        "transcript_path",
        "model",
    }
)


#: Names a payload key may not take in metadata (they are the message's own fields).
_MESSAGE_FIELDS = frozenset({"role", "content", "message_id", "kind", "source", "created_at"})


def _reply(text: str) -> str:
    return json.dumps({"additional_context": text}, ensure_ascii=False)


def _digest(text: str, length: int = 12) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _rendered(value: Any) -> str:
    """A tool's input or output as text: a string as it is, anything else as JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _extra(payload: dict[str, Any], *used: str) -> dict[str, Any]:
    """What a payload says beyond the envelope and the fields already stored as content."""
    return {
        key: value
        for key, value in payload.items()
        if key not in ENVELOPE and key not in used and key not in _MESSAGE_FIELDS
    }


def _tool_call(payload: dict[str, Any], event: str, generation: str) -> list[NewMessage]:
    """A ``postToolUse`` / ``postToolUseFailure`` payload as the call and its result."""
    name = text_field(payload, "tool_name")
    if name is None:
        raise InvalidInput(f"hook input on stdin: {event} without 'tool_name'")
    rendered = _rendered(payload.get("tool_input", {}))
    call_id = text_field(payload, "tool_use_id") or f"{generation}:{name}:{_digest(rendered)}"
    model = text_field(payload, "model")
    call = hook_message(Role.assistant, f"{name} {rendered}", call_id, "tool_use", SOURCE, tool_name=name, model=model)
    failed = event == "postToolUseFailure"
    output = text_field(payload, "error_message", "error") if failed else None
    result_text = (output or "") if failed else _rendered(payload.get("tool_output"))
    extra = _extra(payload, "tool_name", "tool_input", "tool_use_id", "tool_output", "error_message", "error", "cwd")
    result = hook_message(
        Role.tool,
        result_text,
        f"{call_id}:result",
        "tool_result",
        SOURCE,
        tool_name=name,
        is_error=failed,
        cwd=text_field(payload, "cwd"),
        **extra,
    )
    return [
        call.model_copy(update={"tool_call_id": call_id}),
        result.model_copy(update={"tool_call_id": call_id}),
    ]


def _subagent(payload: dict[str, Any], generation: str) -> list[NewMessage]:
    """A ``subagentStop`` payload: the subagent's summary, its task and outcome in metadata."""
    summary = text_field(payload, "summary") or ""
    subagent = text_field(payload, "subagent_id") or f"{generation}:{_digest(json.dumps(payload, sort_keys=True))}"
    extra = _extra(payload, "summary")
    return [hook_message(Role.assistant, summary, f"{subagent}:stop", "subagent", SOURCE, **extra)]


def request(payload: dict[str, Any]) -> HookRequest:
    """Cursor's payload as a `HookRequest`.

    Raises:
        InvalidInput: without ``conversation_id`` (or ``session_id``); a tool event
            without ``tool_name``.
    """
    thread = text_field(payload, "parent_conversation_id") or text_field(
        payload, "conversation_id", "session_id", required=True
    )
    assert thread is not None
    event = text_field(payload, "hook_event_name") or ""
    roots = payload.get("workspace_roots")
    cwd = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else text_field(payload, "cwd")
    request = HookRequest(agent=AGENT, event=event, thread_id=thread, cwd=cwd)
    generation = text_field(payload, "generation_id") or thread
    if event in MESSAGES:
        key, role, kind, suffix = MESSAGES[event]
        text = text_field(payload, key)
        if text:
            generation_id = text_field(payload, "generation_id") or _digest(text, 32)
            message_id = f"{generation_id}:{suffix}:{_digest(text)}"
            model = text_field(payload, "model")
            request.inline.append(hook_message(role, text, message_id, kind, SOURCE, model=model))
    elif event in ("postToolUse", "postToolUseFailure"):
        request.inline.extend(_tool_call(payload, event, generation))
    elif event in TOOL_ECHOES and text_field(payload, "tool_use_id"):
        request.inline.extend(_tool_call(_as_tool_use(payload, event), "postToolUse", generation))
    elif event == "subagentStop":
        request.inline.extend(_subagent(payload, generation))
    if event == "sessionStart":
        request.memory = "project"
        request.reply = _reply
    return request


def _as_tool_use(payload: dict[str, Any], event: str) -> dict[str, Any]:
    """An ``afterShellExecution`` / ``afterFileEdit`` payload in ``postToolUse``'s shape."""
    rest = {key: value for key, value in payload.items() if key not in ("command", "output", "file_path", "edits")}
    if event == "afterShellExecution":
        shaped = {"tool_name": "Shell", "tool_input": {"command": payload.get("command")}}
        return {**rest, **shaped, "tool_output": payload.get("output")}
    edit = {"file_path": payload.get("file_path"), "edits": payload.get("edits")}
    return {**rest, "tool_name": "Edit", "tool_input": edit, "tool_output": ""}
