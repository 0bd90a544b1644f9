"""What every transcript format shares: reading JSON lines and grouping messages into batches.

Why a module of its own: the three formats ``palimpsest ingest`` reads (Palimpsest's own JSONL,
Claude Code transcripts, Codex rollouts) differ only in what a line means. Everything
else must behave the same whatever the format, so it lives here once: lines are read
with progress reports, a bad line becomes an error naming ``FILE:LINE`` (and nothing of
the file is written, because every line is checked before the first write), and each
thread's messages keep file order and are cut into batches of at most ``MAX_BATCH``.
The adapters (``ingest`` for JSONL, ``claude_code``, ``codex``, in this package) say
what a line means and hand messages to a ``ThreadGrouper``; ``ingest`` appends the
batches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import MAX_BATCH, MAX_MESSAGE_BYTES, NewMessage, Role
from palimpsest.graph_schema.prepare import check_name

#: How often, in lines, reading reports progress (often enough for a bar, cheap enough).
PROGRESS_EVERY = 2000


@dataclass(frozen=True)
class IngestProgress:
    """Where ingestion of one file stands: ``read`` counts bytes, ``write`` messages."""

    path: Path
    phase: Literal["read", "write"]
    done: int
    total: int


ProgressCallback = Callable[[IngestProgress], None]


@dataclass(frozen=True)
class FilePosition:
    """Where reading starts: a byte offset at the start of a line, and that line's number."""

    offset: int = 0
    line: int = 1


@dataclass
class ReadState:
    """Where a read stopped: after the last whole line read, for the next read to start at."""

    position: FilePosition = field(default_factory=FilePosition)


@dataclass
class IngestBatch:
    """Messages of one thread to append in one call, in file order (at most ``MAX_BATCH``)."""

    partition: str
    thread_id: str
    project: str | None
    messages: list[NewMessage]
    #: Line number (1-based) of the first message of the batch, for error messages.
    first_line: int


@dataclass
class Piece:
    """One message an agent's transcript line yields, before it gets its id and the line's metadata.

    ``kind`` says what it was in the agent's own terms (``text``, ``tool_use``,
    ``tool_result``, ``thinking``); ``extra`` adds metadata of that piece only.
    """

    role: Role
    content: str
    kind: str
    tool_call_id: str | None = None
    extra: dict[str, Any] | None = None


@dataclass
class ParsedTranscript:
    """A whole file, checked and grouped, ready to append; nothing written yet."""

    batches: list[IngestBatch]
    #: Lines that hold no conversation (bookkeeping, metadata), left out on purpose.
    skipped: int = 0
    #: Where reading stopped (the file's end, or before a half-written last line).
    end: FilePosition | None = None

    @property
    def messages(self) -> int:
        """How many messages the file holds, all threads together."""
        return sum(len(batch.messages) for batch in self.batches)


class TranscriptParser(Protocol):
    """The one interface of every transcript format: a whole file in, one `ParsedTranscript` out.

    A parser reads and checks every line before anything is written (a bad line raises
    `InvalidInput` naming ``FILE:LINE``), so the write half (`ingest.append_transcript`)
    is shared by all formats and a file is all or nothing.
    """

    def __call__(self, path: Path, *, partition: str, progress: ProgressCallback | None = None) -> ParsedTranscript: ...


def line_error(path: Path, line: int, reason: str) -> InvalidInput:
    """The error for a bad line: ``FILE:LINE: reason``, saying the file was not written."""
    return InvalidInput(f"{path}:{line}: {reason}; nothing from this file was written")


def describe_validation(exc: ValidationError) -> str:
    """Pydantic's first error as one phrase: ``role: Input should be ...``."""
    first = exc.errors(include_url=False, include_input=False)[0]
    location = ".".join(str(part) for part in first["loc"])
    if first["type"] == "json_invalid":
        return f"malformed JSON ({first['ctx']['error']})"
    if first["type"] == "missing":
        return f"missing field {location!r}"
    if first["type"] == "extra_forbidden":
        return f"unknown field {location!r}"
    if first["type"] == "model_type":
        return "a line must be a JSON object" if not location else f"{location} must be a JSON object"
    return f"{location}: {first['msg']}" if location else first["msg"]


