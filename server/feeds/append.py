"""The write half every transcript format shares: a parsed file appended batch by batch.

``ingest`` (files named on the command line) and every agent's hook (one turn at a
time) store what their parsers read the same way, and report it in the same shape.
It lives apart from ``palimpsest.server.feeds.ingest`` so that a hook, which runs after
every turn, does not import every format's parser and the format detection to store a turn.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.feeds.transcripts import IngestProgress, ParsedTranscript, ProgressCallback


class FileIngest(BaseModel):
    """What ingesting one file did."""

    path: str
    format: str
    messages: int = Field(description="Messages read from the file (a transcript line may hold several).")
    appended: int = Field(description="Messages the store did not hold yet.")
    duplicates: int = Field(description="Messages already stored (an earlier ingestion).")
    skipped: int = Field(0, description="Lines holding no conversation (bookkeeping, metadata), left out.")
    threads: int = Field(description="Distinct threads the file touches.")
    partitions: list[str] = Field(default_factory=list, description="The partitions the file's threads are in.")
    thread_ids: list[str] = Field(default_factory=list, exclude=True, description="The threads themselves.")


async def append_transcript(
    store: MemoryStore,
    path: Path,
    format: str,
    parsed: ParsedTranscript,
    *,
    progress: ProgressCallback | None = None,
) -> FileIngest:
    """Append a parsed file batch by batch: the write half every format shares.

    A thread is (partition, id), so a thread id another partition also uses is simply
    this partition's own thread of that id.
    """
    batches = parsed.batches
    total = parsed.messages
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
        format=format,
        messages=total,
        appended=appended,
        duplicates=duplicates,
        skipped=parsed.skipped,
        threads=len({batch.thread_id for batch in batches}),
        partitions=sorted({batch.partition for batch in batches}),
        thread_ids=sorted({batch.thread_id for batch in batches}),
    )
