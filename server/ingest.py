"""Bulk ingestion of transcripts from files: SPEC's JSONL format, one message a line.

Why a module of its own: a file is all or nothing. Every line is parsed and validated
before the first write, so a bad line 7 stops the whole file with an error that names
``FILE:7`` and leaves the store untouched. And a file can be ingested again and again:
a line without ``message_id`` gets a source id derived from its content, so the store's
own idempotence on ``message_id`` turns a second ingestion into duplicates only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from graph_schema.errors import Conflict, InvalidInput, NotFound
from graph_schema.models import MAX_BATCH, MAX_MESSAGE_BYTES, Name, NewMessage, Role, UtcDatetime
from graph_schema.prepare import check_name
from graph_schema.store import MemoryStore

#: The formats ``ingest_files`` reads; Claude Code and Codex adapters add theirs here.
FORMATS = ("jsonl",)
#: How often, in lines, parsing reports progress (often enough for a bar, cheap enough).
_PROGRESS_EVERY = 2000


class JsonlLine(BaseModel):
    """One line of SPEC's JSONL format; unknown keys are refused, not silently dropped."""

    model_config = ConfigDict(extra="forbid")

    thread_id: Name
    role: Role
    content: str
    message_id: Name | None = None
    created_at: UtcDatetime | None = None
    partition: Name | None = None
    project: Name | None = None
    tool_call_id: Name | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


@dataclass
class IngestBatch:
    """Messages of one thread to append in one call, in file order (at most ``MAX_BATCH``)."""

    partition: str
    thread_id: str
    project: str | None
    messages: list[NewMessage]
    #: Line number (1-based) of the first message of the batch, for error messages.
    first_line: int


@dataclass(frozen=True)
class IngestProgress:
    """Where ingestion of one file stands: ``read`` counts bytes, ``write`` messages."""

    path: Path
    phase: Literal["read", "write"]
    done: int
    total: int


ProgressCallback = Callable[[IngestProgress], None]


class FileIngest(BaseModel):
    """What ingesting one file did."""

    path: str
    format: str
    messages: int = Field(description="Message lines read from the file.")
    appended: int = Field(description="Messages the store did not hold yet.")
    duplicates: int = Field(description="Messages already stored (an earlier ingestion).")
    threads: int = Field(description="Distinct threads the file touches.")


class IngestReport(BaseModel):
    """What ingesting a list of files did, per file and in total."""

    files: list[FileIngest]
    messages: int = Field(description="Message lines read, all files together.")
    appended: int = Field(description="Messages newly stored, all files together.")
    duplicates: int = Field(description="Messages already stored, all files together.")
    threads: int = Field(description="Sum of the files' thread counts (a thread in two files counts twice).")


@dataclass
class _ThreadLines:
    """The lines of one thread while a file is parsed."""

    partition: str
    thread_id: str
    project: str | None
    first_line: int
    messages: list[NewMessage] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    occurrences: dict[str, int] = field(default_factory=dict)


def _line_error(path: Path, line: int, reason: str) -> InvalidInput:
    return InvalidInput(f"{path}:{line}: {reason}; nothing from this file was written")


def _describe_validation(exc: ValidationError) -> str:
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
        return "a line must be a JSON object"
    return f"{location}: {first['msg']}" if location else first["msg"]


def line_source_id(line: JsonlLine, occurrence: int) -> str:
    """A deterministic source id for a line that brings no ``message_id`` of its own.

    Derived from what the line says (so ingesting the file again lands on the same id)
    plus how many identical lines came before it in the thread (so two identical
    "ok" turns stay two messages).
    """
    created = line.created_at.isoformat() if line.created_at else None
    key = json.dumps(
        [line.thread_id, line.role.value, line.content, created, line.tool_call_id],
        ensure_ascii=False,
    )
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
    return f"line-{digest}-{occurrence}"


