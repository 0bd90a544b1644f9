"""How fast ``palimpsest serve`` answers ``initialize`` over stdio, and what it prints on stderr meanwhile.

An agent starts its own stdio server for every session, and ``claude mcp list`` starts
each one just to see it answer: the handshake is on the user's path, and whatever the
server writes on stderr shows in Claude Code's log as ``[ERROR] ... Server stderr``. The
goal is an answer in under 1 s on an unloaded machine and no stderr line when nothing is
wrong.

The benchmark starts the real command as a client does (``serve --partition claude`` on
a fresh SQLite store), sends ``initialize`` and times its answer (wall clock, and the CPU
time the server had used by then, which a loaded machine sways far less), then closes
stdin (the server exits) and counts its stderr lines, ``--runs`` times. A bare ``python -c pass`` in
the same run is the baseline for process start, since these machines are noisy. Run by
hand:

    .venv/bin/python bench/serve_start.py --runs 5

``--palimpsest PATH`` times another installation's console script.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

PALIMPSEST = Path(sys.executable).parent / "palimpsest"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
}


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) a live process has used so far, from ``/proc`` (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_start(command: list[str], env: dict[str, str]) -> tuple[float, float, list[str]]:
    """Seconds to the ``initialize`` answer, CPU seconds the server spent on it, its stderr lines."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(INITIALIZE) + "\n")
    process.stdin.flush()
    answer = process.stdout.readline()
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(process.pid)
    process.stdin.close()
    process.stdin = None  # closed: the server sees end of input and exits
    try:
        _, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    if not answer:
        raise SystemExit(f"the server did not answer initialize; its stderr:\n{stderr}")
    if json.loads(answer)["result"]["serverInfo"]["name"] != "palimpsest":
        raise SystemExit(f"not Palimpsest's answer: {answer}")
    return elapsed, cpu, [line for line in stderr.splitlines() if line.strip()]


def baseline() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--palimpsest", type=Path, default=PALIMPSEST, help="the console script to time")
    args = parser.parse_args()
    table = Table(title="palimpsest serve (stdio): time to the initialize answer")
    columns = ("run", "python -c pass (s)", "initialize answered (s)", "server CPU to answer (s)", "stderr lines")
    for column in columns:
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as scratch:
        env = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
        env["PALIMPSEST_STORE"] = f"sqlite:///{Path(scratch) / 'memory.db'}"
        command = [str(args.palimpsest), "serve", "--partition", "claude"]
        starts: list[float] = []
        cpus: list[float] = []
        bases: list[float] = []
        lines: list[str] = []
        for run in range(1, args.runs + 1):
            bases.append(baseline())
            elapsed, cpu, lines = one_start(command, env)
            starts.append(elapsed)
            cpus.append(cpu)
            table.add_row(str(run), f"{bases[-1]:.3f}", f"{elapsed:.3f}", f"{cpu:.2f}", str(len(lines)))
        medians = (statistics.median(bases), statistics.median(starts), statistics.median(cpus))
        table.add_row("median", f"{medians[0]:.3f}", f"{medians[1]:.3f}", f"{medians[2]:.2f}", "", end_section=True)
    console = Console()
    console.print(table)
    ratio = statistics.median(starts) / statistics.median(bases)
    console.print(f"initialize answered in {ratio:.1f}x a bare interpreter's start")
    for line in lines:
        console.print(f"stderr (last run): {line}", markup=False)


if __name__ == "__main__":
    main()
