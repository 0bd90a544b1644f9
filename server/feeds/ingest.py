"""Bulk ingestion of transcript files: pick each file's format, check all of it, append it.

Why a module of its own: a file is all or nothing. Every line is parsed and validated
before the first write, so a bad line 7 stops the whole file with an error that names
``FILE:7`` and leaves the store untouched. And a file can be ingested again and again:
every message gets a source id that does not change between ingestions (the caller's
``message_id``, a Claude Code line's ``uuid``, a Codex rollout's line number, or one
derived from the content), so the store's own idempotence on ``message_id`` turns a
second ingestion into duplicates only, and a transcript that grew adds its new lines.

Three formats share this path: Palimpsest's own JSONL (here) and each agent's
``TRANSCRIPT_FORMAT`` that ``palimpsest.server.agents.registry`` lists: Claude Code
transcripts (``palimpsest.server.agents.claude.transcript``) and Codex rollouts
(``palimpsest.server.agents.codex.transcript``). Each adapter turns a file into checked
batches (``palimpsest.server.feeds.transcripts``); ``append_transcript`` writes them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import Name, NewMessage, Role, UtcDatetime
from palimpsest.graph_schema.prepare import check_name
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.agents import registry
from palimpsest.server.feeds.append import FileIngest, append_transcript
from palimpsest.server.feeds.transcripts import (
    IngestBatch,
    ParsedTranscript,
    ProgressCallback,
    ThreadGrouper,
    TranscriptParser,
    decode_text,
    describe_validation,
    line_error,
    read_lines,
)

#: The formats ``ingest_files`` reads, and the partition each one writes to by default.
DEFAULT_PARTITIONS = {"jsonl": "default"} | {kind.name: kind.partition for kind in registry.transcript_formats()}
FORMATS = tuple(DEFAULT_PARTITIONS)
#: Non-blank lines ``detect_format`` reads at most before giving up.
DETECT_LINES = 50


class JsonlLine(BaseModel):
    """One line of Palimpsest's JSONL format (see docs/agents.md); unknown keys are refused, not dropped."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    thread_id: Name
    role: Role
    content: str
    message_id: Name | None = None
    created_at: UtcDatetime | None = None
    partition: Name | None = None
    project: Name | None = None
    tool_call_id: Name | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class IngestReport(BaseModel):
    """What ingesting a list of files did, per file and in total."""

    model_config = ConfigDict(defer_build=True)

    files: list[FileIngest]
    messages: int = Field(description="Messages read, all files together.")
    appended: int = Field(description="Messages newly stored, all files together.")
    duplicates: int = Field(description="Messages already stored, all files together.")
    skipped: int = Field(0, description="Lines holding no conversation, all files together.")
    threads: int = Field(description="Distinct threads, all files together (a thread in two files counts once).")
    not_transcripts: list[str] = Field(
        default_factory=list,
        description="Files found in a directory that hold no transcript (a workflow's journal.jsonl), left out.",
    )


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
    text = decode_text(path, number, raw)
    try:
        return JsonlLine.model_validate_json(text)
    except ValidationError as exc:
        raise line_error(path, number, describe_validation(exc)) from None


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
    grouper = ThreadGrouper(path, strict_project=True)
    occurrences: dict[tuple[str, str], int] = {}
    for number, raw in read_lines(path, progress=progress):
        line = _parse_line(path, number, raw)
        source_id = line.message_id
        if source_id is None:
            probe = line_source_id(line, 0)
            occurrence = occurrences.get((line.thread_id, probe), 0)
            occurrences[(line.thread_id, probe)] = occurrence + 1
            source_id = probe if occurrence == 0 else line_source_id(line, occurrence)
        grouper.add(
            number,
            partition=line.partition or partition,
            thread_id=line.thread_id,
            project=line.project,
            # Every field was validated by JsonlLine with NewMessage's own types.
            message=NewMessage.model_construct(
                role=line.role,
                content=line.content,
                message_id=source_id,
                created_at=line.created_at,
                tool_call_id=line.tool_call_id,
                metadata=line.metadata,
            ),
        )
    return grouper.batches()