def _parse_line(path: Path, number: int, raw: bytes) -> JsonlLine:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _line_error(
            path, number, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
        ) from None
    try:
        line = JsonlLine.model_validate_json(text)
    except ValidationError as exc:
        raise _line_error(path, number, _describe_validation(exc)) from None
    size = len(line.content.encode("utf-8"))
    if size > MAX_MESSAGE_BYTES:
        raise _line_error(path, number, f"content is {size} bytes, over the limit of {MAX_MESSAGE_BYTES} bytes")
    try:
        for kind, value in (
            ("thread_id", line.thread_id),
            ("partition", line.partition),
            ("project", line.project),
            ("message_id", line.message_id),
            ("tool_call_id", line.tool_call_id),
        ):
            if value is not None:
                check_name(kind, value)
    except InvalidInput as exc:
        raise _line_error(path, number, str(exc)) from None
    return line


def parse_jsonl(path: Path, *, partition: str, progress: ProgressCallback | None = None) -> list[IngestBatch]:
    """Parse and validate a whole JSONL file into append batches, writing nothing.

    Lines are grouped by thread (a thread's lines keep their file order), each line
    takes its own ``partition`` or else ``partition``, and groups are cut into batches
    of at most ``MAX_BATCH``. Blank lines are skipped.

    Args:
        path: The file to read.
        partition: The partition of lines that name none.
        progress: Called now and then with the bytes read so far.

    Returns:
        The batches, threads in order of first appearance.

    Raises:
        InvalidInput: naming ``FILE:LINE`` for the first line that is not valid
            (malformed JSON, invalid UTF-8, unknown role or field, missing field, bad
            timestamp, content over ``MAX_MESSAGE_BYTES``), or a thread that the file
            puts in two partitions or two projects; or if the file cannot be read.
    """
    check_name("partition", partition)
    try:
        total = path.stat().st_size
        handle = path.open("rb")
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read the file ({exc.strerror})") from None
    threads: dict[str, _ThreadLines] = {}
    done = 0
    with handle:
        for number, raw in enumerate(handle, start=1):
            done += len(raw)
            if progress is not None and number % _PROGRESS_EVERY == 0:
                progress(IngestProgress(path, "read", done, total))
            if not raw.strip():
                continue
            line = _parse_line(path, number, raw)
            _add_line(path, number, line, partition, threads)
    if progress is not None:
        progress(IngestProgress(path, "read", done, total))
    return [batch for group in threads.values() for batch in _batches(group)]


def _add_line(path: Path, number: int, line: JsonlLine, partition: str, threads: dict[str, _ThreadLines]) -> None:
    line_partition = line.partition or partition
    group = threads.get(line.thread_id)
    if group is None:
        group = _ThreadLines(line_partition, line.thread_id, line.project, number)
        threads[line.thread_id] = group
    elif group.partition != line_partition:
        raise _line_error(
            path,
            number,
            f"thread {line.thread_id!r} is in partition {group.partition!r} "
            f"on line {group.first_line}, {line_partition!r} here",
        )
    elif line.project is not None and group.project not in (None, line.project):
        raise _line_error(
            path,
            number,
            f"thread {line.thread_id!r} is in project {group.project!r} earlier, {line.project!r} here",
        )
    elif group.project is None:
        group.project = line.project
    source_id = line.message_id
    if source_id is None:
        probe = line_source_id(line, 0)
        occurrence = group.occurrences.get(probe, 0)
        group.occurrences[probe] = occurrence + 1
        source_id = probe if occurrence == 0 else line_source_id(line, occurrence)
    group.messages.append(
        # Every field was validated by JsonlLine with NewMessage's own types.
        NewMessage.model_construct(
            role=line.role,
            content=line.content,
            message_id=source_id,
            created_at=line.created_at,
            tool_call_id=line.tool_call_id,
            metadata=line.metadata,
        )
    )
    group.lines.append(number)


def _batches(group: _ThreadLines) -> Iterable[IngestBatch]:
    for start in range(0, len(group.messages), MAX_BATCH):
        yield IngestBatch(
            partition=group.partition,
            thread_id=group.thread_id,
            project=group.project,
            messages=group.messages[start : start + MAX_BATCH],
            first_line=group.lines[start],
        )