def read_lines(
    path: Path,
    *,
    progress: ProgressCallback | None = None,
    start: FilePosition | None = None,
    state: ReadState | None = None,
) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a file with their 1-based numbers, reporting bytes read.

    A last line without its newline that is not yet a whole JSON value is an agent
    still writing it: it is left for the next read, and ``state`` stops before it.

    Args:
        path: The file to read.
        progress: Called every ``PROGRESS_EVERY`` lines and once at the end.
        start: Where to begin (a line start); the whole file by default.
        state: Updated with the position after each line read, for a later read to resume.

    Raises:
        InvalidInput: if the file cannot be opened.
    """
    begin = start or FilePosition()
    try:
        total = path.stat().st_size
        handle = path.open("rb")
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read the file ({exc.strerror})") from None
    done = begin.offset
    if state is not None:
        state.position = begin
    with handle:
        handle.seek(begin.offset)
        for number, raw in enumerate(handle, start=begin.line):
            if not raw.endswith(b"\n") and raw.strip() and not _whole_json(raw):
                break
            done += len(raw)
            if state is not None:
                state.position = FilePosition(done, number + 1)
            if progress is not None and number % PROGRESS_EVERY == 0:
                progress(IngestProgress(path, "read", done, total))
            if raw.strip():
                yield number, raw
    if progress is not None:
        progress(IngestProgress(path, "read", done, total))


def _whole_json(raw: bytes) -> bool:
    """Whether a line is a complete JSON value (a last line may still be being written)."""
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True


def decode_text(path: Path, number: int, raw: bytes) -> str:
    """A line's bytes as text; invalid UTF-8 is an error naming ``FILE:LINE`` and the byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise line_error(
            path, number, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
        ) from None


def decode_object(path: Path, number: int, raw: bytes) -> dict[str, Any]:
    """A line parsed as a JSON object, or an error naming ``FILE:LINE``."""
    text = decode_text(path, number, raw).rstrip("\r\n")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise line_error(path, number, f"malformed JSON ({exc.msg} at column {exc.pos + 1})") from None
    if not isinstance(value, dict):
        raise line_error(path, number, "a line must be a JSON object")
    return value


def _check_message(message: NewMessage) -> None:
    """What the store would refuse, refused now, before the file's first write."""
    size = len(message.content.encode("utf-8", errors="surrogatepass"))
    if size > MAX_MESSAGE_BYTES:
        raise InvalidInput(f"content is {size} bytes, over the limit of {MAX_MESSAGE_BYTES} bytes")
    try:
        message.content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"content is not valid UTF-8 (a lone surrogate at position {exc.start})") from None
    try:
        json.dumps(message.metadata, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("metadata is not valid UTF-8 (a lone surrogate)") from None
    if message.message_id is not None:
        check_name("message_id", message.message_id)
    if message.tool_call_id is not None:
        check_name("tool_call_id", message.tool_call_id)


@dataclass
class _Thread:
    """The messages of one thread while a file is read."""

    partition: str
    project: str | None
    first_line: int
    messages: list[NewMessage] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)


class ThreadGrouper:
    """Collects a file's messages by thread, checking each one as the store would.

    Args:
        path: The file, for error messages.
        strict_project: Whether a thread named in two projects is an error (the JSONL
            format says so explicitly) or keeps its first one (an agent's working
            directory may change within a session; each message keeps its own in
            metadata).
    """

    def __init__(self, path: Path, *, strict_project: bool) -> None:
        self._path = path
        self._strict_project = strict_project
        self._threads: dict[str, _Thread] = {}

    def add(self, number: int, *, partition: str, thread_id: str, project: str | None, message: NewMessage) -> None:
        """Add the message of line ``number`` to its thread.

        Raises:
            InvalidInput: naming ``FILE:LINE``, for a name the store would refuse, content
                over ``MAX_MESSAGE_BYTES`` or not valid UTF-8, or a thread that the file
                puts in two partitions (or, when strict, two projects).
        """
        try:
            check_name("thread_id", thread_id)
            check_name("partition", partition)
            if project is not None:
                check_name("project", project)
            _check_message(message)
        except InvalidInput as exc:
            raise line_error(self._path, number, str(exc)) from None
        group = self._threads.get(thread_id)
        if group is None:
            group = _Thread(partition, project, number)
            self._threads[thread_id] = group
        elif group.partition != partition:
            raise line_error(
                self._path,
                number,
                f"thread {thread_id!r} is in partition {group.partition!r} on line {group.first_line}, "
                f"{partition!r} here",
            )
        elif project is not None and group.project is None:
            group.project = project
        elif project is not None and group.project != project and self._strict_project:
            raise line_error(
                self._path, number, f"thread {thread_id!r} is in project {group.project!r} earlier, {project!r} here"
            )
        group.messages.append(message)
        group.lines.append(number)

    def batches(self) -> list[IngestBatch]:
        """Every thread's messages in batches of at most ``MAX_BATCH``, threads in order of first line."""
        return [
            IngestBatch(
                partition=group.partition,
                thread_id=thread_id,
                project=group.project,
                messages=group.messages[start : start + MAX_BATCH],
                first_line=group.lines[start],
            )
            for thread_id, group in self._threads.items()
            for start in range(0, len(group.messages), MAX_BATCH)
        ]


def project_from_cwd(cwd: str | None) -> str | None:
    """The project an agent worked on: the last component of its working directory.

    ``None`` when there is no directory or its last component is not a valid name
    (the root, an over-long one), so a thread is then simply left without a project.
    """
    if not cwd:
        return None
    name = cwd.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    try:
        return check_name("project", name)
    except InvalidInput:
        return None
