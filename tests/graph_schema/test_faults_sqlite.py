"""The SQLite store on a full disk: a clear error, no corruption, and writes resume when space returns.

Why: an embedded store shares its disk with everything else on a laptop, so running out
of space is the SQLite store's most likely fault. Where the machine allows it (root, as
in the project's containers) the database lives on a small tmpfs mounted for the test
and the disk is filled for real; elsewhere the process's file-size limit
(``RLIMIT_FSIZE``) stands in for it, which SQLite sees as a failed write just the same.

What must hold, through a real MCP client on one server that is never restarted: the
append that does not fit is refused with one sentence starting ``store unavailable``,
nothing of it is stored, ``PRAGMA integrity_check`` and ``doctor`` find the database
sound, and once space returns the same append succeeds.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.models import StoreStats
from palimpsest.graph_schema.sqlite.store import SqliteStore
from palimpsest.server.mcp.app import build_server
from palimpsest.server.settings import Settings

DISK_BYTES = 4 * 1024 * 1024
PARTITION = "claude"


class SmallDisk:
    """A directory whose space can be used up and given back: a real small file system, or a file-size limit."""

    def __init__(self, root: Path, *, mount: bool) -> None:
        self.root = root
        self.mount = mount
        self.mounted = False
        self._saved_limit: tuple[int, int] | None = None

    def __enter__(self) -> SmallDisk:
        self.root.mkdir()
        if self.mount and os.geteuid() == 0:
            mounted = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(self.root)],
                capture_output=True,
            )
            self.mounted = mounted.returncode == 0
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.root)], check=True)

    def fill(self) -> None:
        """Leave (almost) no room for the database to grow."""
        if self.mounted:
            with contextlib.suppress(OSError), (self.root / "filler").open("wb", buffering=0) as filler:
                while True:
                    filler.write(b"\0" * 4096)
            return
        # No file system of our own: no file of this process may grow past its present size.
        largest = max(path.stat().st_size for path in self.root.iterdir())
        self._saved_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (largest + 4096, self._saved_limit[1]))

    def free(self) -> None:
        if self.mounted:
            (self.root / "filler").unlink(missing_ok=True)
        elif self._saved_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, self._saved_limit)
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
            self._saved_limit = None


@pytest.fixture(params=["tmpfs", "file-size-limit"])
def small_disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SmallDisk]:
    """Both ways of running out of space; ``tmpfs`` falls back to the limit where mounting is not allowed."""
    with SmallDisk(tmp_path / "disk", mount=request.param == "tmpfs") as disk:
        yield disk


def messages(prefix: str, count: int, size: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": f"{prefix} {i} " + "the build log said " * (size // 19),
            "message_id": f"{prefix}{i}",
        }
        for i in range(count)
    ]


def on_disk(stats: StoreStats) -> dict[str, int | None]:
    """The size fields of ``stats``: what a refused write may change on disk while no row changes."""
    return {name: getattr(stats, name) for name in ("bytes_on_disk", "bytes_reclaimable")}


def integrity(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


async def test_a_full_disk_refuses_cleanly_and_writes_resume(small_disk: SmallDisk) -> None:
    path = small_disk.root / "memory.db"
    store = SqliteStore(str(path))
    settings = Settings(store=f"sqlite:///{path}", partition=PARTITION, scheduler=False, tokens_file=None)
    server = build_server(settings, store=store)
    try:
        async with Client(server, client_info=mcp_types.Implementation(name="faults", version="1")) as session:
            await session.call_tool("append_messages", {"thread_id": "t-disk", "messages": messages("a", 20, 200)})
            before = await store.stats(PARTITION)

            small_disk.fill()
            big = messages("b", 40, 50_000)  # 2 MB: more than the disk has left
            try:
                with pytest.raises(ToolError) as refused:
                    await session.call_tool("append_messages", {"thread_id": "t-disk", "messages": big})
                assert str(refused.value).startswith("store unavailable: ")
                assert "\n" not in str(refused.value)
                reason = "database or disk is full" if small_disk.mounted else "disk I/O error"
                assert reason in str(refused.value), str(refused.value)
                # Reads still answer while the disk is full, with nothing stored; the
                # journal the refused write began may have grown the files on disk.
                during = await store.stats(PARTITION)
                assert during.model_copy(update=on_disk(before)) == before
            finally:
                small_disk.free()

            assert integrity(path) == "ok"
            assert not await check_store(store)
            again = await session.call_tool("append_messages", {"thread_id": "t-disk", "messages": big})
            assert again.structured_content is not None
            assert (again.structured_content["appended"], again.structured_content["duplicates"]) == (40, 0)
            stored = await store.get_messages(PARTITION, "t-disk")
            assert [message.source_id for message in stored] == [f"a{i}" for i in range(20)] + [
                f"b{i}" for i in range(40)
            ]
            assert integrity(path) == "ok"
            assert not await check_store(store)
    finally:
        await store.close()
