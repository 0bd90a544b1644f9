"""Step transcripts: the JSON-lines logs Windsurf (Cascade) and Antigravity (``agy``) keep, one step a line.

Both agents log a conversation as a list of steps (a prompt, the model's answer, each
tool it ran), neither documents the line schema, and both rewrite the file in place:
Windsurf from the start when a conversation is reverted to an earlier step, ``agy``
when it regenerates the log (a ``RUNNING`` step comes back ``DONE``). What they share is
decided once here; what each step type means is the agent's `StepReader`
(``windsurf.WindsurfSteps``, ``antigravity.AgySteps``).

- **Read whole, every time.** A byte position from the last read says nothing about a
  file rewritten since, and a step's identity and its tool call's pairing depend on the
  steps before it, so the file is always read from its first line. Re-reading stores
  nothing twice: every id comes from the steps themselves, and the store ignores an id
  it holds. (The runner still skips a file whose size has not changed since its last read.)
- **Identity from what a step is, never its line number** (`StepIds`): the turn it is
  in (a chain over the user's words of every turn so far), its own ``step_index`` if it
  has one (else its position within the turn), and a digest of the step's content. A
  reverted conversation's new prompt therefore gets a new id, and so do its replies, in
  order; a step seen again is the same id; a ``RUNNING`` step rewritten as ``DONE`` is a
  new message, and the running one stays (nothing it said is lost).
- **Nothing a step said is lost.** The reader turns a step into messages (text, thinking,
  ``tool_use``, ``tool_result``, or one ``step`` message for a step with no message
  shape) and says what it took; everything else in the line is kept in the first
  message's metadata ``step``. ``type``, ``status`` and ``step_index`` are metadata
  ``step_type``, ``status`` and ``step_index`` of every message of the step; its time
  (``created_at``, ``timestamp``) is the messages' ``created_at``.

Thread = the conversation id the hook gives, whatever the lines say.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError

from palimpsest.graph_schema.models import NewMessage, Role, UtcDatetime
from palimpsest.server.feeds.transcripts import (
    ParsedTranscript,
    Piece,
    ReadState,
    ThreadGrouper,
    decode_object,
    line_error,
    read_lines,
)

_TIMES: TypeAdapter[datetime | None] = TypeAdapter(UtcDatetime | None)
#: Keys holding a step's time, in order of preference.
TIME_KEYS = ("created_at", "timestamp", "createdAt")
#: Keys every step may carry that become metadata (or ``created_at``) of all its messages.
COMMON_KEYS = frozenset({"type", "status", "step_index", *TIME_KEYS})
#: Keys that may hold a step's text when it has no message shape.
TEXT_KEYS = ("content", "text", "message", "response", "summary")


@dataclass
class StepRead:
    """The messages one step becomes, and what of the step they do not hold."""

    pieces: list[Piece]
    #: Everything the pieces do not say (common keys aside): the first message's metadata ``step``.
    rest: dict[str, Any] = field(default_factory=dict)


class StepReader(Protocol):
    """An agent's meaning of its steps; may keep state across the lines of one read (open tool calls)."""

    def turn_text(self, value: dict[str, Any]) -> str | None:
        """The user's words when the step opens a turn (a prompt), else ``None``."""
        ...

    def read(self, value: dict[str, Any], step_id: str) -> StepRead:
        """The messages the step becomes; ``step_id`` is the id of its first message."""
        ...


def digest(text: str) -> str:
    """A short, stable hex digest (ids are names, so kept short)."""
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def canonical(value: Any) -> str:
    """JSON with sorted keys: the same step, however its keys are ordered, has one digest."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def rendered(value: Any) -> str:
    """A value as text: a string as is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@dataclass
