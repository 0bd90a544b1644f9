"""What ``palimpsest status`` reports: which agents are wired, what each has captured, the store.

Wiring is read from the agents' own files (Palimpsest's entries present or not), so it
shows what the agent will see, whether ``install`` or a person wrote the entries. The
store half asks the store itself: the newest thread of each agent's partition (its last
capture), the threads waiting for compaction, and the store's size on disk where that is
one ``stat`` (a SQLite file and its journal).
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field

from palimpsest.graph_schema.backends import SQLITE_PREFIX
from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.sqlite.footprint import measure
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.scheduler.maintenance import backlog_floor
from palimpsest.server.agents import documents
from palimpsest.server.agents.spec import Agent, Entries, Places, Scope

#: The most pending threads counted per partition (the count shows as at least this).
BACKLOG_LIMIT = 1000


class Wired(StrEnum):
    """Whether an agent's files at one scope hold Palimpsest's entries."""

    yes = "yes"
    partial = "partial"
    no = "no"
    unreadable = "unreadable"


class AgentStatus(BaseModel):
    """One agent: found on this machine, wired where, and what its partition holds."""

    agent: str = Field(description="The agent's name, also its partition.")
    title: str
    config_dir: str | None = Field(description="The agent's config directory; null when not found.")
    user: Wired
    project: Wired
    threads: int = 0
    messages: int = 0
    last_capture: datetime | None = Field(None, description="When the partition's newest thread last grew.")
    last_thread: str | None = Field(None, description="That thread's id.")
    backlog: int = Field(0, description="Threads of the partition waiting for compaction.")


class StoreStatus(BaseModel):
    """The store every agent shares."""

    kind: str
    uri: str
    exists: bool = Field(description="False for a SQLite file not created yet (status creates none).")
    size_bytes: int | None = Field(
        description="Bytes on disk (SQLite file, journal and vector files); null where not cheap."
    )
    threads: int = 0
    messages: int = 0
    archived_messages: int = Field(0, description="Messages moved to archive files (`palimpsest archive`).")
    archived_runs: int = Field(0, description="Archive files those messages are in.")
    backlog: int = 0
    error: str | None = Field(None, description="Why the store could not be read; the wiring is still shown.")
    hooks_queued: int = Field(0, description="Hook payloads queued on the store's spool, not stored yet.")
    hook_error: str | None = Field(
        None, description="The last error the spool's drainer logged (no agent listens by then), with its time."
    )


class Status(BaseModel):
    """``palimpsest status``: the store, then every agent."""

    project: str
    store: StoreStatus
    agents: list[AgentStatus]


def wired(agent: Agent, scope: Scope, places: Places) -> Wired:
    """Whether every file ``install AGENT --scope SCOPE`` writes holds Palimpsest's entries."""
    entries = Entries(executable="palimpsest")
    found = []
    for config in agent.files(scope, places, entries):
        data = config.path.read_bytes() if config.path.is_file() else None
        try:
            doc = documents.parse(data.decode("utf-8") if data is not None else None, config.fmt, config.path)
        except (InvalidInput, UnicodeDecodeError):
            return Wired.unreadable
        found.append(config.wired(doc))
    if all(found):
        return Wired.yes
    return Wired.partial if any(found) else Wired.no


def display_uri(uri: str) -> str:
    """The store URI without any password it may carry."""
    return re.sub(r"//([^/@:]*):[^/@]*@", r"//\1:***@", uri)


def sqlite_path(uri: str) -> Path | None:
    """The file a ``sqlite:///PATH`` URI names; ``None`` for another store or ``:memory:``."""
    if not uri.startswith(SQLITE_PREFIX) or uri == f"{SQLITE_PREFIX}:memory:":
        return None
    return Path(uri[len(SQLITE_PREFIX) :])


def sqlite_size(path: Path) -> int:
    """Bytes of a SQLite store on disk: the file, its journal and its vector files (`footprint`)."""
    return measure(path).bytes_on_disk


async def fill_from_store(status: Status, store: MemoryStore, compaction: CompactionSettings) -> None:
    """Add the store's counts, and each agent's last capture and backlog, to ``status``."""
    floor = backlog_floor(compaction)
    totals = await store.stats(None)
    status.store.threads, status.store.messages = totals.threads, totals.messages
    status.store.archived_messages, status.store.archived_runs = totals.archived_messages, totals.archived_runs
    pending = await store.compaction_candidates(None, min_uncovered=floor, limit=BACKLOG_LIMIT)
    status.store.backlog = len(pending)
    for item in status.agents:
        counts = await store.stats(item.agent)
        item.threads, item.messages = counts.threads, counts.messages
        newest = await store.list_threads(item.agent, limit=1)
        if newest:
            item.last_capture, item.last_thread = newest[0].updated_at, newest[0].id
        item.backlog = len([thread for thread in pending if thread.partition == item.agent])
