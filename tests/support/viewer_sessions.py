"""Two Claude Code sessions of one project, stored through the real hook, for the viewer's tests.

Shared by tests/server/ui/test_ui_sessions.py (over HTTP) and test_ui_browser.py (in Chromium).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.models import NewFact
from palimpsest.scheduler import compaction
from palimpsest.scheduler.summarizers import make_summarizer
from palimpsest.server.settings import Settings
from tests.support.transcripts import PNG, PROJECT_CWD, append_jsonl, claude_line

PALIMPSEST = str(Path(sys.executable).parent / "palimpsest")
OLD = "6f1d2c1e-0d55-4c3a-9a51-0a9e6d1b7c01"
NEW = "9a3b7e42-5c1f-4d8e-b2a7-3e6f1c0d9b02"
OLD_AT = datetime(2026, 7, 14, 9, 30, tzinfo=UTC)
NEW_AT = datetime(2026, 11, 20, 14, 0, tzinfo=UTC)
ROUNDS = 60
SCRIPT = "<script>alert('stolen')</script>"
BUILTIN = "builtin:all-MiniLM-L6-v2"


def line(kind: str, uuid: str, content: Any, at: datetime, session: str, **extra: Any) -> dict[str, Any]:
    """A Claude Code line written at ``at``."""
    record = claude_line(kind, uuid, content, 0, session=session, **extra)
    record["timestamp"] = at.isoformat().replace("+00:00", "Z")
    return record


def old_session() -> list[dict[str, Any]]:
    def at(second: int) -> datetime:
        return OLD_AT + timedelta(seconds=second)

    s = OLD
    return [
        line("user", "o1", "Add JWT auth to the billing API", at(0), s),
        line(
            "assistant",
            "o2",
            [
                {"type": "thinking", "thinking": "Look at auth.py before touching the routes.", "signature": "c2ln"},
                {"type": "text", "text": "Reading auth.py."},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "auth.py"}},
            ],
            at(5),
            s,
        ),
        line(
            "user", "o3", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def login(): ..."}], at(6), s
        ),
        line(
            "user",
            "o4",
            [
                {"type": "text", "text": "Why does this screen fail?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            ],
            at(60),
            s,
        ),
        line("user", "o5", "<local-command-stdout>linted</local-command-stdout>", at(61), s, isMeta=True),
        line(
            "assistant",
            "o6",
            f"The token expired. The fix:\n\n```python\nprint('<b>ok</b>')\n```\n\nNot markup: {SCRIPT}",
            at(90),
            s,
        ),
        line("assistant", "o7", "Done: JWT auth added to the billing API.", at(120), s),
    ]


def new_session() -> list[dict[str, Any]]:
    s = NEW
    lines = [line("user", "n0", "Fix the flaky refresh test in tests/test_refresh.py", NEW_AT, s)]
    for i in range(ROUNDS):
        at = NEW_AT + timedelta(minutes=i + 1)
        lines.append(line("assistant", f"n{i}a", f"Step {i}: rerunning the refresh test once more.", at, s))
        lines.append(
            line(
                "assistant",
                f"n{i}b",
                [{"type": "tool_use", "id": f"toolu_n{i}", "name": "Bash", "input": {"command": "pytest -k refresh"}}],
                at,
                s,
            )
        )
        result = "1 passed" if i % 2 else "FAILED tests/test_refresh.py::test_rotated_token"
        lines.append(
            line("user", f"n{i}c", [{"type": "tool_result", "tool_use_id": f"toolu_n{i}", "content": result}], at, s)
        )
    return lines


def hook(folder: Path, session: str, records: list[dict[str, Any]], store_url: str) -> None:
    """Write a transcript and hand it to ``palimpsest hook claude`` as Claude Code's Stop hook does."""
    transcript = append_jsonl(folder / f"{session}.jsonl", records)
    payload = {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": PROJECT_CWD,
        "permission_mode": "default",
        "hook_event_name": "Stop",
    }
    env = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
    # Stored before the hook returns: the viewer is read right after.
    env.update(PALIMPSEST_HOOK_FOLLOW_UP="off", PALIMPSEST_HOOK_QUEUE="off", PALIMPSEST_EMBEDDER="none")
    done = subprocess.run(
        [PALIMPSEST, "hook", "claude", "--store", store_url],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


async def fill(store_url: str, folder: Path) -> dict[str, Any]:
    """Both sessions through the hook; the new one compacted; two facts, one superseding the other."""
    hook(folder, OLD, old_session(), store_url)
    hook(folder, NEW, new_session(), store_url)
    store = open_store(store_url, Neo4jCredentials())
    await store.initialize()
    try:
        settings = Settings(store=store_url, summary_model=None)
        await compaction.compact_thread(store, "claude", NEW, settings.compaction, make_summarizer(settings.llm))
        old = {message.source_id: message for message in await store.get_messages("claude", OLD)}
        new = await store.get_messages("claude", NEW)
        first, second = await store.add_facts(
            [
                NewFact(
                    partition="claude",
                    text="Auth uses HS256 JWTs signed with the billing key",
                    kind="decision",
                    subject="auth",
                    source_message_ids=[old["o1"].id],
                ),
                NewFact(
                    partition="claude",
                    text="Auth uses RS256 JWTs from the JWKS endpoint",
                    kind="decision",
                    subject="auth",
                    source_message_ids=[old["o6"].id, old["o7"].id],
                ),
            ]
        )
        await store.supersede_fact("claude", first.id, second.id, at=old["o7"].created_at)
        dag = await store.summary_dag("claude", NEW)
        return {"old": old, "new": new, "facts": (first, second), "dag": dag}
    finally:
        await store.close()
