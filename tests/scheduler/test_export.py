"""``export`` and ``import``: a memory to one archive file and back, exactly, or not at all.

A memory is built on SQLite with the ordinary verbs (see ``test_export_contract``),
exported, imported into the store under test (both backends) and exported again: the
two archives must hold the same records. Archives cut short or altered (one byte of
content, a record rehashed, a line dropped) must be refused naming the first bad
record, with nothing written. So must archives forged whole (`forge`: every checksum,
digest and the trailer made again) that plant an id or clash with the store, checked
against the store before the first write: the store is left exactly as it was.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.errors import Conflict, InvalidInput
from palimpsest.graph_schema.identity import message_id, message_sha256
from palimpsest.graph_schema.models import NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.portability.export import export_memory, import_archive
from palimpsest.scheduler.portability.format import (
    Archive,
    read_archive,
)
from palimpsest.server.cli.main import app
from tests.support.archives import at_seq, forge, records, state
from tests.support.memories import MODEL, T0, build_memory

CLEAN_ENV: dict[str, str | None] = {"PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None}


@pytest.fixture
async def source(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    """The SQLite memory of ``test_export_contract``, with t1's fact layer on and read to seq 5."""
    opened = open_store(f"sqlite:///{tmp_path / 'source.db'}")
    await opened.initialize()
    try:
        await build_memory(opened)
        await opened.set_fact_layer("p", "t1", True)
        await opened.advance_fact_cursor("p", "t1", 5)
        yield opened
    finally:
        await opened.close()


def content(archive: Archive) -> dict[str, Any]:
    """What an archive holds, without when and from which kind of store it was made."""
    return {
        "threads": archive.threads,
        "fact_layers": archive.fact_layers,
        "facts": archive.facts,
        "digests": archive.header.threads,
        "counts": archive.header.counts,
    }


