"""A child process for tests/scheduler/test_crash.py: compacts one thread until it is killed.

It has to be a real process, not a task, so that SIGKILL stops it between any two
instructions (inside a transaction included), the way a crash or an OOM kill would.

    python tests/support/crash_worker.py STORE_URI PARTITION THREAD_ID THRESHOLD KEEP_RECENT FANIN
"""

from __future__ import annotations

import asyncio
import logging
import sys

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.scheduler.compaction import compact_thread
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.scheduler.extractive import ExtractiveSummarizer


async def main(argv: list[str]) -> None:
    """Compact the thread with ``force`` and print the result as JSON on stdout."""
    uri, partition, thread_id, threshold, keep_recent, fanin = argv
    config = CompactionSettings(threshold=int(threshold), keep_recent=int(keep_recent), escalation_fanin=int(fanin))
    store = open_store(uri, Neo4jCredentials())
    await store.initialize()
    try:
        result = await compact_thread(store, partition, thread_id, config, ExtractiveSummarizer(), force=True)
        print(result.model_dump_json())
    finally:
        await store.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    asyncio.run(main(sys.argv[1:]))
