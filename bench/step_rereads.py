"""What reading a step transcript whole at every hook costs as a Windsurf conversation grows.

Windsurf and ``agy`` rewrite their step logs in place, so ``palimpsest hook windsurf``
reads the whole file at every call and lets the store drop the steps it holds (ids come
from the steps). This measures one new turn stored (``run_hook`` in process, on a SQLite
store, the command's start left out: ``bench/hook.py`` measures that) after a
conversation of ``N`` turns already stored, against the same turn in a conversation of
one turn, measured in the same run. Each turn is 10 steps (a prompt, answers, a grep,
a file read of ``--file-kb``, two commands, an edit). Run by hand:

    .venv/bin/python bench/step_rereads.py --turns 1 50 200 --repeat 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from palimpsest.graph_schema.backends import open_store
from palimpsest.server.agents.windsurf.hook import request
from palimpsest.server.feeds.hooks import run_hook

#: What a turn's 10 steps store: 5 tool steps with a result are 2 messages each.
MESSAGES_A_TURN = 15


def turn(number: int, file_kb: int) -> list[dict[str, Any]]:
    """One Cascade turn in the transcript's shape (``{"status", "type": T, T: {...}}``)."""
    body = "".join(f"    value_{number}_{i} = {i}\n" for i in range(file_kb * 1024 // 24))

    def step(kind: str, **inner: Any) -> dict[str, Any]:
        return {"status": "done", "type": kind, kind: inner}

    command = {"command": "pytest -q", "cwd": "/home/dev/app"}
    return [
        step("user_input", user_response=f"Request {number}: fix the failing test"),
        step("planner_response", response=f"Looking into request {number}."),
        step("grep_search", query=f"value_{number}", search_path="/home/dev/app", results="app/m.py:3"),
        step("view_file", absolute_path="/home/dev/app/app/m.py", content=body),
        step("run_command", **command, exit_code=1, output="1 failed"),
        step("code_action", path="/home/dev/app/app/m.py", new_content=body),
        step("run_command", **command, exit_code=0, output="1 passed"),
        step("planner_response", response=f"Fixed request {number}."),
        step("list_directory", directory_path="/home/dev/app", results="app\ntests"),
        step("planner_response", response="Anything else?"),
    ]


async def measure(folder: Path, turns: int, repeat: int, file_kb: int) -> float:
    """Median seconds to store one new turn after ``turns`` stored ones."""
    transcript = folder / f"t{turns}.jsonl"
    lines = [step for number in range(turns) for step in turn(number, file_kb)]
    store = open_store(f"sqlite:///{folder / f'm{turns}.db'}")
    await store.initialize()
    payload = {
        "agent_action_name": "post_cascade_response_with_transcript",
        "trajectory_id": f"t{turns}",
        "execution_id": "e",
        "timestamp": "2026-11-30T11:00:00Z",
        "tool_info": {"transcript_path": str(transcript)},
        "cwd": str(folder / "ws"),
    }
    times = []
    try:
        for extra in range(repeat + 1):
            lines += turn(turns + extra, file_kb)
            transcript.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
            began = time.perf_counter()
            report = (await run_hook(store, request(payload), partition="windsurf", budget=0)).report
            if extra:  # the first call stores the whole conversation: untimed
                times.append(time.perf_counter() - began)
                assert report.appended == MESSAGES_A_TURN, report
    finally:
        await store.close()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 50, 200])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--file-kb", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = asyncio.run(measure(Path(tmp), 1, args.repeat, args.file_kb))
        results = [
            (n, base if n == 1 else asyncio.run(measure(Path(tmp), n, args.repeat, args.file_kb))) for n in args.turns
        ]
    table = Table(title=f"one new turn stored after N turns (10 steps a turn, {args.file_kb} KB files)")
    for name in ("turns stored", "steps in file", "ms (median)", "× one-turn conversation"):
        table.add_column(name, justify="right")
    for n, seconds in results:
        table.add_row(str(n), str(10 * (n + 1)), f"{seconds * 1000:.1f}", f"{seconds / base:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()
