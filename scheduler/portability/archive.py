"""``archive`` and ``restore``: old messages moved to files beside the store, losslessly, and back.

A memory that keeps everything must not grow without bound. A thread that has been
idle for a while and is compacted keeps its summaries, facts and summary vectors live,
while the raw messages under its summaries (the covered prefix; the fresh tail stays)
move to an archive file in the export format (`format`), one file per thread. The file
is written, read back and checked (every record, the trailer, the thread's digest, its
invariants, and each archived message equal to the live one) before the store lets go
of anything, and the store records the run with the file's path and thread digest.

Expanding a summary over an archived run says which file holds the originals
(`palimpsest.graph_schema.errors.Archived`); ``restore`` puts them back byte for byte;
``doctor`` reads each file back through `read_archived_messages` and checks it against
the recorded digest and the summaries above it.

Limits, kept simple on purpose: a thread is archived once (restore it to archive it
again), and threads with facts are left live (a fact's provenance edges point at the
messages).
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, Field

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import ArchivedRange, Message, Thread, ThreadSnapshot, utcnow
from palimpsest.graph_schema.prepare import check_archived_run
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.compaction import Pause
from palimpsest.scheduler.config import StoreBudget
from palimpsest.scheduler.portability.export import export_memory, threads_in_scope
from palimpsest.scheduler.portability.format import Archive, read_archive, thread_digest

_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """``90m``, ``12h``, ``30d``, ``2w`` (or seconds, ``s``) as a timedelta.

    :raises InvalidInput: for anything else.
    """
    found = _DURATION.match(text)
    if found is None:
        raise InvalidInput(f"duration {text!r} is not a number and a unit (s, m, h, d, w), like 30d")
    return timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})


def _file_name(thread: Thread, first_seq: int, last_seq: int) -> str:
    """A safe, unique file name for one thread's run, whatever its id holds."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{thread.partition}--{thread.id}")[:80]
    unique = hashlib.sha256(f"{thread.partition}\x1f{thread.id}".encode()).hexdigest()[:12]
    return f"{safe}-{unique}.seq{first_seq}-{last_seq}.jsonl.gz"


class ArchiveReport(BaseModel):
    """What ``archive`` moved out, and why it left other threads alone."""

    threads: int = Field(description="Threads archived.")
    messages: int = Field(description="Messages moved to files.")
    files: list[str]
    skipped: dict[str, int] = Field(description="Threads left live, by reason.")


def _covered_prefix(snapshot: ThreadSnapshot) -> tuple[int, int] | None:
    """The seq run the summaries cover (compaction goes oldest first, so it starts at 0)."""
    covered = {child_id for summary in snapshot.summaries if summary.level == 1 for child_id in summary.child_ids}
    seqs = sorted(message.seq for message in snapshot.messages if message.id in covered)
    if not seqs or seqs != list(range(seqs[0], seqs[0] + len(seqs))):
        return None
    return seqs[0], seqs[-1]


async def archive_threads(
    store: MemoryStore,
    folder: Path,
    *,
    older_than: timedelta,
    partition: str | None = None,
    now: datetime | None = None,
) -> ArchiveReport:
    """Archive the covered messages of every thread idle for ``older_than`` (see the module).

    Raises:
        InvalidInput: If the folder cannot be written.
    """
    cutoff = (now or utcnow()) - older_than
    report = ArchiveReport(threads=0, messages=0, files=[], skipped={})

    def skip(reason: str) -> None:
        report.skipped[reason] = report.skipped.get(reason, 0) + 1

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(f"cannot create the archive folder {folder}: {exc}") from None
    for thread in await threads_in_scope(store, partition, None):
        if thread.updated_at > cutoff:
            skip("active lately")
            continue
        snapshot = await store.snapshot(thread.partition, thread.id)
        run = _covered_prefix(snapshot)
        if snapshot.archived:
            skip("already archived")
        elif run is None:
            skip("nothing compacted")
        elif await store.list_facts(thread.partition, thread_id=thread.id, current_only=False, limit=1):
            skip("has facts")
        else:
            path = folder / _file_name(thread, *run)
            await archive_run(store, snapshot, run, path)
            report.threads += 1
            report.messages += run[1] - run[0] + 1
            report.files.append(str(path))
    return report


async def archive_run(store: MemoryStore, snapshot: ThreadSnapshot, run: tuple[int, int], path: Path) -> ArchivedRange:
    """Export the thread to ``path``, check the file against the live thread, then let the store drop the run."""
    thread = snapshot.thread
    await export_memory(store, path, partition=thread.partition, thread_id=thread.id)
    archive = read_archive(path)
    digest = thread_digest(snapshot.messages, snapshot.summaries)
    (entry,) = archive.header.threads
    written = _run_messages(archive, thread.partition, thread.id, *run)
    live = [message for message in snapshot.messages if run[0] <= message.seq <= run[1]]
    if entry.digest != digest or written != live:
        path.unlink(missing_ok=True)
        raise InvalidInput(
            f"the archive of thread {thread.id!r} did not read back as the live thread; nothing was moved"
        )
    record = ArchivedRange(
        thread_id=thread.id,
        partition=thread.partition,
        first_seq=run[0],
        last_seq=run[1],
        path=str(path.resolve()),
        digest=entry.digest,
        archived_at=utcnow(),
    )
    return await store.archive_messages(record)


