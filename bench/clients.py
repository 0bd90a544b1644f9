"""Do the real clients see Palimpsest after ``palimpsest install``? Claude Code, Codex, Gemini CLI.

Not part of ``make test``: it installs the clients from the npm registry (about 300 MB)
into a temporary prefix, so it needs the registry and a few minutes. Then, on a throwaway
HOME (nothing of the user's is read or written), it runs ``palimpsest install
claude|codex|gemini`` and each client's own ``mcp list`` with no account and no network
(a proxy that answers nothing), and prints one row per client: the version, whether
``palimpsest`` is listed and how, and any line where the client reports a hook error.

Gemini CLI starts MCP servers only in trusted folders; the project folder is marked
trusted the way Gemini CLI's own trust dialog does it (``~/.gemini/trustedFolders.json``,
``{"<folder>": "TRUST_FOLDER"}``), since trust is the user's call and ``install`` makes none;
a last row runs ``gemini mcp list`` in a folder not trusted, where Gemini lists the server
as disabled.

    .venv/bin/python bench/clients.py                 # install the clients, then check
    .venv/bin/python bench/clients.py --clients DIR   # reuse clients installed in DIR
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

PALIMPSEST = Path(sys.executable).parent / "palimpsest"
PACKAGES = ("@anthropic-ai/claude-code", "@openai/codex", "@google/gemini-cli")
#: Each client: its command under node_modules/.bin, and the agent name install takes.
CLIENTS = (("claude", "claude"), ("codex", "codex"), ("gemini", "gemini"))
#: A proxy nothing listens on: any request to the network fails at once.
OFFLINE = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}
VERSION = re.compile(r"^(?!WARNING).*\d+\.\d+\.\d+")
HOOK_ERROR = re.compile(r"hook.*(fail|error)|(fail|error).*hook", re.IGNORECASE)


@dataclass
class Row:
    """What one client said."""

    client: str
    version: str
    listed: bool
    status: str
    hook_errors: list[str]
    seconds: float
    output: str


def install_clients(prefix: Path) -> None:
    """``npm install --prefix PREFIX`` the three clients (the registry's latest)."""
    print(f"installing {' '.join(PACKAGES)} into {prefix} ...", flush=True)
    subprocess.run(
        ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel", "error", *PACKAGES],
        check=True,
    )


def throwaway_env(root: Path) -> dict[str, str]:
    """A HOME, data folder and PATH of our own; the user's config is never seen."""
    home, data = root / "home", root / "data"
    home.mkdir()
    data.mkdir()
    keep = {key: os.environ[key] for key in ("PATH", "LANG", "TERM", "PYTHONPATH") if key in os.environ}
    return {**keep, "HOME": str(home), "XDG_DATA_HOME": str(data), "XDG_CONFIG_HOME": str(home / ".config"), **OFFLINE}


def run(command: list[str], env: dict[str, str], cwd: Path, timeout: float = 180) -> tuple[str, float]:
    """Run ``command``; its stdout and stderr together, and the seconds it took."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        output = done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        output = f"{exc.stdout or ''}{exc.stderr or ''}\n(timed out after {timeout:.0f} s)"
    return output, time.perf_counter() - start


def trust(home: Path, folder: Path) -> None:
    """Mark ``folder`` trusted for Gemini CLI, as its trust dialog records it."""
    path = home / ".gemini" / "trustedFolders.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({str(folder): "TRUST_FOLDER"}, indent=2) + "\n", encoding="utf-8")


def check(bin_dir: Path, root: Path) -> list[Row]:
    """Install Palimpsest for each client on a throwaway HOME and ask the client what it lists."""
    root.mkdir(parents=True)
    env = throwaway_env(root)
    project = root / "project"
    project.mkdir()
    untrusted = root / "untrusted"
    untrusted.mkdir()
    store = f"sqlite:///{root / 'memory.db'}"
    trust(Path(env["HOME"]), project)
    rows = []
    runs = [(command, agent, project) for command, agent in CLIENTS] + [("gemini", "gemini", untrusted)]
    for command, agent, folder in runs:
        installed, _ = run([str(PALIMPSEST), "install", agent, "--store", store], env, project)
        if "error" in installed.lower():
            print(installed)
        client = str(bin_dir / command)
        version, _ = run([client, "--version"], env, folder, timeout=60)
        output, seconds = run([client, "mcp", "list"], env, folder)
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        status = next((line for line in lines if "palimpsest" in line), "(not listed)")
        rows.append(
            Row(
                client=command if folder == project else f"{command} (untrusted folder)",
                version=next((line for line in version.splitlines() if VERSION.search(line)), "?").strip(),
                listed="palimpsest" in status and ("Connected" in status or "enabled" in status),
                status=status,
                hook_errors=[line for line in lines if HOOK_ERROR.search(line)],
                seconds=seconds,
                output=output,
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=Path, help="A prefix where the clients are already installed.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="palimpsest-clients-") as scratch:
        root = Path(scratch)
        prefix = args.clients or root / "clients"
        if args.clients is None:
            install_clients(prefix)
        rows = check(prefix / "node_modules" / ".bin", root / "run")
    table = Table(title="palimpsest install, then each client's `mcp list` (throwaway HOME, offline)")
    for column in ("client", "version", "palimpsest listed, enabled", "what it says", "hook errors", "seconds"):
        table.add_column(column, overflow="fold")
    for row in rows:
        errors = "\n".join(row.hook_errors) or "none"
        cells = (row.client, row.version, "yes" if row.listed else "NO", row.status, errors, f"{row.seconds:.1f}")
        table.add_row(*(escape(cell) for cell in cells))
    console = Console(width=160)
    console.print(table)
    for row in rows:
        console.print(f"\n[bold]{row.client} mcp list[/bold], as printed:", highlight=False)
        console.print(escape(row.output.rstrip()), highlight=False)


if __name__ == "__main__":
    main()
