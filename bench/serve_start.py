"""How fast ``palimpsest serve`` answers ``initialize`` over stdio, against a minimal FastMCP server.

An agent starts its own stdio server for every session and waits for its ``initialize``
answer, and ``claude mcp list`` starts each one just to see it answer: the handshake is
on the user's path, and whatever the server writes on stderr shows in Claude Code's log
as ``[ERROR] ... Server stderr``. The goal is an answer within 1.1x the time of a
minimal FastMCP server (one tool, the same interpreter), on an existing store and on a
new one, and no stderr line when nothing is wrong.

Each run starts the minimal server and the real command as a client does (``serve
--partition claude``) on an existing SQLite store and on a store that does not exist
yet, in an order that turns from run to run; each gets ``initialize``, and its answer is timed (wall clock, and the CPU
time the server had used by then, which a loaded machine sways far less). Palimpsest's
servers then get one ``memory_stats`` call, timed from the start too (the store opens
in the background, and the first call waits for it), before stdin is closed (the
server exits) and its stderr lines counted. Ratios are of medians, measured in the same
run, since these machines are noisy. Run by hand:

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
from dataclasses import dataclass
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


#: The baseline: the smallest FastMCP server with one tool, served over stdio.
MINIMAL_SERVER = """
from fastmcp import FastMCP

server = FastMCP("minimal")


@server.tool
def echo(text: str) -> str:
    return text


server.run(show_banner=False)
"""
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
FIRST_CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory_stats", "arguments": {}}}


@dataclass
class Start:
    """One server start: seconds to the initialize answer, server CPU by then, to the first call's answer."""

    answered: float
    cpu: float
    first_call: float | None
    stderr_lines: list[str]


def one_start(command: list[str], env: dict[str, str], name: str, *, call: bool) -> Start:
    """Start ``command``, time its ``initialize`` answer (and, with ``call``, a first ``memory_stats``)."""
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
    first_call: float | None = None
    if call and answer:
        process.stdin.write(json.dumps(INITIALIZED) + "\n" + json.dumps(FIRST_CALL) + "\n")
        process.stdin.flush()
        reply = json.loads(process.stdout.readline() or "{}")
        if reply.get("result", {}).get("isError", True):
            raise SystemExit(f"the first tool call failed: {reply}")
        first_call = time.perf_counter() - started
    process.stdin.close()
    process.stdin = None  # closed: the server sees end of input and exits
    try:
        _, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    if not answer:
        raise SystemExit(f"the server did not answer initialize; its stderr:\n{stderr}")
    if json.loads(answer)["result"]["serverInfo"]["name"] != name:
        raise SystemExit(f"not {name}'s answer: {answer}")
    return Start(elapsed, cpu, first_call, [line for line in stderr.splitlines() if line.strip()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--palimpsest", type=Path, default=PALIMPSEST, help="the console script to time")
    args = parser.parse_args()
    kinds = ("minimal FastMCP", "existing store", "new store")
    starts: dict[str, list[Start]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory() as scratch:
        env = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
        existing = f"sqlite:///{Path(scratch) / 'existing.db'}"
        subprocess.run([str(args.palimpsest), "stats", "--store", existing], env=env, check=True, capture_output=True)
        serve = [str(args.palimpsest), "serve", "--partition", "claude", "--store"]
        for run in range(1, args.runs + 1):
            new = f"sqlite:///{Path(scratch) / f'new-{run}.db'}"
            commands = {
                kinds[0]: ([sys.executable, "-c", MINIMAL_SERVER], "minimal"),
                kinds[1]: ([*serve, existing], "palimpsest"),
                kinds[2]: ([*serve, new], "palimpsest"),
            }
            # Each run starts them in another order, so none always follows the same one.
            for kind in kinds[run % 3 :] + kinds[: run % 3]:
                command, name = commands[kind]
                starts[kind].append(one_start(command, env, name, call=name == "palimpsest"))
    table = Table(title=f"palimpsest serve (stdio): time to the initialize answer, median of {args.runs} runs")
    columns = ("server", "initialize (s)", "x minimal", "server CPU to answer (s)", "CPU x minimal", "first call (s)")
    columns += ("stderr lines",)
    for column in columns:
        table.add_column(column, justify="right")
    baseline = statistics.median(start.answered for start in starts[kinds[0]])
    baseline_cpu = statistics.median(start.cpu for start in starts[kinds[0]])
    for kind in kinds:
        answered = statistics.median(start.answered for start in starts[kind])
        cpu = statistics.median(start.cpu for start in starts[kind])
        calls = [start.first_call for start in starts[kind] if start.first_call is not None]
        table.add_row(
            kind,
            f"{answered:.3f}",
            f"{answered / baseline:.2f}",
            f"{cpu:.2f}",
            f"{cpu / baseline_cpu:.2f}",
            f"{statistics.median(calls):.3f}" if calls else "",
            str(max(len(start.stderr_lines) for start in starts[kind])),
        )
    console = Console()
    console.print(table)
    for kind in kinds[1:]:
        for line in starts[kind][-1].stderr_lines:
            console.print(f"stderr ({kind}, last run): {line}", markup=False)


if __name__ == "__main__":
    main()