def detect_format(path: Path) -> str:
    """The format of a transcript file, judged by its first non-blank line.

    Content, not the extension, decides: Claude Code transcripts are ``.jsonl`` too.

    Raises:
        InvalidInput: if the file cannot be read or matches no known format.
    """
    try:
        with path.open("rb") as handle:
            first = next((raw for raw in handle if raw.strip()), None)
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read the file ({exc.strerror})") from None
    if first is None:
        return "jsonl"
    try:
        value = json.loads(first)
    except (UnicodeDecodeError, json.JSONDecodeError):
        value = None
    if isinstance(value, dict) and "thread_id" in value and "role" in value:
        return "jsonl"
    raise InvalidInput(
        f"{path}: cannot tell the format from its first line (a JSONL message needs "
        f"thread_id, role and content); supported formats: {', '.join(FORMATS)}"
    )


async def _check_owners(store: MemoryStore, path: Path, batches: Sequence[IngestBatch]) -> None:
    """Refuse, before any write, a thread the store already keeps in another partition."""
    seen: set[str] = set()
    for batch in batches:
        if batch.thread_id in seen:
            continue
        seen.add(batch.thread_id)
        try:
            thread = await store.get_thread(None, batch.thread_id)
        except NotFound:
            continue
        if thread.partition != batch.partition:
            raise Conflict(
                f"{path}:{batch.first_line}: thread {batch.thread_id!r} already exists in "
                f"partition {thread.partition!r}, not {batch.partition!r}; nothing from this file was written"
            )


async def ingest_file(
    store: MemoryStore,
    path: Path,
    *,
    partition: str,
    format: str = "auto",
    progress: ProgressCallback | None = None,
) -> FileIngest:
    """Ingest one file: parse and validate all of it, then append it batch by batch.

    Raises:
        InvalidInput: for an unknown format or any bad line (see ``parse_jsonl``);
            nothing from the file is written.
        Conflict: if a thread of the file lives in another partition; nothing written.
    """
    resolved = detect_format(path) if format == "auto" else format
    if resolved not in FORMATS:
        raise InvalidInput(f"unknown format {format!r}; supported formats: auto, {', '.join(FORMATS)}")
    batches = parse_jsonl(path, partition=partition, progress=progress)
    await _check_owners(store, path, batches)
    total = sum(len(batch.messages) for batch in batches)
    appended = duplicates = written = 0
    for batch in batches:
        result = await store.append_messages(batch.partition, batch.thread_id, batch.messages, project=batch.project)
        appended += result.appended
        duplicates += result.duplicates
        written += len(batch.messages)
        if progress is not None:
            progress(IngestProgress(path, "write", written, total))
    return FileIngest(
        path=str(path),
        format=resolved,
        messages=total,
        appended=appended,
        duplicates=duplicates,
        threads=len({batch.thread_id for batch in batches}),
    )


async def ingest_files(
    store: MemoryStore,
    paths: Sequence[Path],
    *,
    partition: str,
    format: str = "auto",
    progress: ProgressCallback | None = None,
) -> IngestReport:
    """Ingest files one after the other into an initialized store.

    Each file is all or nothing. A bad file stops the run; the files before it are
    already in, and since ingestion is idempotent, running the same command again once
    the file is fixed adds only what is missing.

    Args:
        store: An initialized store.
        paths: Transcript files, ingested in this order.
        partition: The partition of lines that name none.
        format: ``auto`` (judged from each file's content) or ``jsonl``.
        progress: Called with an ``IngestProgress`` while reading and while writing.

    Returns:
        Per-file counts and their totals.

    Raises:
        InvalidInput: naming the file and line of the first bad line.
        Conflict: if a thread of a file lives in another partition.
    """
    files = [await ingest_file(store, path, partition=partition, format=format, progress=progress) for path in paths]
    return IngestReport(
        files=files,
        messages=sum(item.messages for item in files),
        appended=sum(item.appended for item in files),
        duplicates=sum(item.duplicates for item in files),
        threads=sum(item.threads for item in files),
    )