def _parse_jsonl_file(path: Path, *, partition: str, progress: ProgressCallback | None = None) -> ParsedTranscript:
    return ParsedTranscript(parse_jsonl(path, partition=partition, progress=progress))


#: Each format's parser, behind the one `TranscriptParser` interface.
PARSERS: dict[str, TranscriptParser] = {
    "jsonl": _parse_jsonl_file,
} | {kind.name: kind.parse for kind in registry.transcript_formats()}
#: The agents' formats, in the order ``detect_format`` asks them.
DETECTION = registry.detection_order()
#: What a format's recogniser says of a line that is only maybe its, and the format.
MAYBES = {kind.maybe: kind.name for kind in DETECTION if kind.maybe is not None}


def _judge(value: Any, first: bool) -> str | None:
    """The format one line belongs to; a format's ``maybe`` for a line that says too little; ``None``: no format."""
    if not isinstance(value, dict):
        return None
    if "thread_id" in value and "role" in value:
        return "jsonl"
    maybe = None
    for kind in DETECTION:
        verdict = kind.recognizes(value, first)
        if verdict == kind.name:
            return verdict
        maybe = maybe or verdict
    return maybe


def detect_format(path: Path) -> str:
    """The format of a transcript file, judged by its first meaningful lines.

    Content, not the extension, decides: all three formats are ``.jsonl``. A JSONL
    message has ``thread_id`` and ``role``; a Codex rollout line has ``type`` and
    ``payload`` (or, in rollouts before that wrapper, a first line holding the session
    ``id`` and ``timestamp``); a Claude Code line has ``type`` and ``sessionId``. Lines
    that could only be Claude Code bookkeeping (``summary``, ``file-history-snapshot``)
    are read past, up to ``DETECT_LINES``. An empty file is JSONL (it holds nothing).

    Raises:
        InvalidInput: naming the file and line, if the file cannot be read or a line
            matches no known format.
    """
    maybe: str | None = None
    for index, (number, raw) in enumerate(read_lines(path)):
        try:
            value = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            value = None
        verdict = _judge(value, index == 0)
        if verdict is None:
            raise InvalidInput(
                f"{path}:{number}: cannot tell the format (a JSONL message has thread_id, role and content; "
                "a Claude Code line has type and sessionId; a Codex rollout line has type and payload); "
                f"give --format, one of {', '.join(FORMATS)}"
            )
        if verdict not in MAYBES:
            return verdict
        maybe = maybe or MAYBES[verdict]
        if index + 1 >= DETECT_LINES:
            break
    return maybe or "jsonl"


def _ingest_order(path: Path) -> tuple[str, ...]:
    """Sort key of a directory's files: path order, but ``<session>.jsonl`` before ``<session>/...``.

    Claude Code keeps a session's subagents in ``<session>/subagents/*.jsonl`` beside
    ``<session>.jsonl``; plain path order would put them first (``abc`` sorts before
    ``abc.jsonl``), and their messages would take sequence numbers ahead of the turn that
    started them. Comparing the stem, then an empty marker, puts the file first.
    """
    return (*path.parent.parts, path.stem, "", path.suffix)


def _sources(paths: Sequence[Path]) -> list[tuple[Path, bool]]:
    """Each file to ingest and whether it was found in a directory (rather than named)."""
    files: list[tuple[Path, bool]] = []
    for path in paths:
        if path.is_dir():
            found = sorted((item for item in path.rglob("*.jsonl") if item.is_file()), key=_ingest_order)
            if not found:
                raise InvalidInput(f"{path}: no .jsonl file in this directory")
            files.extend((item, True) for item in found)
        elif path.exists():
            files.append((path, False))
        else:
            raise InvalidInput(f"{path}: no such file or directory")
    return files


