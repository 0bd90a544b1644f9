"""``palimpsest status``: which agents are wired, what each partition captured last, the store.

The store half runs on both stores (what each agent's partition holds, its newest
thread, its backlog); the command runs on a throwaway HOME against a SQLite file, so
wiring, sizes and the JSON shape are checked as a user would see them.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.models import NewMessage
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.server.agents.status import AgentStatus, Status, StoreStatus, Wired, fill_from_store
from palimpsest.server.cli.main import app


def messages(count: int, prefix: str) -> list[NewMessage]:
    return [NewMessage(role="user", content=f"{prefix} message {n}", message_id=f"{prefix}-{n}") for n in range(count)]


def empty_status() -> Status:
    agents = [
        AgentStatus(agent=name, title=name, config_dir=None, user=Wired.no, project=Wired.no)
        for name in ("claude", "codex", "cursor")
    ]
    return Status(project="/p", store=StoreStatus(kind="?", uri="?", exists=True, size_bytes=None), agents=agents)


async def test_each_partition_reports_its_last_capture_and_backlog(store: MemoryStore) -> None:
    await store.append_messages("claude", "old-session", messages(2, "old"))
    await store.append_messages("codex", "rollout-1", messages(6, "codex"))
    await store.append_messages("claude", "new-session", messages(5, "new"))
    await store.append_messages("other", "elsewhere", messages(7, "other"))

    status = empty_status()
    await fill_from_store(status, store, CompactionSettings(threshold=2, keep_recent=0))

    claude, codex, cursor = status.agents
    assert (claude.threads, claude.messages, claude.last_thread, claude.backlog) == (2, 7, "new-session", 1)
    assert (codex.threads, codex.messages, codex.last_thread, codex.backlog) == (1, 6, "rollout-1", 1)
    assert claude.last_capture is not None and codex.last_capture is not None
    assert claude.last_capture >= codex.last_capture
    assert (cursor.threads, cursor.messages, cursor.last_capture, cursor.backlog) == (0, 0, None, 0)
    assert (status.store.threads, status.store.messages, status.store.backlog) == (4, 20, 3)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway HOME and data dir, with a project as the working directory."""
    for name in ("home", "data", "project"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.delenv("PALIMPSEST_STORE", raising=False)
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path


def run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


async def fill(uri: str) -> None:
    opened = open_store(uri)
    await opened.initialize()
    await opened.append_messages("claude", "session-1", messages(3, "s1"))
    await opened.close()


def test_status_shows_wiring_captures_and_the_store(home: Path) -> None:
    uri = f"sqlite:///{home / 'memory.db'}"
    asyncio.run(fill(uri))
    run("install", "claude")
    run("install", "cursor", "--scope", "project")
    run("install", "gemini")
    (home / "home/.codex").mkdir()

    report = json.loads(run("status", "--store", uri, "--json"))
    by_name = {item["agent"]: item for item in report["agents"]}
    assert list(by_name) == ["claude", "codex", "windsurf", "antigravity", "cursor", "gemini"]
    assert (by_name["gemini"]["user"], by_name["gemini"]["config_dir"]) == ("yes", str(home / "home/.gemini"))
    assert (by_name["claude"]["user"], by_name["claude"]["project"]) == ("yes", "no")
    assert (by_name["cursor"]["user"], by_name["cursor"]["project"]) == ("no", "yes")
    assert by_name["codex"]["config_dir"] == str(home / "home/.codex") and by_name["codex"]["user"] == "no"
    assert by_name["windsurf"]["config_dir"] is None
    assert (by_name["claude"]["messages"], by_name["claude"]["last_thread"]) == (3, "session-1")
    assert by_name["claude"]["last_capture"] is not None and by_name["codex"]["last_capture"] is None
    store = report["store"]
    assert (store["kind"], store["uri"], store["exists"], store["messages"]) == ("sqlite", uri, True, 3)
    assert store["size_bytes"] >= (home / "memory.db").stat().st_size > 0
    assert report["project"] == str(home / "project")

    table = run("status", "--store", uri)
    claude_row = next(line for line in table.splitlines() if "claude" in line)
    cells = [cell.strip() for cell in claude_row.split("│")[1:-1]]
    assert cells[:3] == ["claude", "user", "3"] and cells[4] == "0"
    assert re.fullmatch(r"20\d\d-\d\d-\d\d \d\d:\d\d", cells[3])
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in table.splitlines() if "│" in line}
    assert (rows["cursor"], rows["codex"], rows["windsurf"], rows["gemini"]) == ("project", "no", "not found", "user")


def test_status_on_a_store_not_created_yet_creates_nothing(home: Path) -> None:
    report = json.loads(run("status", "--json"))
    path = home / "data/palimpsest/memory.db"
    assert report["store"]["uri"] == f"sqlite:///{path}"
    assert (report["store"]["exists"], report["store"]["size_bytes"]) == (False, None)
    assert not path.exists()
    assert all(item["last_capture"] is None and item["user"] == "no" for item in report["agents"])


def test_status_says_partial_or_unreadable_wiring(home: Path) -> None:
    run("install", "codex")
    (home / "home/.codex/hooks.json").unlink()
    run("install", "windsurf")
    (home / "home/.codeium/windsurf/mcp_config.json").write_text("{not json")
    report = json.loads(run("status", "--json", "--store", f"sqlite:///{home / 'm.db'}"))
    by_name = {item["agent"]: item for item in report["agents"]}
    assert by_name["codex"]["user"] == "partial"
    assert by_name["windsurf"]["user"] == "unreadable"


def test_status_hides_a_password_in_the_store_uri() -> None:
    from palimpsest.server.agents.status import display_uri

    assert display_uri("neo4j+s://admin:s3cret@db.example.com:7687") == "neo4j+s://admin:***@db.example.com:7687"
    assert display_uri("bolt://127.0.0.1:7687") == "bolt://127.0.0.1:7687"


def test_a_store_that_cannot_be_read_still_shows_the_wiring(home: Path) -> None:
    run("install", "cursor")
    (home / "broken.db").write_bytes(b"this is not a SQLite database, just bytes" * 100)
    result = CliRunner().invoke(app, ["status", "--json", "--store", f"sqlite:///{home / 'broken.db'}"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert {item["agent"]: item["user"] for item in report["agents"]}["cursor"] == "yes"
    assert report["store"]["error"] and result.stderr.startswith("error: ")
