"""How long ``palimpsest hook claude`` takes to store one new turn, process start included.

A hook runs after every turn of a session, so its cost is paid all day. By default it only
queues the turn on the store's spool for a detached drainer (`palimpsest.server.feeds.spool`):
the goal is under 4 times a bare interpreter's start. In-process (``PALIMPSEST_HOOK_QUEUE=off``)
the goal is one new turn stored end to end in under 250 ms, and a session grown to 100 MB
costing under 50 ms more than a fresh one (the hook reads only the bytes after where it stopped).

The benchmark starts the real command, as the agent does: for a fresh session (one
stored turn) and for a session whose transcript is ``--size-mb`` large (stored once,
untimed), it appends one turn and times the hook storing it, ``--turns`` times. A bare
``python -c pass`` in the same run is the baseline for process start, since these
machines are noisy. Run by hand:

    .venv/bin/python bench/hook.py --size-mb 100 --turns 7

``--instructions`` also counts, under valgrind, the instructions of one fresh turn stored in-process and of
a bare interpreter: a number no other load on the machine sways, to compare two versions
on a busy machine. ``--palimpsest PATH`` times another installation's console script: the development
venv's is an editable install, whose import hook a user's ``pipx`` or ``uv tool``
install does not have (``python -m venv /tmp/v && /tmp/v/bin/pip install .``).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from palimpsest.server.feeds.spool import Spool, pending, spool_for

PALIMPSEST = Path(sys.executable).parent / "palimpsest"
CWD = "/home/ada/src/billing-api"


def line(kind: str, uuid: str, content: Any, session: str) -> str:
    """One Claude Code transcript line."""
    message: dict[str, Any] = {"role": kind, "content": content}
    record = {
        "parentUuid": None,
        "isSidechain": False,
        "cwd": CWD,
        "sessionId": session,
        "type": kind,
        "message": message,
        "uuid": uuid,
        "timestamp": "2026-11-30T09:00:00.000Z",
    }
    return json.dumps(record) + "\n"


def turn(session: str, number: int, output_bytes: int = 200) -> str:
    """A turn: a prompt, a tool call, its result (``output_bytes`` long), the answer."""
    result = ("x" * 79 + "\n") * max(1, output_bytes // 80)
    return "".join(
        [
            line("user", f"{session}-u{number}", f"Request {number}: run the tests", session),
            line(
                "assistant",
                f"{session}-a{number}",
                [{"type": "tool_use", "id": f"toolu_{number}", "name": "Bash", "input": {"command": "pytest -q"}}],
                session,
            ),
            line(
                "user",
                f"{session}-r{number}",
                [{"type": "tool_result", "tool_use_id": f"toolu_{number}", "content": result}],
                session,
            ),
            line("assistant", f"{session}-d{number}", [{"type": "text", "text": f"Turn {number} done."}], session),
        ]
    )


Timing = tuple[float, float]


def _cpu() -> float:
    """CPU seconds the finished children have used (less swayed by a loaded machine than wall time)."""
    times = os.times()
    return times.children_user + times.children_system


def hook_env(folder: Path, *, queue: bool) -> dict[str, str]:
    """The hook's environment: its spool under ``folder``; ``queue`` off stores in the hook's own process."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PALIMPSEST_")}
    env.update(XDG_DATA_HOME=str(folder / "data"), PALIMPSEST_HOOK_QUEUE="on" if queue else "off")
    return env


def wait_drained(store: str, env: dict[str, str]) -> None:
    """Wait (untimed) until the store's spool is empty and no drainer holds it."""
    spool = Spool(str(Path(env["XDG_DATA_HOME"]) / "palimpsest" / "hook-spool"), spool_for(store).key)
    while True:
        if os.path.exists(spool.drain):
            handle = os.open(spool.drain, os.O_RDWR)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX)
                if pending(spool) == 0:
                    return
            finally:
                os.close(handle)
        time.sleep(0.05)