def expand_paths(paths: Sequence[Path]) -> list[Path]:
    """The files to ingest: each file as given, each directory as every ``*.jsonl`` under it, sorted.

    Sorting by path puts Codex's ``YYYY/MM/DD/rollout-<time>-...`` files in time order,
    and a Claude Code session's own file before its subagents' (``_ingest_order``).

    Raises:
        InvalidInput: if a path does not exist or a directory holds no ``.jsonl`` file.
    """
    return [path for path, _ in _sources(paths)]


def _is_transcript(path: Path, format: str) -> bool:
    """Whether a file found in a directory is a transcript (of ``format``, unless ``auto``).

    Agents keep other JSON lines beside their transcripts (Claude Code's workflow
    ``journal.jsonl``); a directory ingest leaves those out instead of stopping on them.
    """
    try:
        found = detect_format(path)
    except InvalidInput:
        return False
    return format in ("auto", found)


async def ingest_file(
    store: MemoryStore,
    path: Path,
    *,
    partition: str | None = None,
    format: str = "auto",
    progress: ProgressCallback | None = None,
) -> FileIngest:
    """Ingest one file: parse and validate all of it, then append it batch by batch.

    Args:
        store: An initialized store.
        path: The transcript file.
        partition: Where its threads go; ``None`` for the format's own default
            (``DEFAULT_PARTITIONS``). A JSONL line naming its partition keeps it.
        format: ``auto`` (judged from the content) or one of ``FORMATS``.
        progress: Called with an ``IngestProgress`` while reading and while writing.

    Raises:
        InvalidInput: for an unknown format or any bad line; nothing from the file is written.
    """
    if format != "auto" and format not in FORMATS:
        raise InvalidInput(f"unknown format {format!r}; supported formats: auto, {', '.join(FORMATS)}")
    resolved = detect_format(path) if format == "auto" else format
    target = partition if partition is not None else DEFAULT_PARTITIONS[resolved]
    check_name("partition", target)
    parsed = PARSERS[resolved](path, partition=target, progress=progress)
    return await append_transcript(store, path, resolved, parsed, progress=progress)


async def ingest_files(
    store: MemoryStore,
    paths: Sequence[Path],
    *,
    partition: str | None = None,
    format: str = "auto",
    progress: ProgressCallback | None = None,
) -> IngestReport:
    """Ingest files (or directories of ``*.jsonl``) one after the other into an initialized store.

    Each file is all or nothing. A bad file stops the run; the files before it are
    already in, and since ingestion is idempotent, running the same command again once
    the file is fixed adds only what is missing. A file found in a directory that is
    not a transcript at all is left out and listed in ``not_transcripts``.

    Args:
        store: An initialized store.
        paths: Transcript files, ingested in this order; a directory stands for every
            ``*.jsonl`` under it, sorted (see ``expand_paths``).
        partition: Where threads go; ``None`` for each format's own default.
        format: ``auto`` (judged from each file's content) or one of ``FORMATS``.
        progress: Called with an ``IngestProgress`` while reading and while writing.

    Returns:
        Per-file counts and their totals.

    Raises:
        InvalidInput: naming the file and line of the first bad line, or a path that
            does not exist.
    """
    files: list[FileIngest] = []
    left_out: list[str] = []
    for path, in_directory in _sources(paths):
        if in_directory and not _is_transcript(path, format):
            left_out.append(str(path))
            continue
        files.append(await ingest_file(store, path, partition=partition, format=format, progress=progress))
    return IngestReport(
        files=files,
        messages=sum(item.messages for item in files),
        appended=sum(item.appended for item in files),
        duplicates=sum(item.duplicates for item in files),
        skipped=sum(item.skipped for item in files),
        threads=len({thread for item in files for thread in item.thread_ids}),
        not_transcripts=left_out,
    )