def _run_messages(archive: Archive, partition: str, thread_id: str, first_seq: int, last_seq: int) -> list[Message]:
    for snapshot in archive.threads:
        if (snapshot.thread.partition, snapshot.thread.id) == (partition, thread_id):
            return [message for message in snapshot.messages if first_seq <= message.seq <= last_seq]
    return []


def read_archived_messages(run: ArchivedRange) -> list[Message]:
    """The originals of an archived run, read from its file and checked against the recorded digest.

    What ``doctor`` hands `palimpsest.graph_schema.doctor.check_store`, so archived
    messages are checked like live ones.

    :raises InvalidInput: if the file is gone, unreadable, altered, or holds another
        thread than the one recorded.
    """
    path = Path(run.path)
    archive = read_archive(path)
    entries = {(entry.partition, entry.id): entry.digest for entry in archive.header.threads}
    if entries.get((run.partition, run.thread_id)) != run.digest:
        raise InvalidInput(f"archive {path} does not hold thread {run.thread_id!r} with the digest recorded for it")
    messages = _run_messages(archive, run.partition, run.thread_id, run.first_seq, run.last_seq)
    if [message.seq for message in messages] != list(range(run.first_seq, run.last_seq + 1)):
        raise InvalidInput(f"archive {path} lacks messages of seq {run.first_seq}-{run.last_seq}")
    return messages


async def _kept_bytes(store: MemoryStore) -> int | None:
    """The store's size on disk less what upkeep reclaims (free pages, dead vector rows).

    What an archived run frees becomes reclaimable at once (its pages are reused, its
    vector rows are dropped by the ``vector_upkeep`` step that runs after this one), so
    archiving stops as soon as the store will fit, not when the files have shrunk.
    """
    stats = await store.stats(None)
    if stats.bytes_on_disk is None:
        return None
    return stats.bytes_on_disk - (stats.bytes_reclaimable or 0)


async def archive_to_budget(store: MemoryStore, budget: StoreBudget, *, pause: Pause | None = None) -> int:
    """Archive the least recently updated threads, one at a time, until the store fits its budget.

    The evolution tick's ``archive`` step. A store that cannot tell its size (a Neo4j
    server) is left alone; so are threads `archive_threads` would leave live.

    Returns:
        How many messages were archived.
    """
    archived = 0
    size = await _kept_bytes(store)
    if size is None or size <= budget.max_bytes:
        return 0
    threads = sorted(await threads_in_scope(store, None, None), key=lambda thread: thread.updated_at)
    for thread in threads:
        if pause is not None:
            await pause()
        snapshot = await store.snapshot(thread.partition, thread.id)
        run = _covered_prefix(snapshot)
        if snapshot.archived or run is None:
            continue
        if await store.list_facts(thread.partition, thread_id=thread.id, current_only=False, limit=1):
            continue
        budget.folder.mkdir(parents=True, exist_ok=True)
        await archive_run(store, snapshot, run, budget.folder / _file_name(thread, *run))
        archived += run[1] - run[0] + 1
        size = await _kept_bytes(store)
        if size is None or size <= budget.max_bytes:
            break
    return archived


class RestoreReport(BaseModel):
    """What ``restore`` brought back."""

    path: str
    threads: int
    messages: int


async def restore_archive(store: MemoryStore, path: Path) -> RestoreReport:
    """Put the archived runs an archive file holds back into the store, byte for byte.

    The whole file is checked first (`read_archive`), then every run it holds against
    the store's record of it: the thread's digest must be the one recorded when the run
    left (so the file holds exactly what left), and its messages exactly the run. Only
    then are they written, all in one `MemoryStore.unarchive_messages` call.

    Raises:
        InvalidInput: If the file is not a valid archive, holds a thread the store
            archived into this very file but with another digest (it was altered), or
            no run of the store is archived in it; nothing is restored then.
    """
    archive = read_archive(path)
    here = path.resolve()
    runs: list[tuple[ArchivedRange, list[Message]]] = []
    for entry in archive.header.threads:
        for run in await store.archived_ranges(entry.partition, entry.id):
            if run.digest != entry.digest:
                if Path(run.path) == here:
                    raise InvalidInput(
                        f"archive {path} holds thread {entry.id!r} with another digest than the store recorded when "
                        "it archived it there: the file was altered; nothing was restored"
                    )
                continue
            messages = _run_messages(archive, entry.partition, entry.id, run.first_seq, run.last_seq)
            check_archived_run(run, messages)
            runs.append((run, messages))
    if not runs:
        raise InvalidInput(f"no archived messages of this store are in {path}")
    restored = await store.unarchive_messages(runs)
    return RestoreReport(path=str(path), threads=len(runs), messages=restored)
