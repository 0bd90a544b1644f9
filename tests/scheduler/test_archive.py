"""``archive`` and ``restore``: old messages moved to files beside the store and back, byte for byte.

On both stores: a compacted, idle thread's covered messages leave the live store for
an archive file (summaries stay), expanding a summary over them names the file,
``doctor`` passes at every step by reading the file back, and ``restore`` gives the
exact thread back. An altered or missing file is a breach of invariant 1, and a file
forged whole (every checksum made again) is refused by ``restore`` with nothing
changed; threads that are active, uncompacted or hold facts are left live.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.errors import Archived, Conflict, InvalidInput
from palimpsest.graph_schema.identity import message_id
from palimpsest.graph_schema.models import ArchivedRange, NewFact, NewMessage, NewSummary, Role, utcnow
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.config import StoreBudget
from palimpsest.scheduler.maintenance import evolution_steps
from palimpsest.scheduler.portability.archive import (
    archive_threads,
    archive_to_budget,
    parse_duration,
    read_archived_messages,
    restore_archive,
)
from palimpsest.scheduler.portability.export import import_archive
from palimpsest.server.cli.main import app
from tests.support.archives import at_seq, forge, state

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
LATER = timedelta(days=2)
CLEAN_ENV: dict[str, str | None] = {"PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None}


async def compacted_thread(store: MemoryStore, thread_id: str = "old") -> list[str]:
    """12 messages, seq 0-7 under two L1 summaries and an L2; seq 8-11 the live tail. Summary ids."""
    messages = [
        NewMessage(
            role=Role.user if i % 2 == 0 else Role.assistant,
            content=f"step {i}: zanzibar{i} " + "rebuilding the index after the schema change " * 6,
            message_id=f"{thread_id}-{i}",
            created_at=T0 + timedelta(minutes=i),
            metadata={"n": i, "z": "ß", "a": [1, 2]} if i % 4 == 0 else {},
        )
        for i in range(12)
    ]
    ids = (await store.append_messages("p", thread_id, messages, project="api")).message_ids
    summaries = []
    for chunk in (ids[0:4], ids[4:8]):
        new = NewSummary(thread_id=thread_id, partition="p", level=1, text="a level-1 summary", tokens=5,
                         summarizer="test", child_ids=chunk)  # fmt: skip
        summaries.append(await store.persist_summary(new))
    top = NewSummary(thread_id=thread_id, partition="p", level=2, text="the top", tokens=2, summarizer="test",
                     child_ids=[s.id for s in summaries])  # fmt: skip
    return [*(s.id for s in summaries), (await store.persist_summary(top)).id]


async def test_archive_then_restore_is_byte_exact_with_doctor_passing_at_each_step(
    store: MemoryStore, tmp_path: Path
) -> None:
    first, _, top = await compacted_thread(store)
    before = await store.snapshot(None, "old")
    assert await check_store(store, read_archived=read_archived_messages) == []
    report = await archive_threads(store, tmp_path / "archive", older_than=parse_duration("1d"), now=utcnow() + LATER)
    assert (report.threads, report.messages, len(report.files)) == (1, 8, 1)
    # The live store holds the tail only; the summaries, their edges and a record stay.
    assert [m.seq for m in await store.get_messages(None, "old")] == [8, 9, 10, 11]
    after = await store.snapshot(None, "old")
    assert after.summaries == before.summaries and after.thread == before.thread
    (run,) = after.archived
    assert (run.first_seq, run.last_seq, run.path) == (0, 7, report.files[0])
    assert await store.archived_ranges("p") == [run]
    stats = await store.stats("p")
    assert (stats.messages, stats.archived_messages, stats.archived_runs) == (12, 8, 1)
    assert (stats.bytes_on_disk or 0) > 0 if store.kind == "sqlite" else stats.bytes_on_disk is None
    with pytest.raises(Archived, match=f"archived in {run.path}"):
        await store.expand("p", first)
    assert len((await store.expand("p", top, depth=1)).items) == 2
    assert [hit.id for hit in await store.search_text("zanzibar2", partition="p")] == []
    assert [hit.id for hit in await store.search_text("zanzibar9", partition="p")] != []
    assert await check_store(store, read_archived=read_archived_messages) == []
    assert [b.invariant for b in await check_store(store)] == [1]  # nothing here can read the file
    # Appending and compacting go on around the archived run.
    await store.append_messages("p", "old", [NewMessage(role=Role.user, content="one more")])
    restored = await restore_archive(store, Path(run.path))
    assert (restored.threads, restored.messages) == (1, 8)
    back = await store.snapshot(None, "old")
    assert back.archived == []
    assert (await store.stats(None)).archived_messages == 0
    assert back.messages[:12] == before.messages
    assert (await store.expand("p", first)).items == before.messages[0:4]
    assert [hit.id for hit in await store.search_text("zanzibar2", partition="p")] == [before.messages[2].id]
    assert await check_store(store) == []
    with pytest.raises(InvalidInput, match="no archived messages"):
        await restore_archive(store, Path(run.path))


async def test_an_altered_or_missing_archive_is_a_breach_and_cannot_be_restored(
    store: MemoryStore, tmp_path: Path
) -> None:
    await compacted_thread(store)
    report = await archive_threads(store, tmp_path, older_than=timedelta(days=1), now=utcnow() + LATER)
    path = Path(report.files[0])
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        lines = stream.readlines()
    lines[3] = lines[3].replace("rebuilding", "Rebuilding", 1)
    with gzip.open(path, "wt", encoding="utf-8") as stream:
        stream.writelines(lines)
    (breach,) = await check_store(store, read_archived=read_archived_messages)
    assert breach.invariant == 1 and "does not match its checksum" in breach.message and str(path) in breach.message
    with pytest.raises(InvalidInput, match="does not match its checksum"):
        await restore_archive(store, path)
    path.unlink()
    (breach,) = await check_store(store, read_archived=read_archived_messages)
    assert "does not exist" in breach.message
    assert [m.seq for m in await store.get_messages(None, "old")] == [8, 9, 10, 11]


async def test_a_cold_archive_forged_whole_is_refused_and_nothing_changes(store: MemoryStore, tmp_path: Path) -> None:
    await compacted_thread(store)
    report = await archive_threads(store, tmp_path, older_than=timedelta(days=1), now=utcnow() + LATER)
    path = Path(report.files[0])
    pristine = path.read_bytes()
    before = await state(store), await store.archived_ranges(None)

    def later(data: dict[str, object]) -> None:
        data["created_at"] = "2024-05-01T09:30:00Z"  # outside the sha256: only the thread's digest tells

    forge(path, at_seq("old", 2, later))
    with pytest.raises(InvalidInput, match="another digest than the store recorded .* the file was altered"):
        await restore_archive(store, path)
    assert (await state(store), await store.archived_ranges(None)) == before
    path.write_bytes(pristine)
    planted = message_id("victim", "old", "old-10")

    def plant(data: dict[str, object]) -> None:
        data["id"] = planted

    forge(path, at_seq("old", 10, plant))
    with pytest.raises(InvalidInput, match=f"has id '{planted}', which its partition, thread and source id"):
        await restore_archive(store, path)
    assert (await state(store), await store.archived_ranges(None)) == before
    path.write_bytes(pristine)
    # The file is an export of the whole thread: importing it over the archived run says to restore it.
    with pytest.raises(Conflict, match=r"thread 'old' of partition 'p' has seq 0-7 archived in .*palimpsest restore"):
        await import_archive(store, path)
    assert (await state(store), await store.archived_ranges(None)) == before
    assert (await restore_archive(store, path)).messages == 8
    assert await check_store(store) == []


async def test_active_uncompacted_and_fact_holding_threads_stay_live(store: MemoryStore, tmp_path: Path) -> None:
    await compacted_thread(store, "recent")
    await compacted_thread(store, "with-facts")
    await store.append_messages("p", "bare", [NewMessage(role=Role.user, content="hi")])
    message_id = (await store.get_messages(None, "with-facts", limit=1))[0].id
    fact = NewFact(partition="p", text="It uses Redis.", kind="technology", subject="cache",
                   source_message_ids=[message_id])  # fmt: skip
    await store.add_facts([fact])
    recent = await archive_threads(store, tmp_path, older_than=timedelta(days=1))
    assert (recent.threads, recent.skipped) == (0, {"active lately": 3})
    later = await archive_threads(store, tmp_path, older_than=timedelta(days=1), now=utcnow() + LATER)
    assert later.skipped == {"has facts": 1, "nothing compacted": 1}
    assert later.threads == 1
    again = await archive_threads(store, tmp_path, older_than=timedelta(days=1), now=utcnow() + LATER)
    assert again.skipped["already archived"] == 1


async def test_archive_messages_refuses_a_run_not_all_covered(store: MemoryStore) -> None:
    await compacted_thread(store)
    run = ArchivedRange(thread_id="old", partition="p", first_seq=4, last_seq=9, path="x", digest="d",
                        archived_at=utcnow())  # fmt: skip
    with pytest.raises(InvalidInput, match="6 live, 4 covered"):
        await store.archive_messages(run)
    assert await store.archived_ranges(None) == []
    assert len(await store.get_messages(None, "old")) == 12


def test_parse_duration() -> None:
    assert parse_duration("30d") == timedelta(days=30)
    assert parse_duration(" 12h") == timedelta(hours=12)
    with pytest.raises(InvalidInput, match="like 30d"):
        parse_duration("a month")


async def _seeded(uri: str) -> str:
    store = open_store(uri)
    await store.initialize()
    try:
        return (await compacted_thread(store))[0]
    finally:
        await store.close()


def test_cli_archive_expand_doctor_restore(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'memory.db'}"
    summary_id = asyncio.run(_seeded(uri))
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(app, [*args, "--store", uri], env=CLEAN_ENV)
        return result.exit_code, result.stdout, result.stderr

    assert run("archive", "--older-than", "soon")[0] == 1
    code, out, _ = run("archive", "--older-than", "0s", "--json")
    assert code == 0 and '"messages": 8' in out
    (path,) = (tmp_path / "memory.db.archive").iterdir()
    code, _, err = run("expand", summary_id, "--partition", "p")
    assert code == 1 and f"archived in {path}" in err
    assert run("doctor")[0] == 0
    code, out, _ = run("stats", "--partition", "p")
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in out.splitlines() if line.count("│") == 3}
    assert (rows["archived"], rows["archive files"], rows["messages"]) == ("8", "1", "12")
    assert rows["size on disk"].endswith(" MB")
    code, out, _ = run("status", "--json")
    assert code == 0 and (json.loads(out)["store"]["archived_messages"], json.loads(out)["store"]["archived_runs"]) == (
        8,
        1,
    )
    code, out, _ = run("restore", str(path))
    assert code == 0 and "restored 8 messages of 1 threads" in out
    assert run("doctor")[0] == 0
    assert run("expand", summary_id, "--partition", "p")[0] == 0


async def test_the_evolution_tick_archives_the_oldest_threads_past_the_size_budget(
    store: MemoryStore, tmp_path: Path
) -> None:
    await compacted_thread(store, "older")
    await compacted_thread(store, "newer")
    roomy = StoreBudget(max_bytes=10**12, folder=tmp_path)
    assert await archive_to_budget(store, roomy) == 0
    (step,) = [step for step in evolution_steps(store, None, StoreBudget(max_bytes=1, folder=tmp_path))
               if step.name == "archived"]  # fmt: skip
    archived = await step.run(None)  # type: ignore[arg-type]
    if store.kind == "neo4j":  # a server's size is not known here: nothing to measure, nothing moved
        assert archived == 0 and await store.archived_ranges(None) == []
        return
    assert archived == 16  # a byte is never enough: every eligible thread goes, oldest first
    runs = await store.archived_ranges(None)
    assert [run.thread_id for run in sorted(runs, key=lambda run: run.archived_at)] == ["older", "newer"]
    assert await check_store(store, read_archived=read_archived_messages) == []


def test_max_store_mb_sets_a_budget_beside_a_sqlite_store(tmp_path: Path) -> None:
    from palimpsest.server.settings import Settings

    settings = Settings(store=f"sqlite:///{tmp_path / 'm.db'}", max_store_mb=5)
    assert settings.store_budget == StoreBudget(max_bytes=5_000_000, folder=tmp_path / "m.db.archive")
    assert Settings(store=f"sqlite:///{tmp_path / 'm.db'}").store_budget is None
