"""What the default install costs and how fast its embedder is, beside sentence-transformers.

Three measurements, each printed in a table:

1. **Footprint**: ``pip install .`` into a fresh virtual environment (pip's cache
   makes it quick), then the environment's size on disk and its largest packages. The
   goal is at most 600 MB; the ``semantic`` extra's PyTorch alone takes more.
2. **Throughput**: the built-in embedder (`palimpsest.scheduler.minilm`, numpy) and
   sentence-transformers on CPU embed the same texts in the same run, alternating
   ``--rounds`` times (these machines are noisy: the ratio is what counts), with the
   smallest cosine between their vectors. Texts are agent-session-like: words, code and
   logs of every length up to well past the model's 256-token window.
3. **Handshake**: the installed ``palimpsest serve`` over stdio, asked ``initialize``
   with the default embedder and with ``PALIMPSEST_EMBEDDER=none``: the model loads in
   the background, so both answer alike (goal: under 1 s).

Run by hand, from the development venv (which has sentence-transformers, the
``semantic`` extra):

    .venv/bin/python bench/embedder.py --texts 500 --rounds 3
    .venv/bin/python bench/embedder.py --venv /tmp/fresh --skip-install   # reuse an install
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
#: What a fresh install may take on disk.
FOOTPRINT_GOAL_MB = 600
#: What the handshake may take.
HANDSHAKE_GOAL_S = 1.0


def texts(count: int, seed: int = 24) -> list[str]:
    """``count`` texts of every length, made from this repository's README and code."""
    pick = random.Random(seed)
    words = (ROOT / "README.md").read_text().split() + (ROOT / "scheduler" / "minilm.py").read_text().split()
    lengths = [3, 8, 15, 30, 60, 120, 250, 600]
    return [" ".join(pick.choice(words) for _ in range(pick.choice(lengths))) for _ in range(count)]


def folder_mb(path: Path) -> float:
    """Bytes of every file under ``path`` (not following links), in MB."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            file = Path(folder) / name
            if not file.is_symlink():
                total += file.stat().st_size
    return total / 1e6


def footprint(venv: Path, install: bool, console: Console) -> None:
    if install:
        if venv.exists():
            shutil.rmtree(venv)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        started = time.monotonic()
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(ROOT)], check=True)
        console.print(f"pip install . took {time.monotonic() - started:.0f} s (pip's cache warm or not)")
    site = next((venv / "lib").glob("python3*/site-packages"))
    sizes = sorted(
        ((folder_mb(entry), entry.name) for entry in site.iterdir() if entry.is_dir()), reverse=True
    )  # fmt: skip
    has_torch = (site / "torch").exists()
    table = Table(title=f"fresh `pip install .`: {venv}")
    table.add_column("what")
    table.add_column("MB", justify="right")
    total = folder_mb(venv)
    table.add_row("the whole environment", f"{total:.0f}")
    for size, name in sizes[:8]:
        table.add_row(f"  {name}", f"{size:.0f}")
    table.add_row("torch installed", "yes" if has_torch else "no")
    table.add_row("goal", f"<= {FOOTPRINT_GOAL_MB}")
    console.print(table)


def throughput(count: int, rounds: int, console: Console) -> None:
    from palimpsest.scheduler.embedders import BuiltinEmbedder, SentenceTransformerEmbedder

    corpus = texts(count)
    builtin = BuiltinEmbedder()
    reference = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    ours_s: list[float] = []
    theirs_s: list[float] = []

    async def run() -> float:
        await builtin.embed(corpus[:8])  # load both models, untimed
        await reference.embed(corpus[:8])
        worst = 1.0
        for _ in range(rounds):
            started = time.perf_counter()
            ours = np.asarray(await builtin.embed(corpus))
            ours_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            theirs = np.asarray(await reference.embed(corpus))
            theirs_s.append(time.perf_counter() - started)
            worst = min(worst, float((ours * theirs).sum(axis=1).min()))
        return worst

    worst = asyncio.run(run())
    import torch

    table = Table(title=f"embedding {count} texts on CPU, {rounds} rounds alternating (median)")
    table.add_column("embedder")
    table.add_column("seconds", justify="right")
    table.add_column("texts/s", justify="right")
    table.add_column("vs sentence-transformers", justify="right")
    ours, theirs = statistics.median(ours_s), statistics.median(theirs_s)
    table.add_row("built-in (numpy, 1 BLAS thread)", f"{ours:.2f}", f"{count / ours:.0f}", f"{theirs / ours:.2f}x")
    table.add_row(
        f"sentence-transformers (torch {torch.__version__}, {torch.get_num_threads()} threads)",
        f"{theirs:.2f}",
        f"{count / theirs:.0f}",
        "1.00x",
    )
    console.print(table)
    console.print(f"smallest cosine between the two embedders' vectors: {worst:.6f} (goal >= 0.999)")
    console.print(f"rounds, built-in: {', '.join(f'{s:.2f}' for s in ours_s)} s; "
                  f"sentence-transformers: {', '.join(f'{s:.2f}' for s in theirs_s)} s")  # fmt: skip


def handshake_seconds(palimpsest: Path, embedder: str | None, store: str) -> float:
    """Seconds from starting ``palimpsest serve`` to its answer to ``initialize``."""
    env = {key: value for key, value in os.environ.items() if key != "PALIMPSEST_EMBEDDER"}
    if embedder is not None:
        env["PALIMPSEST_EMBEDDER"] = embedder
    env["PALIMPSEST_STORE"] = store
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(palimpsest), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write((json.dumps(request) + "\n").encode())
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    elapsed = time.perf_counter() - started
    process.stdin.close()
    process.wait(timeout=30)
    if answer.get("id") != 1 or "result" not in answer:
        raise SystemExit(f"unexpected answer to initialize: {answer}")
    return elapsed


def handshake(palimpsest: Path, rounds: int, console: Console) -> None:
    table = Table(title=f"`{palimpsest} serve`: start to the initialize answer (median of {rounds})")
    table.add_column("PALIMPSEST_EMBEDDER")
    table.add_column("seconds", justify="right")
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite:///{Path(folder) / 'memory.db'}"
        for label, spec in (("unset (built-in)", None), ("none", "none")):
            times = [handshake_seconds(palimpsest, spec, store) for _ in range(rounds)]
            table.add_row(label, f"{statistics.median(times):.2f}")
    table.add_row("goal", f"< {HANDSHAKE_GOAL_S:.0f}")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "palimpsest-fresh")
    parser.add_argument("--skip-install", action="store_true", help="measure the --venv already there")
    parser.add_argument("--texts", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["footprint", "throughput", "handshake"], default=None)
    args = parser.parse_args()
    console = Console()
    if args.only in (None, "footprint"):
        footprint(args.venv, not args.skip_install, console)
    if args.only in (None, "throughput"):
        throughput(args.texts, args.rounds, console)
    if args.only in (None, "handshake"):
        installed = args.venv / "bin" / "palimpsest"
        handshake(installed if installed.exists() else Path(sys.executable).parent / "palimpsest", args.rounds, console)


if __name__ == "__main__":
    main()
