"""A compaction killed with SIGKILL leaves whole summaries or none, and a re-run finishes it.

docs/architecture.md promises each compaction step is one transaction. The only honest test is a real
crash: a child process (tests/support/crash_worker.py) compacts a large thread with a small
threshold, so it writes hundreds of summaries, and is SIGKILLed once some exist. The
store must then pass `doctor`, and compacting again must end in exactly the DAG an
uninterrupted run builds (summary ids and digests derive from the children, so the
two can be compared node for node).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.compaction import compact_thread
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.scheduler.extractive import ExtractiveSummarizer
from tests.support.transcripts import transcript
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow

WORKER = Path(__file__).resolve().parents[1] / "support" / "crash_worker.py"
PARTITION = "claude-code"
THREAD = "t-crash"
COUNT = 1000
CONFIG = CompactionSettings(threshold=6, keep_recent=6, escalation_fanin=4)
KILL_AFTER = 30
TIMEOUT_S = 120.0


async def summary_count(store: MemoryStore) -> int:
    return sum((await store.stats(PARTITION)).summaries_by_level.values())


async def reference_dag() -> tuple[dict[str, str], list[int]]:
    """Summary id -> digest, and the uncovered seqs, of an uninterrupted compaction."""
    store = open_store("sqlite:///:memory:", Neo4jCredentials())
    await store.initialize()
    try:
        await store.append_messages(PARTITION, THREAD, transcript(COUNT, prefix="c"))
        await compact_thread(store, PARTITION, THREAD, CONFIG, ExtractiveSummarizer(), force=True)
        dag = {summary.id: summary.digest for summary in (await store.snapshot(PARTITION, THREAD)).summaries}
        return dag, [message.seq for message in await store.uncovered_messages(PARTITION, THREAD)]
    finally:
        await store.close()


async def test_a_killed_compaction_is_finished_by_the_next(store: MemoryStore, store_url: str, tmp_path: Path) -> None:
    await store.append_messages(PARTITION, THREAD, transcript(COUNT, prefix="c"))
    stdout, stderr = tmp_path / "worker.out", tmp_path / "worker.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
            store_url,
            PARTITION,
            THREAD,
            str(CONFIG.threshold),
            str(CONFIG.keep_recent),
            str(CONFIG.escalation_fanin),
            stdout=out,
            stderr=err,
        )

        async def persisted_enough() -> bool:
            if await summary_count(store) >= KILL_AFTER:
                return True
            assert child.returncode is None, f"the worker ended before it was killed: {stderr.read_text()}"
            return False

        try:
            await eventually(
                persisted_enough, TIMEOUT_S, f"the worker persisted fewer than {KILL_AFTER} summaries", 0.01
            )
        finally:
            if child.returncode is None:
                child.send_signal(signal.SIGKILL)
            await child.wait()
    assert child.returncode == -signal.SIGKILL
    assert stdout.read_text() == "", "the worker finished before it was killed"

    reference, reference_uncovered = await reference_dag()
    survived = await store.snapshot(PARTITION, THREAD)
    assert KILL_AFTER <= len(survived.summaries) < len(reference)
    assert await check_store(store) == []
    for summary in survived.summaries:
        assert reference.get(summary.id) == summary.digest, "a summary the crash left differs from the plan"

    result = await compact_thread(store, PARTITION, THREAD, CONFIG, ExtractiveSummarizer(), force=True)

    assert result.status == "compacted"
    assert await check_store(store) == []
    finished = await store.snapshot(PARTITION, THREAD)
    assert {summary.id: summary.digest for summary in finished.summaries} == reference
    uncovered = await store.uncovered_messages(PARTITION, THREAD)
    assert [message.seq for message in uncovered] == reference_uncovered
    # Everything outside the tail is covered (a tool call whose result is in the tail waits with it).
    assert reference_uncovered[0] >= COUNT - CONFIG.keep_recent - 1
    assert reference_uncovered == list(range(reference_uncovered[0], COUNT))
