"""What a SQLite store keeps on disk, all of it: the database, its journal and the vector files.

Why: the size a store reports is what ``PALIMPSEST_MAX_STORE_MB`` bounds and what a user
weighs, so it must be what the store's files hold. Counting the database's pages alone
left out the ``.vectors/`` files beside it (about 1.6 GB at a million messages). Here
every file is counted as the file system has it; what upkeep can give back without
losing anything (free database pages, which SQLite reuses before the file grows, and
vector rows whose embedding was deleted, which maintenance's ``vector_upkeep`` drops) is
reported apart as ``reclaimable``, and archives (``FILE.archive/``, moved out of the
store on purpose) apart again. Reading it costs a few ``stat`` calls and one small JSON
header per embedding model, so ``status`` can show it without opening the store.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from palimpsest.graph_schema.sqlite.vector_file import ROW_BYTES, CacheHeader, cache_directory


@dataclass(frozen=True)
class Footprint:
    """A SQLite store's bytes on disk, by part.

    Attributes:
        database_bytes: The database file, its WAL and its shared-memory file.
        vector_bytes: Every file in ``FILE.vectors/``.
        archive_bytes: Every file in ``FILE.archive/`` (not part of the store's size).
        reclaimable_bytes: Of the store's size, free database pages and dead vector rows.
    """

    database_bytes: int
    vector_bytes: int
    archive_bytes: int
    reclaimable_bytes: int

    @property
    def bytes_on_disk(self) -> int:
        """The store's whole size: database, journal and vector files (archives apart)."""
        return self.database_bytes + self.vector_bytes


def _file_bytes(path: Path) -> int:
    with contextlib.suppress(OSError):
        return path.stat().st_size
    return 0


def _folder_bytes(folder: Path) -> int:
    if not folder.is_dir():
        return 0
    return sum(_file_bytes(path) for path in folder.rglob("*") if path.is_file())


def dead_vector_bytes(folder: Path) -> int:
    """Bytes of vector rows still in the files whose embedding the table no longer holds.

    Counted from each model's header (rows it holds minus rows alive); rows deleted
    since the files were last caught up are not known here until maintenance marks them.
    """
    dead = 0
    for path in folder.glob("*.json") if folder.is_dir() else ():
        try:
            header = CacheHeader.model_validate_json(path.read_bytes())
        except (OSError, ValidationError):
            continue
        dead += (header.rows - header.alive) * (header.dimensions * 4 + ROW_BYTES)
    return dead


def measure(database: str | Path, free_page_bytes: int = 0) -> Footprint:
    """The footprint of the store in ``database``; ``free_page_bytes`` from the open database, if known."""
    path = Path(database).expanduser()
    vectors = cache_directory(str(path))
    return Footprint(
        database_bytes=sum(_file_bytes(Path(f"{path}{suffix}")) for suffix in ("", "-wal", "-shm")),
        vector_bytes=_folder_bytes(vectors),
        archive_bytes=_folder_bytes(path.with_name(path.name + ".archive")),
        reclaimable_bytes=free_page_bytes + dead_vector_bytes(vectors),
    )