class StepIds:
    """Ids that survive a rewritten file: ``<turn>-<index or position>-<content digest>``.

    ``turn`` chains the user's words of every turn so far, so the same prompt twice in
    a conversation opens two turns, and a reverted conversation's new prompt a third.
    """

    turn: str = "0" * 12
    position: int = 0

    def next(self, value: dict[str, Any], turn_text: str | None) -> str:
        """The id of the step ``value``, the next line of the file."""
        if turn_text is not None:
            self.turn = digest(f"{self.turn}\n{turn_text}")[:12]
            self.position = 0
        index = value.get("step_index")
        own = index if isinstance(index, int) and not isinstance(index, bool) else self.position
        self.position += 1
        return f"{self.turn}-{own}-{digest(canonical(value))[:10]}"


def kept_whole(value: dict[str, Any], inner: dict[str, Any] | None = None) -> StepRead:
    """A step with no message shape: one ``system`` message ``[TYPE]`` (and its text), the rest in metadata.

    Its text (``content``, ``text``, ...) is taken from the step itself or from ``inner``
    (the object under the step's own ``type`` key); everything else is kept whole.
    """
    kind = value.get("type")
    rest = {key: item for key, item in value.items() if key not in COMMON_KEYS}
    label = f"[{kind}]" if isinstance(kind, str) and kind else "[step]"
    for holder, path in ((rest, ()), (inner, (kind,))):
        if holder is None:
            continue
        for key in TEXT_KEYS:
            text = holder.get(key)
            if isinstance(text, str) and text:
                _drop(rest, (*path, key))
                return StepRead([Piece(Role.system, f"{label}\n{text}", "step")], rest)
    return StepRead([Piece(Role.system, label, "step")], rest)


def _drop(rest: dict[str, Any], path: tuple[Any, ...]) -> None:
    """Remove ``path`` from ``rest``, and the object that held it when nothing else is left in it."""
    if len(path) == 1:
        rest.pop(path[0], None)
        return
    holder = rest.get(path[0])
    if isinstance(holder, dict):
        holder = dict(holder)
        holder.pop(path[1], None)
        if holder:
            rest[path[0]] = holder
        else:
            rest.pop(path[0])


def _created(path: Path, number: int, value: dict[str, Any]) -> datetime | None:
    found = next((value[key] for key in TIME_KEYS if isinstance(value.get(key), str)), None)
    try:
        return _TIMES.validate_python(found)
    except ValidationError:
        raise line_error(path, number, f"not a date-time: {found!r}") from None


def _common(value: dict[str, Any], source: str) -> dict[str, Any]:
    """Metadata every message of a step carries."""
    metadata: dict[str, Any] = {"source": source}
    for key, name in (("type", "step_type"), ("status", "status"), ("step_index", "step_index")):
        if isinstance(value.get(key), str | int) and not isinstance(value.get(key), bool):
            metadata[name] = value[key]
    return metadata


def parse_steps(
    path: Path,
    *,
    partition: str,
    thread_id: str,
    project: str | None,
    source: str,
    reader: StepReader,
    state: ReadState | None = None,
) -> ParsedTranscript:
    """Parse a whole step transcript into append batches of one thread, writing nothing.

    Raises:
        InvalidInput: naming ``FILE:LINE`` for a line that is not a JSON object, a time
            that is not a date-time, or a message the store would refuse.
    """
    grouper = ThreadGrouper(path, strict_project=False)
    ids = StepIds()
    state = state if state is not None else ReadState()
    for number, raw in read_lines(path, state=state):
        value = decode_object(path, number, raw)
        step_id = ids.next(value, reader.turn_text(value))
        read = reader.read(value, step_id)
        created = _created(path, number, value)
        common = _common(value, source)
        rest = {key: item for key, item in read.rest.items() if key not in COMMON_KEYS}
        for position, piece in enumerate(read.pieces):
            metadata = {**common, "kind": piece.kind, **(piece.extra or {})}
            if position == 0 and rest:
                metadata["step"] = rest
            grouper.add(
                number,
                partition=partition,
                thread_id=thread_id,
                project=project,
                message=NewMessage.model_construct(
                    role=piece.role,
                    content=piece.content,
                    message_id=step_id if position == 0 else f"{step_id}#{position}",
                    created_at=created,
                    tool_call_id=piece.tool_call_id,
                    metadata=metadata,
                ),
            )
    return ParsedTranscript(grouper.batches(), 0, state.position)
