"""What every transcript format shares: reading JSON lines and grouping messages into batches.

Why a module of its own: the three formats ``palimpsest ingest`` reads (Palimpsest's own JSONL,
Claude Code transcripts, Codex rollouts) differ only in what a line means. Everything
else must behave the same whatever the format, so it lives here once: lines are read
with progress reports, a bad line becomes an error naming ``FILE:LINE`` (and nothing of
the file is written, because every line is checked before the first write), and each
thread's messages keep file order and are cut into batches of at most ``MAX_BATCH``.
A file is read only if it is a regular file (`open_regular`): a hook's path comes from
an agent's payload, and ``/dev/zero`` or a FIFO there would never let a read end. A
hook's read is bounded besides (`ReadState.limit`, `ReadState.deadline`) and stops at
the last whole line within them.
The adapters (``ingest`` for JSONL, ``claude_code``, ``codex``, in this package) say
what a line means and hand messages to a ``ThreadGrouper``; ``ingest`` appends the
batches.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal, Protocol

from pydantic import ValidationError

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import MAX_BATCH, MAX_MESSAGE_BYTES, NewMessage, Role
from palimpsest.graph_schema.prepare import check_name
from palimpsest.server.feeds.json_text import JSON_ERRORS, json_error

#: How often, in lines, reading reports progress (often enough for a bar, cheap enough).
PROGRESS_EVERY = 2000
#: The longest line a bounded read takes: one that does not end within it is refused. Lines
#: carrying several base64 screenshots (a few MB each) fit; a line of that size parses in
#: well under a second.
MAX_LINE_BYTES = 64 * 1024 * 1024
#: Non-blocking open where the platform has it: a FIFO swapped in after the check cannot block.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)


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
    """Where a read stopped: after the last whole line read, for the next read to start at.

    A hook bounds its reads (``limit``, ``deadline``) so that a call returns soon however
    much the agent wrote; what is left is read by the next call, from ``position``.
    """

    position: FilePosition = field(default_factory=FilePosition)
    #: The most bytes the read may take past its start; ``None``: to the end (``ingest``).
    limit: int | None = None
    #: The `time.monotonic` value after which no further line is read; ``None``: none.
    deadline: float | None = None
    #: Bytes the read took past its start, a trailing partial line included.
    taken: int = 0
    #: Why the read stopped before the file's end (``limit`` or ``deadline``); ``None``: it reached it.
    cut: Literal["size", "time"] | None = None


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
    #: Where reading stopped (the file's end, before a half-written last line, or at a Claude Code prompt still queued).
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


@dataclass(frozen=True)
class TranscriptFormat:
    """An agent's transcript file as ``palimpsest ingest`` reads it: its name, partition, parser and recogniser.

    An agent folder whose files ``ingest`` reads exposes one as ``TRANSCRIPT_FORMAT`` (see
    ``palimpsest.server.agents.registry``), so ingest keeps no table of its own.
    """

    #: The ``--format`` name.
    name: str
    #: Where its sessions go unless ``--partition`` says otherwise.
    partition: str
    parse: TranscriptParser
    #: One JSON line's verdict: ``name`` (this format's), ``maybe`` (a line only this format
    #: writes that names no session, so later lines decide), or ``None`` (not this format's).
    #: ``first_line`` is whether it is the file's first meaningful line.
    recognizes: Callable[[dict[str, Any], bool], str | None]
    #: What ``recognizes`` says of a line that is only maybe this format's.
    maybe: str | None = None


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


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, for the error refusing it."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def not_regular(path: Path, mode: int) -> InvalidInput:
    """The error for a transcript path that names something else than a regular file."""
    return InvalidInput(f"{path}: {file_kind(mode)}, not a regular file; only regular files are read")


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (or a symlink to one).

    Why: a hook reads the path an agent's payload names, and ``/dev/zero`` there is a
    read without end, a FIFO one that never returns. The type is checked before the
    open, so no device is ever opened; the open does not block, so a FIFO put in the
    file's place after the check cannot hang it; and the open file is checked again.

    Raises:
        InvalidInput: if it cannot be opened, or is not a regular file.
    """
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode)
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read the file ({exc.strerror})") from None
    except ValueError:
        raise InvalidInput(f"{path}: cannot read the file (a path with a NUL byte)") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_lines(
    path: Path,
    *,
    progress: ProgressCallback | None = None,
    start: FilePosition | None = None,
    state: ReadState | None = None,
) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a file with their 1-based numbers, reporting bytes read.

    A last line without its newline is read only when it is a whole JSON value (a
    finished file may lack the final newline); else it is an agent still writing it,
    left for the next read. Either way ``state`` stops before it: a position always
    ends a line, so the next read starts there and parses that one line again, nothing
    before it.

    A bounded read (``state.limit``, ``state.deadline``) stops at the last whole line
    within them, ``state.cut`` saying why; a line that does not end within
    ``MAX_LINE_BYTES`` is refused, since no later read could take it either.

    Args:
        path: The file to read (a regular file).
        progress: Called every ``PROGRESS_EVERY`` lines and once at the end.
        start: Where to begin (a line start); the whole file by default.
        state: Updated with the position after each line read, for a later read to resume.

    Raises:
        InvalidInput: if the file cannot be opened or is not a regular file, or (bounded)
            for a line over ``MAX_LINE_BYTES``.
    """
    begin = start or FilePosition()
    state = state if state is not None else ReadState()
    handle = open_regular(path)
    with handle:
        total = os.fstat(handle.fileno()).st_size
        handle.seek(begin.offset)
        state.position = begin
        done, number = begin.offset, begin.line
        end = None if state.limit is None else begin.offset + state.limit
        while True:
            if state.deadline is not None and time.monotonic() >= state.deadline:
                state.cut = "time"
                break
            room = -1 if end is None else min(end - done, MAX_LINE_BYTES)
            if room == 0:
                state.cut = "size"
                break
            raw = handle.readline(room)
            if not raw:
                break
            state.taken = done + len(raw) - begin.offset
            if not raw.endswith(b"\n"):
                if len(raw) == room == MAX_LINE_BYTES:
                    raise line_error(path, number, f"the line does not end within {MAX_LINE_BYTES} bytes")
                if len(raw) == room:
                    state.cut = "size"
                elif raw.strip() and _whole_json(raw):
                    yield number, raw
                break
            done += len(raw)
            state.position = FilePosition(done, number + 1)
            if progress is not None and number % PROGRESS_EVERY == 0:
                progress(IngestProgress(path, "read", done, total))
            if raw.strip():
                yield number, raw
            number += 1
    if progress is not None:
        progress(IngestProgress(path, "read", begin.offset + state.taken, total))


def _whole_json(raw: bytes) -> bool:
    """Whether a line is a complete JSON value (a last line may still be being written)."""
    try:
        json.loads(raw)
    except JSON_ERRORS:
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
    except JSON_ERRORS as exc:
        raise line_error(path, number, f"malformed JSON ({json_error(exc)})") from None
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
