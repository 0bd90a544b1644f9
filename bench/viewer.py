"""How fast the viewer's pages answer on a long thread, run by hand: goal, every page under 200 ms at 10k messages.

A SQLite store gets one thread of ``--messages`` messages (tests/transcripts.py: tool
calls paired with results), compacted by the extractive summarizer, beside ``--threads``
short sessions; the real HTTP server (uvicorn on loopback) serves it, and each page is
fetched ``--runs`` times after one first (cold) fetch. The table gives the cold time and
the median and worst of the warm ones, in milliseconds, with the page's size.

    .venv/bin/python bench/viewer.py
    .venv/bin/python bench/viewer.py --messages 2000 --runs 5   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2  # noqa: E402

from palimpsest.graph_schema.backends import open_store  # noqa: E402
from palimpsest.scheduler import compaction  # noqa: E402
from palimpsest.scheduler.summarizers import make_summarizer  # noqa: E402
from palimpsest.server.mcp.app import build_server  # noqa: E402
from palimpsest.server.settings import Settings  # noqa: E402
from tests.support.asgi_server import serving  # noqa: E402
from tests.support.transcripts import transcript  # noqa: E402

GOAL_MS = 200.0
BATCH = 1000


async def fill(store_url: str, messages: int, threads: int) -> tuple[str, int]:
    """The long thread and the short ones; an L1 summary id and the seq of a message in the middle."""
    store = open_store(store_url)
    await store.initialize()
    try:
        long = transcript(messages)
        for start in range(0, messages, BATCH):
            await store.append_messages("claude", "long", long[start : start + BATCH], project="demo")
        for index in range(threads):
            await store.append_messages("claude", f"short-{index}", transcript(40, seed=index), project="demo")
        settings = Settings(store=store_url, summary_model=None)
        await compaction.compact_thread(store, "claude", "long", settings.compaction, make_summarizer(settings.llm))
        dag = await store.summary_dag("claude", "long")
        middle = [node for node in dag.nodes if node.level == 1][len(dag.nodes) // 4]
        return middle.id, messages // 2
    finally:
        await store.close()


async def measure(base: str, path: str, runs: int) -> tuple[float, list[float], int]:
    async with httpx2.AsyncClient(base_url=base, timeout=120) as http:
        start = time.perf_counter()
        first = await http.get(path)
        cold = (time.perf_counter() - start) * 1000
        assert first.status_code == 200, (path, first.status_code, first.text[:300])
        warm = []
        for _ in range(runs):
            start = time.perf_counter()
            (await http.get(path)).raise_for_status()
            warm.append((time.perf_counter() - start) * 1000)
        return cold, warm, len(first.content)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store_url = f"sqlite:///{Path(folder) / 'memory.db'}"
        summary_id, middle = await fill(store_url, args.messages, args.threads)
        settings = Settings(store=store_url, partition=None, tokens_file=None, summary_model=None, scheduler=False)
        settings = settings.model_copy(update={"embedder": "none"})
        thread = {"p": "claude", "t": "long"}
        pages = [
            ("sessions list", "/ui/sessions"),
            ("partition page", "/ui/partition?p=claude"),
            ("thread, page 1", f"/ui/thread?{urlencode(thread)}"),
            ("thread, middle page", f"/ui/thread?{urlencode({**thread, 'page': str(middle // 100 + 1)})}"),
            ("thread at a summary", f"/ui/thread?{urlencode({**thread, 's': summary_id})}"),
            ("project page", "/ui/project?p=claude&project=demo"),
            ("search (text)", "/ui/search?p=claude&q=refresh+token"),
        ]
        table = Table(title=f"viewer pages, {args.messages:,} messages in one thread, {args.threads} more sessions")
        for column in ("page", "cold ms", "median ms", "worst ms", "KB", f"under {GOAL_MS:.0f} ms"):
            table.add_column(column, justify="left" if column == "page" else "right")
        async with serving(build_server(settings)) as base:
            for name, path in pages:
                cold, warm, size = await measure(base, path, args.runs)
                median = statistics.median(warm)
                table.add_row(
                    name,
                    f"{cold:.0f}",
                    f"{median:.0f}",
                    f"{max(warm):.0f}",
                    f"{size / 1000:.0f}",
                    "yes" if median < GOAL_MS else "NO",
                )
        Console().print(table)


if __name__ == "__main__":
    asyncio.run(main())