def rewrite(path: Path, lines: list[str]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as stream:
        stream.writelines(lines)


def raw_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        return stream.readlines()


def rehashed(data: dict[str, Any]) -> None:
    """A message's sha256 made again over its (changed) fields, as a forger would."""
    data["sha256"] = message_sha256(
        data["partition"], data["thread_id"], data["source_id"], data["role"], data["content"], data["tool_call_id"]
    )


async def cli(*args: str) -> Result:
    """``palimpsest`` in process, in a worker thread: it runs its own event loop."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env=CLEAN_ENV)


def one_error_line(result: Result) -> str:
    """The one ``error:`` line a refused command prints, checked to be alone and the exit 1."""
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


async def test_export_import_export_gives_the_same_content(
    source: MemoryStore, store: MemoryStore, tmp_path: Path
) -> None:
    first, second = tmp_path / "first.jsonl.gz", tmp_path / "second.jsonl.gz"
    exported = await export_memory(source, first, with_vectors=True)
    assert (exported.threads, exported.messages, exported.summaries, exported.facts, exported.vectors) == (
        2,
        11,
        3,
        2,
        2,
    )
    imported = await import_archive(store, first)
    assert imported.written == {"messages": 11, "summaries": 3, "facts": 2, "vectors": 2}
    assert await check_store(store) == []
    assert await store.fact_layer("p", "t1") == await source.fact_layer("p", "t1")
    await export_memory(store, second, with_vectors=True)
    before, after = read_archive(first), read_archive(second)
    assert content(after) == content(before)
    assert (before.header.store, after.header.store) == ("sqlite", store.kind)
    assert [(v.node_id, v.model) for v in after.vectors] == [(v.node_id, v.model) for v in before.vectors]
    for copied, original in zip(after.vectors, before.vectors, strict=True):
        assert copied.vector == pytest.approx(original.vector, abs=1e-6)
    assert {v.model for v in after.vectors} == {MODEL}
    # Importing again writes nothing, not even the vectors the store holds the same.
    again = await import_archive(store, first)
    assert again.written == {"messages": 0, "summaries": 0, "facts": 0, "vectors": 0}


async def test_import_into_a_store_holding_part_adds_only_the_rest(source: MemoryStore, tmp_path: Path) -> None:
    one, whole = tmp_path / "t1.jsonl.gz", tmp_path / "all.jsonl.gz"
    await export_memory(source, one, partition="p", thread_id="t1")
    await export_memory(source, whole)
    assert read_archive(one).header.counts["thread"] == 1
    target = open_store(f"sqlite:///{tmp_path / 'target.db'}")
    await target.initialize()
    try:
        assert (await import_archive(target, one)).written == {"messages": 10, "summaries": 3, "facts": 2, "vectors": 0}
        assert (await import_archive(target, whole)).written == {
            "messages": 1,
            "summaries": 0,
            "facts": 0,
            "vectors": 0,
        }
        assert await target.snapshot(None, "t2") == await source.snapshot(None, "t2")
    finally:
        await target.close()


async def test_export_of_one_partition_leaves_the_others_out(source: MemoryStore, tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl.gz"
    report = await export_memory(source, path, partition="q")
    assert (report.threads, report.messages, report.summaries, report.facts) == (1, 1, 0, 0)
    assert [(entry.partition, entry.id) for entry in read_archive(path).header.threads] == [("q", "t2")]


@pytest.fixture
async def archive(source: MemoryStore, tmp_path: Path) -> Path:
    path = tmp_path / "memory.jsonl.gz"
    await export_memory(source, path)
    return path


async def refused(path: Path, tmp_path: Path, match: str) -> None:
    """Importing ``path`` fails with ``match`` and leaves a fresh store empty."""
    target = open_store(f"sqlite:///{tmp_path / 'refusing.db'}")
    await target.initialize()
    try:
        with pytest.raises(InvalidInput, match=match):
            await import_archive(target, path)
        assert (await target.stats(None)).threads == 0
    finally:
        await target.close()


async def test_an_altered_record_is_refused_by_name(archive: Path, tmp_path: Path) -> None:
    lines = raw_lines(archive)
    assert [json.loads(line)["kind"] for line in lines[1:4]] == ["thread", "fact_layer", "message"]
    lines[3] = lines[3].replace("the deploy pipeline", "the deploy pipelinE", 1)
    rewrite(archive, lines)
    await refused(archive, tmp_path, r"record 3 \(line 4\) \(message\) does not match its checksum")


async def test_a_record_rehashed_after_its_change_breaks_the_chain(archive: Path, tmp_path: Path) -> None:
    from palimpsest.scheduler.portability.format import dumps, record_sha256

    lines = raw_lines(archive)
    record = json.loads(lines[3])
    record["data"]["content"] = "forged"
    record["sha256"] = record_sha256(record["kind"], dumps(record["data"]))
    lines[3] = json.dumps(record, ensure_ascii=False) + "\n"
    rewrite(archive, lines)
    await refused(archive, tmp_path, "trailer that does not match the records before it")


async def test_a_dropped_line_or_a_cut_file_is_refused(archive: Path, tmp_path: Path) -> None:
    lines = raw_lines(archive)
    rewrite(archive, lines[:-3])
    await refused(archive, tmp_path, "is truncated: no trailer")
    rewrite(archive, lines)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    await refused(archive, tmp_path, "truncated or corrupt")


async def test_export_to_a_folder_that_is_not_there_is_one_clear_error(source: MemoryStore, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot write the archive"):
        await export_memory(source, tmp_path / "missing" / "memory.jsonl.gz")
    assert not (tmp_path / "missing").exists()


async def test_a_file_that_is_no_export_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl.gz"
    rewrite(path, ['{"role": "user", "content": "hi"}\n'])
    await refused(path, tmp_path, "is not a Palimpsest export")


async def _built(uri: str) -> None:
    opened = open_store(uri)
    await opened.initialize()
    try:
        await build_memory(opened)
    finally:
        await opened.close()


def test_cli_export_then_import_into_an_empty_store(tmp_path: Path) -> None:
    runner = CliRunner()
    path = tmp_path / "cli.jsonl.gz"
    source_uri = f"sqlite:///{tmp_path / 'source.db'}"
    asyncio.run(_built(source_uri))
    result = runner.invoke(app, ["export", str(path), "--store", source_uri, "--json"], env=CLEAN_ENV)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["messages"] == 11
    target_uri = f"sqlite:///{tmp_path / 'target.db'}"
    result = runner.invoke(app, ["import", str(path), "--store", target_uri], env=CLEAN_ENV)
    assert result.exit_code == 0, result.output
    assert "imported from" in result.stdout
    assert records(path)[0]["counts"]["message"] == 11
    path.write_bytes(b"not gzip at all")
    result = runner.invoke(app, ["import", str(path), "--store", target_uri], env=CLEAN_ENV)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


async def test_an_archive_whose_second_thread_clashes_writes_nothing_of_the_first(
    source: MemoryStore, store: MemoryStore, store_url: str, tmp_path: Path
) -> None:
    # The store's live thread t2 of partition q began otherwise: the archive's t2 would continue it at seq 0.
    await store.append_messages("q", "t2", [NewMessage(role=Role.user, content="another hello", created_at=T0)])
    before = await state(store)
    path = tmp_path / "memory.jsonl.gz"
    await export_memory(source, path)
    assert [(entry.partition, entry.id) for entry in read_archive(path).header.threads] == [("p", "t1"), ("q", "t2")]
    error = one_error_line(await cli("import", str(path), "--store", store_url))
    assert "is seq 0 of thread 't2' of partition 'q' in the archive, but the store's seq 0 is" in error
    assert "nothing was imported" in error
    assert await state(store) == before
    assert before["messages"] == 1 and len(before["threads"]) == 1


async def test_an_id_planted_for_another_partition_is_refused_and_that_partition_ingests_after(
    source: MemoryStore, store: MemoryStore, store_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "planted.jsonl.gz"
    await export_memory(source, path)
    planted = message_id("victim", "vt", "v-0")  # the next message partition victim will get

    def plant(data: dict[str, Any]) -> None:
        data["id"] = planted

    forge(path, at_seq("t1", 9, plant))  # seq 9 is under no summary: only its id is wrong
    error = one_error_line(await cli("import", str(path), "--store", store_url))
    assert f"(message) has id '{planted}', which its partition, thread and source id do not give" in error
    assert (await store.stats(None)).threads == 0
    appended = await store.append_messages(
        "victim", "vt", [NewMessage(role=Role.user, content="mine", message_id="v-0")]
    )
    assert (appended.appended, appended.message_ids) == (1, [planted])
    assert await check_store(store) == []


async def test_import_again_writes_nothing_and_a_known_id_with_other_content_is_refused(
    source: MemoryStore, store: MemoryStore, store_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "memory.jsonl.gz"
    await export_memory(source, path, with_vectors=True)
    first = await cli("import", str(path), "--store", store_url, "--json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["written"] == {"messages": 11, "summaries": 3, "facts": 2, "vectors": 2}
    before = await state(store)
    again = await cli("import", str(path), "--store", store_url, "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["written"] == {"messages": 0, "summaries": 0, "facts": 0, "vectors": 0}
    assert await state(store) == before

    def reworded(data: dict[str, Any]) -> None:
        data["content"] = "we never said that"
        rehashed(data)

    pristine = path.read_bytes()
    forge(path, at_seq("t1", 9, reworded))
    error = one_error_line(await cli("import", str(path), "--store", store_url))
    assert "(seq 9 of thread 't1' of partition 'p') is in the store with other content (its sha256 differs)" in error
    assert await state(store) == before

    path.write_bytes(pristine)
    forge(path, at_seq("t1", 9, lambda data: data.update(metadata={"turn": "forged"})))
    with pytest.raises(Conflict, match="is in the store with another metadata; nothing was imported"):
        await import_archive(store, path)
    path.write_bytes(pristine)

    def retold(kind: str, data: dict[str, Any]) -> None:
        if kind == "summary" and data["level"] == 2:
            data["text"] = "a summary that says otherwise"

    forge(path, retold)
    with pytest.raises(Conflict, match=r"level-2 summary 'sum_\w+' of thread 't1' .* with another text"):
        await import_archive(store, path)
    assert await state(store) == before


async def test_restore_records_on_sqlite_writes_all_or_nothing(source: MemoryStore, tmp_path: Path) -> None:
    target = open_store(f"sqlite:///{tmp_path / 'target.db'}")
    await target.initialize()
    try:
        first, second = await source.snapshot("p", "t1"), await source.snapshot("q", "t2")
        gap = second.model_copy(update={"messages": [m.model_copy(update={"seq": 3}) for m in second.messages]})
        with pytest.raises(InvalidInput, match="needs seq 0 next"):
            await target.restore_records([first, gap], [], [])
        assert (await target.stats(None)).threads == 0
        assert await target.restore_records([first, second], [], []) == (11, 3, 0)
    finally:
        await target.close()


async def test_a_vector_of_another_size_is_refused_before_anything_is_written(
    source: MemoryStore, tmp_path: Path
) -> None:
    path = tmp_path / "vectors.jsonl.gz"
    await export_memory(source, path, with_vectors=True)
    seen: list[str] = []

    def shortened(kind: str, data: dict[str, Any]) -> None:
        if kind == "vector":
            seen.append(data["node_id"])
            if len(seen) == 2:
                data["vector"] = data["vector"][:3]

    forge(path, shortened)
    await refused(path, tmp_path, r"\(vector\) has 3 numbers, not the 4 of the first vector")