def run_hook(palimpsest: Path, store: str, session: str, transcript: Path, env: dict[str, str]) -> Timing:
    """Wall and CPU seconds the real ``palimpsest hook claude`` takes, process start to exit."""
    stdin = json.dumps(
        {"session_id": session, "transcript_path": str(transcript), "cwd": CWD, "hook_event_name": "Stop"}
    )
    began, cpu = time.perf_counter(), _cpu()
    done = subprocess.run(
        [str(palimpsest), "hook", "claude", "--store", store],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    elapsed = time.perf_counter() - began, _cpu() - cpu
    if done.returncode != 0 or done.stdout or done.stderr:
        raise SystemExit(f"hook failed ({done.returncode}): {done.stderr or done.stdout}")
    return elapsed


def instructions(command: list[str], stdin: str = "", env: dict[str, str] | None = None) -> float:
    """Millions of instructions ``command`` executes under valgrind: a count no other load on the machine sways."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    collected = re.search(r"Collected : (\d+)", done.stderr)
    if collected is None:
        raise SystemExit(f"no instruction count from valgrind: {done.stderr[-500:]}")
    return int(collected.group(1)) / 1e6


def hook_instructions(palimpsest: Path, folder: Path) -> tuple[float, float, float]:
    """Instructions of a bare interpreter's start, of one new turn stored by the hook, and of one queued."""
    transcript = folder / "counted.jsonl"
    transcript.write_text(turn("counted", 0), encoding="utf-8")
    store = f"sqlite:///{folder / 'counted.db'}"
    env = hook_env(folder, queue=False)
    run_hook(palimpsest, store, "counted", transcript, env)
    with transcript.open("a", encoding="utf-8") as handle:
        handle.write(turn("counted", 1))
    stdin = json.dumps(
        {"session_id": "counted", "transcript_path": str(transcript), "cwd": CWD, "hook_event_name": "Stop"}
    )
    bare = instructions([interpreter(palimpsest), "-c", "pass"])
    command = [str(palimpsest), "hook", "claude", "--store", store]
    stored = instructions(command, stdin, env)
    queued_env = hook_env(folder, queue=True)
    queued = instructions(command, stdin, queued_env)
    wait_drained(store, queued_env)
    return bare, stored, queued


def interpreter(script: Path) -> str:
    """The Python a console script runs on (its ``#!`` line): the baseline starts the same one.

    The development venv's own interpreter loads the editable install's import hook at
    every start, which would flatter the ratio of another installation's script.
    """
    with script.open("rb") as handle:
        first = handle.readline().decode("utf-8", errors="replace").strip()
    return first[2:].strip() if first.startswith("#!") and " " not in first[2:].strip() else sys.executable


def bare_start(python: str) -> Timing:
    began, cpu = time.perf_counter(), _cpu()
    subprocess.run([python, "-c", "pass"], check=True)
    return time.perf_counter() - began, _cpu() - cpu


def session_times(
    palimpsest: Path, folder: Path, session: str, size_mb: int, turns: int, *, queue: bool
) -> list[Timing]:
    """Time ``turns`` new turns, one hook call each, stored (with ``queue``: queued) once the session is ``size_mb``.

    A queued turn's drainer is waited for, untimed, before the next turn, so it does not
    compete with the next hook for the CPU.
    """
    store = f"sqlite:///{folder / f'{session}.db'}"
    env = hook_env(folder, queue=queue)
    transcript = folder / f"{session}.jsonl"
    with transcript.open("w", encoding="utf-8") as handle:
        handle.write(turn(session, 0))
        number = 1
        while handle.tell() < size_mb * 1024 * 1024:
            handle.write(turn(session, number, output_bytes=64 * 1024))
            number += 1
    run_hook(palimpsest, store, session, transcript, hook_env(folder, queue=False))  # stores what is there, untimed
    times = []
    for extra in range(turns):
        with transcript.open("a", encoding="utf-8") as handle:
            handle.write(turn(session, 1_000_000 + extra))
        times.append(run_hook(palimpsest, store, session, transcript, env))
        if queue:
            wait_drained(store, env)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=100, help="Size of the large session's transcript.")
    parser.add_argument("--turns", type=int, default=7, help="New turns timed per session.")
    parser.add_argument("--palimpsest", type=Path, default=PALIMPSEST, help="The console script to time.")
    parser.add_argument(
        "--instructions", action="store_true", help="Also count the fresh turn's instructions under valgrind."
    )
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind on PATH")
    console = Console(width=150)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env_note = os.environ.get("PALIMPSEST_STORE")
        if env_note:
            console.print("note: PALIMPSEST_STORE is ignored; each session gets its own SQLite store")
        bare = [bare_start(interpreter(args.palimpsest)) for _ in range(args.turns)]
        queued = session_times(args.palimpsest, folder, "queued", 0, args.turns, queue=True)
        fresh = session_times(args.palimpsest, folder, "fresh", 0, args.turns, queue=False)
        large = session_times(args.palimpsest, folder, "large", args.size_mb, args.turns, queue=False)
        counted = hook_instructions(args.palimpsest, folder) if args.instructions else None
    rows = {
        "bare `python -c pass` (baseline)": bare,
        "queued (default): fresh session": queued,
        "in-process (`PALIMPSEST_HOOK_QUEUE=off`): fresh session": fresh,
        f"in-process: {args.size_mb} MB session": large,
    }
    medians = {name: [statistics.median(t[i] for t in values) * 1000 for i in (0, 1)] for name, values in rows.items()}
    (base, base_cpu), _, (small, small_cpu), (big, _) = medians.values()
    goals = ["", "< 4x bare python", "< 250 ms", f"< fresh + 50 ms ({big - small:+.0f} ms)"]
    table = Table(title=f"palimpsest hook claude: one new turn, median of {args.turns}, process start included")
    for column in ("case", "median ms", "max ms", "CPU ms", "vs bare python", "goal"):
        table.add_column(column)
    for (name, values), goal in zip(rows.items(), goals, strict=True):
        wall, cpu = medians[name]
        worst = max(t[0] for t in values) * 1000
        table.add_row(name, f"{wall:.0f}", f"{worst:.0f}", f"{cpu:.0f}", f"{wall / base:.2f}x", goal)
    if small_cpu and base_cpu:
        console.print(f"CPU: the in-process hook costs {small_cpu - base_cpu:.0f} ms over a bare interpreter's start")
    console.print(table)
    if counted is not None:
        bare_count, hook_count, queued_count = counted
        console.print(
            f"instructions (callgrind): bare python {bare_count:.0f} M, one new turn stored {hook_count:.0f} M "
            f"({hook_count / bare_count:.1f}x), queued {queued_count:.0f} M ({queued_count / bare_count:.1f}x)"
        )


if __name__ == "__main__":
    main()
